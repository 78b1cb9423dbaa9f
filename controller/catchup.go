package controller

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/internal/rpcopt"
)

// Stop{waitForCatchUp} (SPEC §6.7 step 1) decides on facts gathered after
// the request arrived, never on the heartbeat reports alone: a report can be
// arbitrarily old (its broker dead but not yet fenced) or carry a stale
// source HW (its fetcher cut off from the source), so "lag 0" in it proves
// nothing. Each round asks, in this order,
//
//  1. the source, through the mirror's bootstrap addresses: Metadata (cluster
//     id, topic id, partitions, leaders), then ListOffsets(HIGH_WATERMARK)
//     from each partition's leader in its leader epoch: S.HW;
//  2. the destination partition's current leader (this controller's image:
//     unfenced, current LE), ListOffsets(HIGH_WATERMARK): D.HW.
//
//  3. the destination leader's latest cached epoch ℓ and LEO
//     (OffsetForLeaderEpoch of the latest epoch), then the source leader's
//     endOffsetFor(ℓ) (OffsetForLeaderEpoch, SPEC §2.4).
//
// A partition is caught up iff D.HW ≥ S.HW and D's log is a prefix of S's:
// every record S acknowledged before step 1 is committed on D (HW, not LEO:
// a record only on D's leader could still be lost to a D leader change
// after the stop), and they are S's records, not a copy of a log S has since
// replaced. Step 3 is the mirror fetcher's own divergence check (SPEC §6.3)
// made at D's LEO: S must answer epoch ℓ itself, ending at or after D's LEO.
// Without it an unclean election on S after D copied records would let D
// "catch up" by HW to a log it diverges from, and the stop would make the
// divergent records D's history (issue 13). The current leader must also
// report the partition MIRRORING or PAUSED in its current LE: before that
// its log may still hold records the run's truncation removes. Anything
// unanswered (source or leader unreachable, fenced, not leader) is not
// caught up; the round is retried until the request's timeout. Stopping
// without waiting is the disaster-recovery path.

// hwAnswer is one partition's high watermark as its leader answered a
// ListOffsets; Err (non-empty) says why there is none.
type hwAnswer struct {
	HW  int64
	Err string
}

// epochEnd is a leader's OffsetForLeaderEpoch answer (SPEC §2.4
// endOffsetFor): Epoch −1 with an empty cache; Err (non-empty) says why
// there is none.
type epochEnd struct {
	Epoch     int32
	EndOffset int64
	Err       string
}

// latestEpoch asks OffsetForLeaderEpoch for the latest cached epoch and the
// LEO: SPEC §2.4 answers (ℓ, LEO) for any epoch ≥ ℓ.
const latestEpoch = math.MaxInt32

// catchUpTopic is what one round learnt of one topic to stop.
type catchUpTopic struct {
	Name string
	// Err is a local reason the topic cannot be checked (unknown, not a
	// member of the mirror).
	Err string
	// TopicID and Partitions are the destination topic's, from the image.
	TopicID    string
	Partitions int32
	// States is, by partition, the state the current leader reports for its
	// current LE (UNSPECIFIED: no such report).
	States []twinlogv1.MirrorState
	// SourceErr is why the source could not describe the topic.
	SourceErr        string
	SourceTopicID    string
	SourcePartitions int32
	// Source and Dest are the HWs by partition (Source has SourcePartitions
	// entries, Dest has Partitions).
	Source []hwAnswer
	Dest   []hwAnswer
	// DestEnd is, by partition, the destination leader's latest cached
	// epoch and LEO; SourceEnd the source leader's endOffsetFor that epoch
	// (unasked, with Err, when DestEnd has none).
	DestEnd   []epochEnd
	SourceEnd []epochEnd
}

