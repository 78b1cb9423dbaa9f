package brokertest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Mirror helpers for two-cluster tests (SPEC §6): the destination is the
// cluster whose controller the call goes to.

// MirrorAdmin is a MirrorService client to the controller.
func (c *Cluster) MirrorAdmin() pb.MirrorServiceClient {
	return pb.NewMirrorServiceClient(c.conn(c.ctlAddr))
}

// BootstrapAddrs are the addresses of every broker (a mirror's source
// bootstrap list).
func (c *Cluster) BootstrapAddrs() []string {
	var out []string
	for _, id := range c.IDs() {
		out = append(out, c.Addr(id))
	}
	return out
}

func mirrorResults(what string, rs []*pb.MirrorTopicResult) error {
	for _, r := range rs {
		if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			return fmt.Errorf("%s %s: %v %s", what, r.GetTopic(), r.GetError(), r.GetErrorMessage())
		}
	}
	return nil
}

// CreateMirror defines mirror name on this (destination) cluster from src
// and starts topics.
func (c *Cluster) CreateMirror(name string, src *Cluster, topics ...string) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.MirrorAdmin().CreateMirror(ctx, &pb.CreateMirrorRequest{Name: name, SourceBootstrap: src.BootstrapAddrs(), Topics: topics})
	if err != nil {
		c.T.Fatalf("CreateMirror: %v", err)
	}
	if resp.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		c.T.Fatalf("CreateMirror: %v %s", resp.GetError(), resp.GetErrorMessage())
	}
	if err := mirrorResults("CreateMirror", resp.GetTopics()); err != nil {
		c.T.Fatal(err)
	}
}

// StartMirror starts topics of mirror name again (failback).
func (c *Cluster) StartMirror(name string, topics ...string) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.MirrorAdmin().StartMirrorTopics(ctx, &pb.StartMirrorTopicsRequest{Mirror: name, Topics: topics})
	if err != nil {
		c.T.Fatalf("StartMirrorTopics: %v", err)
	}
	if err := mirrorResults("StartMirrorTopics", resp.GetTopics()); err != nil {
		c.T.Fatal(err)
	}
}

// StopMirror asks for STOPPED and returns the per-topic results.
func (c *Cluster) StopMirror(name string, wait bool, timeout time.Duration, topics ...string) []*pb.MirrorTopicResult {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	resp, err := c.MirrorAdmin().StopMirrorTopics(ctx, &pb.StopMirrorTopicsRequest{Mirror: name, Topics: topics,
		WaitForCatchUp: wait, TimeoutMs: int32(timeout.Milliseconds())})
	if err != nil {
		c.T.Fatalf("StopMirrorTopics: %v", err)
	}
	return resp.GetTopics()
}

// MirrorState is the mirror partition's status as its current leader's
// runner reports it (nil if there is none yet).
func (c *Cluster) MirrorState(topic string, p int32) *pb.MirrorPartitionStatus {
	leader, _, _, _, ok := c.PartitionInfo(topic, p)
	if !ok || leader < 0 {
		return nil
	}
	b := c.Broker(leader)
	if b == nil {
		return nil
	}
	return b.MirrorStatus(twinlog.TopicPartition{Topic: topic, Partition: p})
}

// WaitMirrorState waits until the leader reports state for topic-p.
func (c *Cluster) WaitMirrorState(topic string, p int32, state pb.MirrorState) *pb.MirrorPartitionStatus {
	c.T.Helper()
	var st *pb.MirrorPartitionStatus
	c.WaitForTimeout(fmt.Sprintf("%s-%d %v", topic, p, state), 60*time.Second, func() bool {
		st = c.MirrorState(topic, p)
		return st != nil && st.GetState() == state
	})
	return st
}

// LogString renders broker id's local log of topic-p as "o@eX …": offset,
// record epoch and origin, the first byte of the batch's first value (the
// tests write values starting with their cluster's letter). Empty log: "".
func (c *Cluster) LogString(id twinlog.BrokerID, topic string, p int32) string {
	c.T.Helper()
	b := c.Broker(id)
	if b == nil {
		return "<down>"
	}
	bs, err := b.LocalBatches(twinlog.TopicPartition{Topic: topic, Partition: p})
	if err != nil {
		return "<" + err.Error() + ">"
	}
	var parts []string
	for _, bv := range bs {
		rs, err := bv.Records()
		origin := "?"
		if err == nil && len(rs) > 0 && len(rs[0].Value) > 0 {
			origin = string(rs[0].Value[:1])
		}
		if bv.BaseOffset() == bv.LastOffset() {
			parts = append(parts, fmt.Sprintf("%d@%d%s", bv.BaseOffset(), bv.LeaderEpoch(), origin))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d@%d%s", bv.BaseOffset(), bv.LastOffset(), bv.LeaderEpoch(), origin))
		}
	}
	return strings.Join(parts, " ")
}

// LeaderLog is LogString of the current leader.
func (c *Cluster) LeaderLog(topic string, p int32) string {
	c.T.Helper()
	l, _ := c.Leader(topic, p)
	return c.LogString(l, topic, p)
}

// Unreachable cuts every node of c from every node of o (both controllers
// and test clients included): "a cluster that fails is only unreachable from
// the other" (SPEC §6.9).
func (c *Cluster) Unreachable(o *Cluster) {
	for _, x := range c.nodeNames() {
		for _, y := range o.nodeNames() {
			c.Net.Cut(x, y)
		}
	}
}

// Reachable heals every link Unreachable cut.
func (c *Cluster) Reachable(o *Cluster) {
	for _, x := range c.nodeNames() {
		for _, y := range o.nodeNames() {
			c.Net.Heal(x, y)
		}
	}
	c.notify()
	o.notify()
}

func (c *Cluster) nodeNames() []string {
	out := []string{c.nodeName(ControllerNode)}
	for _, id := range c.IDs() {
		out = append(out, c.nodeName(id))
	}
	return out
}
