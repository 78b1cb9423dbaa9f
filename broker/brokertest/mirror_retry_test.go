package brokertest

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
)

// TestMirrorPendingRetriesKeepLeaderEpoch: a run that times out in PENDING
// (a replica down, ISR = R required) retries again and again without
// ratcheting B's leader epoch: the first run bumps once; every retry reuses
// its truncation (issue 13: retries of any kind must not ratchet epochs).
// Once the replica is back the run mirrors and B equals A.
func TestMirrorPendingRetriesKeepLeaderEpoch(t *testing.T) {
	nw := NewNetwork()
	a := NewCluster(t, Options{Cluster: "a", Network: nw})
	b := NewCluster(t, Options{Cluster: "b", Network: nw, Configure: func(c *broker.Config) {
		c.MirrorPendingTimeout = 500 * time.Millisecond
		c.MirrorRetryInitialBackoff = 200 * time.Millisecond
		c.MirrorRetryMaxBackoff = 200 * time.Millisecond
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	down := startPending(ctx, t, a, b)
	_, le, _, _, _ := b.PartitionInfo("t", 0)
	b.WaitForTimeout("three retries", 60*time.Second, func() bool {
		st := b.MirrorState("t", 0)
		return st != nil && st.GetRetryCount() >= 3 && st.GetState() == pb.MirrorState_MIRROR_STATE_PENDING
	})
	if _, now, _, _, _ := b.PartitionInfo("t", 0); now != le {
		t.Fatalf("LE %d after 3 retries, was %d: retries ratchet the leader epoch", now, le)
	}

	b.RestartBroker(down)
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	produceN(ctx, a, "t", 2, "a")
	want := a.LeaderLog("t", 0)
	b.WaitFor("B replicas identical", func() bool {
		for _, id := range b.IDs() {
			if b.LogString(id, "t", 0) != want {
				return false
			}
		}
		return true
	})
}

// TestMirrorRepointOtherClusterRefused: StartMirrorTopics with the
// addresses of another cluster is INVALID_REQUEST and the mirror keeps its
// source; addresses of the same cluster re-point it (issue 13: a mirror is
// never silently pointed at another cluster under its old source's id).
func TestMirrorRepointOtherClusterRefused(t *testing.T) {
	nw := NewNetwork()
	a := NewCluster(t, Options{Cluster: "a", Network: nw})
	b := NewCluster(t, Options{Cluster: "b", Network: nw})
	c := NewCluster(t, Options{Cluster: "c", Network: nw, Brokers: 1})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	mirrorCaughtUp(ctx, a, b, 2)
	c.CreateTopic("t", 1, 1, nil)

	describe := func() *pb.MirrorDescription {
		t.Helper()
		resp, err := b.MirrorAdmin().DescribeMirrors(ctx, &pb.DescribeMirrorsRequest{Names: []string{"m"}})
		if err != nil || len(resp.GetMirrors()) != 1 {
			t.Fatalf("DescribeMirrors: %v %v", resp, err)
		}
		return resp.GetMirrors()[0]
	}
	before := describe()

	resp, err := b.MirrorAdmin().StartMirrorTopics(ctx, &pb.StartMirrorTopicsRequest{Mirror: "m", Topics: []string{"t"}, SourceBootstrap: c.BootstrapAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	r := resp.GetTopics()
	if len(r) != 1 || r[0].GetError() != pb.ErrorCode_ERROR_CODE_INVALID_REQUEST || !strings.Contains(r[0].GetErrorMessage(), "create a new mirror") {
		t.Fatalf("re-point at cluster c = %v", r)
	}
	// With no topics the request only re-points (before: silently).
	resp, err = b.MirrorAdmin().StartMirrorTopics(ctx, &pb.StartMirrorTopicsRequest{Mirror: "m", SourceBootstrap: c.BootstrapAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	r = resp.GetTopics()
	if len(r) != 1 || r[0].GetError() != pb.ErrorCode_ERROR_CODE_INVALID_REQUEST {
		t.Fatalf("re-point-only at cluster c = %v", r)
	}
	if got := describe(); strings.Join(got.GetSourceBootstrap(), ",") != strings.Join(before.GetSourceBootstrap(), ",") ||
		got.GetSourceClusterId() != before.GetSourceClusterId() {
		t.Fatalf("mirror changed: %v, was %v", got, before)
	}

	// Another address list of cluster a is the same source: accepted. (No
	// topics: a Start of t would begin a new run.)
	one := a.BootstrapAddrs()[:1]
	resp, err = b.MirrorAdmin().StartMirrorTopics(ctx, &pb.StartMirrorTopicsRequest{Mirror: "m", SourceBootstrap: one})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.GetTopics() {
		if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("same-cluster re-point = %v", r)
		}
	}
	if got := describe(); strings.Join(got.GetSourceBootstrap(), ",") != one[0] || got.GetSourceClusterId() != before.GetSourceClusterId() {
		t.Fatalf("mirror after same-cluster re-point: %v", got)
	}
}