// catchUpReason returns "" if every partition of t is caught up, else why
// not (the first partition that is not). It is the whole decision: the
// gathering only collects facts.
func catchUpReason(t catchUpTopic) string {
	switch {
	case t.Err != "":
		return t.Err
	case t.SourceErr != "":
		return "source: " + t.SourceErr
	case t.SourceTopicID != t.TopicID:
		return fmt.Sprintf("source topic id %s, local %s", t.SourceTopicID, t.TopicID)
	case t.SourcePartitions != t.Partitions || int(t.Partitions) != len(t.Source) ||
		int(t.Partitions) != len(t.Dest) || int(t.Partitions) != len(t.States) ||
		int(t.Partitions) != len(t.DestEnd) || int(t.Partitions) != len(t.SourceEnd):
		return fmt.Sprintf("source has %d partitions, destination %d", t.SourcePartitions, t.Partitions)
	}
	for p := range t.Partitions {
		s, d, st := t.Source[p], t.Dest[p], t.States[p]
		switch {
		case st != twinlogv1.MirrorState_MIRROR_STATE_MIRRORING && st != twinlogv1.MirrorState_MIRROR_STATE_PAUSED:
			return fmt.Sprintf("partition %d: leader reports %s", p, stateName(st))
		case s.Err != "":
			return fmt.Sprintf("partition %d: source: %s", p, s.Err)
		case d.Err != "":
			return fmt.Sprintf("partition %d: destination: %s", p, d.Err)
		case s.HW < 0 || d.HW < 0:
			return fmt.Sprintf("partition %d: no high watermark", p)
		case d.HW < s.HW:
			return fmt.Sprintf("partition %d: destination HW %d < source HW %d", p, d.HW, s.HW)
		}
		de, se := t.DestEnd[p], t.SourceEnd[p]
		switch {
		case de.Err != "":
			return fmt.Sprintf("partition %d: destination: %s", p, de.Err)
		case de.Epoch < 0:
			// An empty epoch cache: D holds no record that could differ.
		case se.Err != "":
			return fmt.Sprintf("partition %d: source: %s", p, se.Err)
		case se.Epoch != de.Epoch || se.EndOffset < de.EndOffset:
			return fmt.Sprintf("partition %d: destination log diverges from the source's: its last epoch %d ends at %d, "+
				"the source answers epoch %d ending at %d (an unclean election on the source?); "+
				"the mirror truncates and copies again before it is caught up", p, de.Epoch, de.EndOffset, se.Epoch, se.EndOffset)
		}
	}
	return ""
}

func stateName(s twinlogv1.MirrorState) string {
	if s == twinlogv1.MirrorState_MIRROR_STATE_UNSPECIFIED {
		return "no state in its current leader epoch"
	}
	return strings.TrimPrefix(s.String(), "MIRROR_STATE_")
}

// waitMirrorCaughtUp runs catch-up rounds until every topic is caught up
// (true) or timeout passes (false, with the last round's reason per topic,
// "" for those that were caught up). A timeout ≤ 0 allows one round.
func (c *Controller) waitMirrorCaughtUp(ctx context.Context, mirror string, topics []string, timeout time.Duration) (bool, []string) {
	deadline := time.Now().Add(timeout)
	conns := rpcopt.NewPool(c.dial)
	defer conns.Close()
	var last []string // the reasons of the last round that was not cut short
	for {
		roundEnd := time.Now().Add(c.cfg.RecoveryRPCTimeout)
		if timeout > 0 && deadline.Before(roundEnd) {
			roundEnd = deadline
		}
		rctx, cancel := context.WithDeadline(ctx, roundEnd)
		facts := c.catchUpFacts(rctx, conns, mirror, topics)
		cut := rctx.Err() != nil
		cancel()
		reasons := make([]string, len(facts))
		done := true
		for i, t := range facts {
			reasons[i] = catchUpReason(t)
			done = done && reasons[i] == ""
		}
		if done {
			return true, nil
		}
		if !cut || last == nil {
			last = reasons
		}
		c.log.Debug("mirror not caught up", "mirror", mirror, "reasons", reasons)
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return false, last
		}
		t := time.NewTimer(min(100*time.Millisecond, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, last
		case <-t.C:
		}
	}
}

// sourceMetadata asks the mirror's source for req through its bootstrap
// addresses: the first answer from the source cluster (sourceID, when
// known) wins; otherwise nil and why the last address did not answer
// ("Metadata from …", as mirrors describe and the catch-up wait show it).
func sourceMetadata(ctx context.Context, conns *rpcopt.Pool, bootstrap []string, sourceID string, req *twinlogv1.MetadataRequest) (*twinlogv1.MetadataResponse, string) {
	lastErr := "no bootstrap address"
	for _, addr := range bootstrap {
		conn, err := conns.Get(addr)
		var md *twinlogv1.MetadataResponse
		if err == nil {
			md, err = twinlogv1.NewFetchServiceClient(conn).Metadata(ctx, req)
		}
		if err == nil && sourceID != "" && md.GetClusterId() != sourceID {
			err = fmt.Errorf("%s is in cluster %q, not the mirror's source %q", addr, md.GetClusterId(), sourceID)
		}
		if err == nil {
			return md, ""
		}
		lastErr = fmt.Sprintf("Metadata from %s: %s", addr, status.Convert(err).Message())
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// leaderQuery is one partition to ask its leader's HW of.
type leaderQuery struct {
	topic, partition int
	name             string
	index            int32
	epoch            int32
	// ask is the epoch an OffsetForLeaderEpoch asks the end offset of.
	ask int32
}

// catchUpFacts gathers one round: the local image first (under the read
// lock, no I/O), then the source's HWs, then the destination leaders' HWs.
func (c *Controller) catchUpFacts(ctx context.Context, conns *rpcopt.Pool, mirror string, topics []string) []catchUpTopic {
	out := make([]catchUpTopic, len(topics))
	var (
		bootstrap []string
		sourceID  string
		dest      = map[string][]leaderQuery{} // destination leader address → partitions
	)
	c.mu.RLock()
	m := c.state.Mirror(mirror)
	if m != nil {
		bootstrap, sourceID = m.GetSourceBootstrap(), m.GetSourceClusterId()
	}
	for i, name := range topics {
		t := &out[i]
		t.Name = name
		tr := c.state.Topic(name)
		switch {
		case m == nil:
			t.Err = "unknown mirror"
			continue
		case tr == nil:
			t.Err = "unknown topic"
			continue
		case tr.GetMirrorName() != mirror:
			t.Err = "topic is not in the mirror"
			continue
		}
		t.TopicID, t.Partitions = tr.GetTopicId(), tr.GetPartitionCount()
		t.States = make([]twinlogv1.MirrorState, t.Partitions)
		t.Dest = make([]hwAnswer, t.Partitions)
		t.DestEnd = make([]epochEnd, t.Partitions)
		t.SourceEnd = make([]epochEnd, t.Partitions)
		for p := range t.Partitions {
			t.Dest[p] = hwAnswer{HW: -1}
			t.DestEnd[p] = epochEnd{Epoch: -1, EndOffset: -1, Err: "not asked"}
			t.SourceEnd[p] = epochEnd{Epoch: -1, EndOffset: -1, Err: "not asked"}
			pr := c.state.Partition(name, p)
			leader := pr.GetLeader()
			br := c.state.Broker(leader)
			if pr == nil || leader < 0 || br == nil || br.GetFenced() {
				t.Dest[p].Err = "no unfenced leader"
				continue
			}
			for _, st := range c.mirrorStats[leader] {
				if st.GetMirror() == mirror && st.GetTopic() == name && st.GetPartition() == p &&
					st.GetLeaderId() == leader && st.GetLeaderEpoch() == pr.GetLeaderEpoch() {
					t.States[p] = st.GetState()
				}
			}
			addr := net.JoinHostPort(br.GetHost(), strconv.Itoa(int(br.GetPort())))
			dest[addr] = append(dest[addr], leaderQuery{topic: i, partition: int(p), name: name, index: p,
				epoch: pr.GetLeaderEpoch(), ask: latestEpoch})
		}
	}
	c.mu.RUnlock()
	if m == nil {
		return out
	}
	src := c.sourceFacts(ctx, conns, bootstrap, sourceID, out)
	c.askHWs(ctx, conns, dest, func(q leaderQuery) *hwAnswer { return &out[q.topic].Dest[q.partition] })
	c.askEnds(ctx, conns, dest, func(q leaderQuery) *epochEnd { return &out[q.topic].DestEnd[q.partition] })
	// Then the source's end of each destination's latest epoch: asked after
	// the destination answered, so a source change in between shows.
	ask := map[string][]leaderQuery{}
	for addr, qs := range src {
		for _, q := range qs {
			t := &out[q.topic]
			if q.partition >= len(t.DestEnd) {
				continue // more source than destination partitions: refused anyway
			}
			if de := t.DestEnd[q.partition]; de.Err == "" && de.Epoch >= 0 {
				q.ask = de.Epoch
				ask[addr] = append(ask[addr], q)
			}
		}
	}
	c.askEnds(ctx, conns, ask, func(q leaderQuery) *epochEnd { return &out[q.topic].SourceEnd[q.partition] })
	return out
}

// sourceFacts fills the Source fields of the topics without Err: Metadata
// through the bootstrap addresses (first answer wins), then the leaders'
// HWs. It returns the source leaders' partitions by address.
func (c *Controller) sourceFacts(ctx context.Context, conns *rpcopt.Pool, bootstrap []string, sourceID string, out []catchUpTopic) map[string][]leaderQuery {
	var want []string
	for _, t := range out {
		if t.Err == "" {
			want = append(want, t.Name)
		}
	}
	if len(want) == 0 {
		return nil
	}
	md, lastErr := sourceMetadata(ctx, conns, bootstrap, sourceID, &twinlogv1.MetadataRequest{Topics: want})
	for i := range out {
		if out[i].Err == "" && md == nil {
			out[i].SourceErr = lastErr
		}
	}
	if md == nil {
		return nil
	}
	addrs := map[int32]string{}
	for _, b := range md.GetBrokers() {
		addrs[b.GetId()] = net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
	}
	byName := map[string]*twinlogv1.MetadataTopic{}
	for _, mt := range md.GetTopics() {
		byName[mt.GetName()] = mt
	}
	src := map[string][]leaderQuery{}
	for i := range out {
		t := &out[i]
		if t.Err != "" {
			continue
		}
		mt := byName[t.Name]
		if mt == nil || mt.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
			t.SourceErr = fmt.Sprintf("Metadata: %v", mt.GetError())
			if mt == nil {
				t.SourceErr = "Metadata: topic not described"
			}
			continue
		}
		t.SourceTopicID, t.SourcePartitions = mt.GetTopicId(), int32(len(mt.GetPartitions()))
		t.Source = make([]hwAnswer, t.SourcePartitions)
		for j := range t.Source {
			t.Source[j] = hwAnswer{HW: -1, Err: "partition not described"}
		}
		for _, mp := range mt.GetPartitions() {
			p := mp.GetIndex()
			if p < 0 || p >= t.SourcePartitions {
				continue
			}
			addr, ok := addrs[mp.GetLeaderId()]
			switch {
			case mp.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE:
				t.Source[p].Err = fmt.Sprintf("Metadata: %v", mp.GetError())
			case !ok:
				t.Source[p].Err = fmt.Sprintf("leader %d unknown", mp.GetLeaderId())
			default:
				t.Source[p].Err = ""
				src[addr] = append(src[addr], leaderQuery{topic: i, partition: int(p), name: t.Name, index: p, epoch: mp.GetLeaderEpoch()})
			}
		}
	}
	c.askHWs(ctx, conns, src, func(q leaderQuery) *hwAnswer { return &out[q.topic].Source[q.partition] })
	return src
}

// askHWs sends one ListOffsets(HIGH_WATERMARK) per leader, in parallel,
// with each partition's leader epoch as currentLeaderEpoch (a leader that
// has moved on or not yet arrived answers an error), and stores the answers
// through slot.
func (c *Controller) askHWs(ctx context.Context, conns *rpcopt.Pool, byAddr map[string][]leaderQuery, slot func(leaderQuery) *hwAnswer) {
	askLeaders(ctx, conns, byAddr, askHW, slot)
}

// askLeaders sends ask to every leader address at once and stores each
// partition's answer through slot.
func askLeaders[T any](ctx context.Context, conns *rpcopt.Pool, byAddr map[string][]leaderQuery,
	ask func(context.Context, *rpcopt.Pool, string, []leaderQuery) []T, slot func(leaderQuery) *T) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for addr, qs := range byAddr {
		wg.Go(func() {
			answers := ask(ctx, conns, addr, qs)
			mu.Lock()
			defer mu.Unlock()
			for i, q := range qs {
				*slot(q) = answers[i]
			}
		})
	}
	wg.Wait()
}

func askHW(ctx context.Context, conns *rpcopt.Pool, addr string, qs []leaderQuery) []hwAnswer {
	out := make([]hwAnswer, len(qs))
	fail := func(msg string) []hwAnswer {
		for i := range out {
			out[i] = hwAnswer{HW: -1, Err: msg}
		}
		return out
	}
	req := &twinlogv1.ListOffsetsRequest{}
	byName := map[string]*twinlogv1.ListOffsetsTopic{}
	for _, q := range qs {
		lt := byName[q.name]
		if lt == nil {
			lt = &twinlogv1.ListOffsetsTopic{Name: q.name}
			byName[q.name] = lt
			req.Topics = append(req.Topics, lt)
		}
		lt.Partitions = append(lt.Partitions, &twinlogv1.ListOffsetsPartition{Index: q.index,
			CurrentLeaderEpoch: q.epoch, Spec: twinlogv1.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK})
	}
	conn, err := conns.Get(addr)
	if err != nil {
		return fail(fmt.Sprintf("dial %s: %v", addr, err))
	}
	resp, err := twinlogv1.NewFetchServiceClient(conn).ListOffsets(ctx, req)
	if err != nil {
		return fail(fmt.Sprintf("ListOffsets %s: %s", addr, status.Convert(err).Message()))
	}
	type key struct {
		name  string
		index int32
	}
	got := map[key]*twinlogv1.ListOffsetsPartitionResponse{}
	for _, t := range resp.GetTopics() {
		for _, p := range t.GetPartitions() {
			got[key{t.GetName(), p.GetIndex()}] = p
		}
	}
	for i, q := range qs {
		p := got[key{q.name, q.index}]
		switch {
		case p == nil:
			out[i] = hwAnswer{HW: -1, Err: fmt.Sprintf("ListOffsets %s: no answer for the partition", addr)}
		case p.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE:
			out[i] = hwAnswer{HW: -1, Err: fmt.Sprintf("ListOffsets %s: %v", addr, p.GetError())}
		default:
			out[i] = hwAnswer{HW: p.GetOffset()}
		}
	}
	return out
}

// askEnds sends one OffsetForLeaderEpoch per leader, in parallel, asking
// each partition's end offset of epoch q.ask with its leader epoch as
// currentLeaderEpoch, and stores the answers through slot.
func (c *Controller) askEnds(ctx context.Context, conns *rpcopt.Pool, byAddr map[string][]leaderQuery, slot func(leaderQuery) *epochEnd) {
	askLeaders(ctx, conns, byAddr, askEnd, slot)
}

func askEnd(ctx context.Context, conns *rpcopt.Pool, addr string, qs []leaderQuery) []epochEnd {
	return askEndAs(ctx, conns, addr, qs, false)
}

// askEndAs is askEnd; consumer asks as a consumer checking its position
// (the end stops at a truncation point of a later epoch, SPEC §6.2f).
func askEndAs(ctx context.Context, conns *rpcopt.Pool, addr string, qs []leaderQuery, consumer bool) []epochEnd {
	out := make([]epochEnd, len(qs))
	fail := func(msg string) []epochEnd {
		for i := range out {
			out[i] = epochEnd{Epoch: -1, EndOffset: -1, Err: msg}
		}
		return out
	}
	req := &twinlogv1.OffsetForLeaderEpochRequest{Consumer: consumer}
	for _, q := range qs {
		req.Partitions = append(req.Partitions, &twinlogv1.OffsetForLeaderEpochPartition{Topic: q.name, Partition: q.index,
			CurrentLeaderEpoch: q.epoch, LeaderEpoch: q.ask})
	}
	conn, err := conns.Get(addr)
	if err != nil {
		return fail(fmt.Sprintf("dial %s: %v", addr, err))
	}
	resp, err := twinlogv1.NewFetchServiceClient(conn).OffsetForLeaderEpoch(ctx, req)
	if err != nil {
		return fail(fmt.Sprintf("OffsetForLeaderEpoch %s: %s", addr, status.Convert(err).Message()))
	}
	type key struct {
		name  string
		index int32
	}
	got := map[key]*twinlogv1.OffsetForLeaderEpochPartitionResponse{}
	for _, p := range resp.GetPartitions() {
		got[key{p.GetTopic(), p.GetPartition()}] = p
	}
	for i, q := range qs {
		p := got[key{q.name, q.index}]
		switch {
		case p == nil:
			out[i] = epochEnd{Epoch: -1, EndOffset: -1, Err: fmt.Sprintf("OffsetForLeaderEpoch %s: no answer for the partition", addr)}
		case p.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE:
			out[i] = epochEnd{Epoch: -1, EndOffset: -1, Err: fmt.Sprintf("OffsetForLeaderEpoch %s: %v", addr, p.GetError())}
		default:
			out[i] = epochEnd{Epoch: p.GetLeaderEpoch(), EndOffset: p.GetEndOffset()}
		}
	}
	return out
}
