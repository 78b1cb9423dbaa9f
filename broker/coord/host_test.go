package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twinlog/twinlog/broker/kafka"
	"github.com/twinlog/twinlog/group"
)

// The host's tests run in a synctest bubble over fakeEnv: synctest.Wait
// is the point where every goroutine of the host (loaders, reporters,
// requests) has gone as far as it can, so "not answered yet" is a
// deterministic check; the coordinator's clock and timers are the fake's.

type result[T any] struct {
	v   T
	err error
}

// async runs a host call on its own goroutine, as the listener does.
func async[T any](f func() (T, error)) <-chan result[T] {
	ch := make(chan result[T], 1)
	go func() {
		v, err := f()
		ch <- result[T]{v, err}
	}()
	return ch
}

// recv is the call's result; a minute of the bubble's clock without one
// fails the test.
func recv[T any](t *testing.T, what string, ch <-chan result[T]) result[T] {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Minute):
		t.Fatalf("%s: no answer", what)
		panic("unreachable")
	}
}

// unanswered checks, once every goroutine is blocked, that the call has
// no answer.
func unanswered[T any](t *testing.T, what string, ch <-chan result[T]) {
	t.Helper()
	synctest.Wait()
	select {
	case r := <-ch:
		t.Fatalf("%s answered early: %+v, %v", what, r.v, r.err)
	default:
	}
}

// loaded reconciles and waits for the loads to end.
func loaded(h *Host) {
	h.Reconcile()
	synctest.Wait()
}

// tpo is a partition's offset to commit.
type tpo struct {
	topic     string
	partition int32
	offset    int64
}

// simpleCommit is a simple consumer's OffsetCommit (no group management).
func simpleCommit(groupID string, offsets ...tpo) group.OffsetCommitRequest {
	req := group.OffsetCommitRequest{Version: 8, GroupID: groupID, GenerationID: -1, RetentionTimeMs: -1}
	for _, o := range offsets {
		i := slices.IndexFunc(req.Topics, func(t group.CommitTopic) bool { return t.Name == o.topic })
		if i < 0 {
			req.Topics = append(req.Topics, group.CommitTopic{Name: o.topic})
			i = len(req.Topics) - 1
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, group.CommitPartition{Partition: o.partition, Offset: o.offset, LeaderEpoch: -1})
	}
	return req
}

func commit(h *Host, ctx context.Context, req group.OffsetCommitRequest) <-chan result[*group.OffsetCommitResponse] {
	return async(func() (*group.OffsetCommitResponse, error) { return h.OffsetCommit(ctx, req) })
}

// commitCodes are a commit's codes as "topic/partition=CODE", in the
// answer's order.
func commitCodes(t *testing.T, r result[*group.OffsetCommitResponse]) []string {
	t.Helper()
	if r.err != nil || r.v == nil {
		t.Fatalf("commit: %+v, %v", r.v, r.err)
	}
	var out []string
	for _, tr := range r.v.Topics {
		for _, p := range tr.Partitions {
			out = append(out, fmt.Sprintf("%s/%d=%v", tr.Name, p.Partition, p.ErrorCode))
		}
	}
	return out
}

// fetchOffsets is the group's OffsetFetch as its code and every committed
// offset, "topic/partition=offset", sorted.
func fetchOffsets(t *testing.T, h *Host, groupID string) (group.ErrorCode, []string) {
	t.Helper()
	resp, err := h.OffsetFetch(context.Background(), group.OffsetFetchRequest{GroupID: groupID})
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	var out []string
	for _, tr := range resp.Topics {
		for _, p := range tr.Partitions {
			out = append(out, fmt.Sprintf("%s/%d=%d", tr.Name, p.Partition, p.Offset))
		}
	}
	return resp.ErrorCode, out
}

func wantOffsets(t *testing.T, h *Host, groupID string, want ...string) {
	t.Helper()
	code, got := fetchOffsets(t, h, groupID)
	if code != group.None || !slices.Equal(got, want) {
		t.Fatalf("offsets of %q: %v %v, want NONE %v", groupID, code, got, want)
	}
}

func wantCodes(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// join is a new member's first JoinGroup (v3: no MEMBER_ID_REQUIRED round).
func join(h *Host, ctx context.Context, groupID string) <-chan result[*group.JoinGroupResponse] {
	req := group.JoinGroupRequest{
		Version: 3, GroupID: groupID, SessionTimeoutMs: 10_000, RebalanceTimeoutMs: 20_000,
		ProtocolType: "consumer", Protocols: []group.Protocol{{Name: "range", Metadata: []byte{1}}},
		ClientID: "c", ClientHost: "/10.0.0.1",
	}
	return async(func() (*group.JoinGroupResponse, error) { return h.JoinGroup(ctx, req) })
}

// delayedGroups: a new group's first rebalance waits delayMs.
func delayedGroups(delayMs int64) group.Config {
	return group.Config{InitialRebalanceDelayMs: delayMs}
}

// TestLoadReplaysTheLog: what one host's coordinator committed is served
// by the next host over the same log, once that host's loader sees the
// high watermark at the log end (LOAD_IN_PROGRESS until then, the read
// retried on a timer every ReconcileInterval); the log is read in several
// pieces.
func TestLoadReplaysTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 1)
		e.do(func() { e.logs[0].readMax = 1 })
		h1 := newHost(t, e, group.Config{})
		loaded(h1)
		r := recv(t, "commit", commit(h1, t.Context(), simpleCommit("g", tpo{"t", 0, 42}, tpo{"t", 1, 7}, tpo{"u", 0, 3})))
		wantCodes(t, "commit", commitCodes(t, r), "t/0=NONE", "t/1=NONE", "u/0=NONE")
		h1.Close()

		// A failover back to this broker: a new epoch, the HW behind.
		e.do(func() { e.leads[0], e.logs[0].notReady = 2, true })
		h2 := newHost(t, e, group.Config{})
		h2.Reconcile()
		synctest.Wait()
		if d := e.deadlines(); len(d) != 1 || d[0] != e.NowMs()+5 {
			t.Fatalf("timers %v after a not-ready read, want the retry at %d", d, e.NowMs()+5)
		}
		e.fire(false) // the retry: not ready still
		synctest.Wait()
		if n := e.logs[0].notReadyReads; n != 2 {
			t.Fatalf("%d not-ready reads, want 2 (the first and its retry)", n)
		}
		if code, offs := fetchOffsets(t, h2, "g"); code != group.CoordinatorLoadInProgress {
			t.Fatalf("offset fetch while loading: %v %v, want COORDINATOR_LOAD_IN_PROGRESS", code, offs)
		}
		r = recv(t, "commit while loading", commit(h2, t.Context(), simpleCommit("g", tpo{"t", 0, 43})))
		wantCodes(t, "commit while loading", commitCodes(t, r), "t/0=COORDINATOR_LOAD_IN_PROGRESS")
		if n := e.appends(0); n != 1 {
			t.Fatalf("%d appends, want only h1's", n)
		}

		var before int
		e.do(func() { e.logs[0].notReady, before = false, e.logs[0].readyReads })
		e.fire(false) // the next retry reads, in three steps
		synctest.Wait()
		wantOffsets(t, h2, "g", "t/0=42", "t/1=7", "u/0=3")
		e.do(func() {
			if n := e.logs[0].readyReads - before; n != 3 {
				t.Errorf("the load read %d times, want 3 (one record a read)", n)
			}
		})
	})
}

// TestOutcomesReportedInOrder: two commits whose appends complete
// second-then-first are answered only once the first append's outcome is
// in, and both succeed.
func TestOutcomesReportedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 1)
		e.do(func() { e.logs[0].hold = true })
		h := newHost(t, e, group.Config{})
		loaded(h)
		first := commit(h, t.Context(), simpleCommit("g", tpo{"t", 0, 1}))
		a1 := e.append(0, 0)
		second := commit(h, t.Context(), simpleCommit("g", tpo{"t", 1, 2}))
		a2 := e.append(0, 1)

		e.complete(a2, group.None)
		unanswered(t, "first commit", first)
		unanswered(t, "second commit", second)
		wantOffsets(t, h, "g") // nothing durable yet

		e.complete(a1, group.None)
		wantCodes(t, "first commit", commitCodes(t, recv(t, "first commit", first)), "t/0=NONE")
		wantCodes(t, "second commit", commitCodes(t, recv(t, "second commit", second)), "t/1=NONE")
		wantOffsets(t, h, "g", "t/0=1", "t/1=2")
	})
}

// TestRefusedAppendFailsCommit: an append refused before it was written
// fails its commit with the coordinator's mapped code
// (NOT_ENOUGH_REPLICAS → COORDINATOR_NOT_AVAILABLE), commits nothing, and
// the shard keeps serving.
func TestRefusedAppendFailsCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 1)
		e.do(func() { e.logs[0].refuse = group.NotEnoughReplicas })
		h := newHost(t, e, group.Config{})
		loaded(h)
		r := recv(t, "commit", commit(h, t.Context(), simpleCommit("g", tpo{"t", 0, 5}, tpo{"t", 1, 6})))
		wantCodes(t, "refused commit", commitCodes(t, r), "t/0=COORDINATOR_NOT_AVAILABLE", "t/1=COORDINATOR_NOT_AVAILABLE")
		if n := e.appends(0); n != 1 {
			t.Fatalf("%d appends, want 1", n)
		}
		if code, offs := fetchOffsets(t, h, "g"); code != group.None || len(offs) != 0 {
			t.Fatalf("offsets after a refused commit: %v %v, want none", code, offs)
		}

		e.do(func() { e.logs[0].refuse = group.None })
		r = recv(t, "commit", commit(h, t.Context(), simpleCommit("g", tpo{"t", 0, 8})))
		wantCodes(t, "commit after the refusal", commitCodes(t, r), "t/0=NONE")
		wantOffsets(t, h, "g", "t/0=8")
	})
}

// TestUnknownOutcomeReloads: an append whose outcome is unknown unloads
// the shard (its commit is answered NOT_COORDINATOR, and so is what
// follows), and the next Reconcile loads a new shard of the partition it
// still leads, from what the log holds (the unknown append was written).
func TestUnknownOutcomeReloads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 1)
		e.do(func() { e.logs[0].hold = true })
		h := newHost(t, e, group.Config{})
		loaded(h)
		c := commit(h, t.Context(), simpleCommit("g", tpo{"t", 0, 11}))
		e.complete(e.append(0, 0), group.RequestTimedOut)
		wantCodes(t, "commit of unknown outcome", commitCodes(t, recv(t, "commit", c)), "t/0=NOT_COORDINATOR")
		if code, _ := fetchOffsets(t, h, "g"); code != group.NotCoordinator {
			t.Fatalf("offset fetch after the unload: %v, want NOT_COORDINATOR", code)
		}
		r := recv(t, "commit", commit(h, t.Context(), simpleCommit("g", tpo{"t", 0, 12})))
		wantCodes(t, "commit after the unload", commitCodes(t, r), "t/0=NOT_COORDINATOR")

		e.do(func() { e.logs[0].hold = false })
		loaded(h)
		wantOffsets(t, h, "g", "t/0=11")
		r = recv(t, "commit", commit(h, t.Context(), simpleCommit("g", tpo{"t", 1, 13})))
		wantCodes(t, "commit after the reload", commitCodes(t, r), "t/1=NONE")
		wantOffsets(t, h, "g", "t/0=11", "t/1=13")
	})
}

// TestLeadershipLost: when Reconcile finds the partition led no more, a
// parked JoinGroup is answered NOT_COORDINATOR, the shard's timer is
// stopped, and the group's requests get NOT_COORDINATOR.
func TestLeadershipLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 1)
		h := newHost(t, e, delayedGroups(1_000_000))
		loaded(h)
		j := join(h, t.Context(), "g")
		unanswered(t, "join", j)
		if gi, err := h.Group("g"); err != nil || gi.State != group.PreparingRebalance || len(gi.Members) != 1 {
			t.Fatalf("group before the unload: %+v, %v", gi, err)
		}

		e.do(func() { delete(e.leads, 0) })
		h.Reconcile()
		r := recv(t, "join", j)
		if r.err != nil || r.v.ErrorCode != group.NotCoordinator || r.v.GenerationID != -1 {
			t.Fatalf("parked join after the unload: %+v, %v; want NOT_COORDINATOR", r.v, r.err)
		}
		if d := e.deadlines(); len(d) != 0 {
			t.Fatalf("timers armed after the unload: %v", d)
		}
		r = recv(t, "join", join(h, t.Context(), "g"))
		if r.err != nil || r.v.ErrorCode != group.NotCoordinator {
			t.Fatalf("join after the unload: %+v, %v; want NOT_COORDINATOR", r.v, r.err)
		}
		if code, _ := fetchOffsets(t, h, "g"); code != group.NotCoordinator {
			t.Fatalf("offset fetch after the unload: %v, want NOT_COORDINATOR", code)
		}
		hb, err := h.Heartbeat(t.Context(), group.HeartbeatRequest{GroupID: "g", GenerationID: 0, MemberID: "m"})
		if err != nil || hb.ErrorCode != group.NotCoordinator {
			t.Fatalf("heartbeat after the unload: %+v, %v; want NOT_COORDINATOR", hb, err)
		}
	})
}

// TestTimerCompletesInitialRebalance: the coordinator's next deadline
// arms one timer; firing it early changes nothing and re-arms it; firing
// it at its deadline ends the initial rebalance delay and the parked
// JoinGroup gets generation 1, and the timer is re-armed for the member's
// session.
func TestTimerCompletesInitialRebalance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 1) // the clock starts at 1000
		h := newHost(t, e, delayedGroups(3000))
		loaded(h)
		j := join(h, t.Context(), "g")
		unanswered(t, "join", j)
		if d := e.deadlines(); !slices.Equal(d, []int64{4000}) {
			t.Fatalf("timers %v, want one at 4000 (the initial delay)", d)
		}

		e.fire(true)
		unanswered(t, "join after an early timer", j)
		if d := e.deadlines(); !slices.Equal(d, []int64{4000}) {
			t.Fatalf("timers after an early fire %v, want one at 4000", d)
		}

		e.fire(false)
		r := recv(t, "join", j)
		if r.err != nil || r.v.ErrorCode != group.None || r.v.GenerationID != 1 || r.v.Leader != r.v.MemberID || len(r.v.Members) != 1 {
			t.Fatalf("join after the delay: %+v, %v; want generation 1 led by the member", r.v, r.err)
		}
		synctest.Wait()
		// Next: the member's session (10s from 4000), before its sync
		// timeout (20s) and the offsets expiration.
		if d := e.deadlines(); !slices.Equal(d, []int64{14_000}) {
			t.Fatalf("timers after the rebalance %v, want one at 14000", d)
		}
	})
}

// TestCancelledRequest: a request whose ctx ends returns ctx.Err() and is
// forgotten; the coordinator's later answer to it is dropped without
// blocking, and the shard serves on.
func TestCancelledRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 1)
		h := newHost(t, e, delayedGroups(3000))
		loaded(h)
		ctx, cancel := context.WithCancel(t.Context())
		j := join(h, ctx, "g")
		unanswered(t, "join", j)
		cancel()
		r := recv(t, "join", j)
		if !errors.Is(r.err, context.Canceled) || r.v != nil {
			t.Fatalf("cancelled join: %+v, %v; want context.Canceled", r.v, r.err)
		}
		s := h.shardFor("g")
		s.mu.Lock()
		waiting := len(s.waiters)
		s.mu.Unlock()
		if waiting != 0 {
			t.Fatalf("%d requests still waiting after the cancel", waiting)
		}

		if !e.fire(false) { // the rebalance completes: its answer has no taker
			t.Fatal("no timer armed")
		}
		if gi, err := h.Group("g"); err != nil || gi.Generation != 1 {
			t.Fatalf("group after the delay: %+v, %v; want generation 1", gi, err)
		}
		r2 := recv(t, "commit", commit(h, t.Context(), simpleCommit("simple", tpo{"t", 0, 1})))
		wantCodes(t, "commit after the dropped answer", commitCodes(t, r2), "t/0=NONE")
	})
}

// TestOffsetCommitUnknownPartition: a partition that does not exist is
// answered UNKNOWN_TOPIC_OR_PARTITION in its place and the others are
// committed (only theirs are appended); a commit of unknown partitions
// only appends nothing.
func TestOffsetCommitUnknownPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 1)
		e.do(func() { e.missing[topicPartition{Topic: "t", Partition: 1}] = true })
		h := newHost(t, e, group.Config{})
		loaded(h)
		r := recv(t, "commit", commit(h, t.Context(), simpleCommit("g", tpo{"t", 0, 5}, tpo{"t", 1, 6}, tpo{"u", 0, 7})))
		wantCodes(t, "commit", commitCodes(t, r), "t/0=NONE", "t/1=UNKNOWN_TOPIC_OR_PARTITION", "u/0=NONE")
		wantOffsets(t, h, "g", "t/0=5", "u/0=7")
		var written []string
		for _, rec := range e.append(0, 0).records {
			d, err := group.DecodeRecord(rec)
			if err != nil {
				t.Fatal(err)
			}
			written = append(written, fmt.Sprintf("%s/%d", d.Partition.Topic, d.Partition.Partition))
		}
		wantCodes(t, "appended commits", written, "t/0", "u/0")

		r = recv(t, "commit", commit(h, t.Context(), simpleCommit("g", tpo{"t", 1, 9})))
		wantCodes(t, "commit of an unknown partition", commitCodes(t, r), "t/1=UNKNOWN_TOPIC_OR_PARTITION")
		if n := e.appends(0); n != 1 {
			t.Fatalf("%d appends, want 1", n)
		}
		wantOffsets(t, h, "g", "t/0=5", "u/0=7")
	})
}

// TestFindCoordinator: a transaction key is INVALID_REQUEST; while
// __consumer_offsets does not exist the host asks for it and answers
// COORDINATOR_NOT_AVAILABLE (also when the request fails); then the
// leader of the group's partition, COORDINATOR_NOT_AVAILABLE while it has
// none.
func TestFindCoordinator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 2)
		e.do(func() { e.exists = false })
		h := newHost(t, e, group.Config{})
		ctx := t.Context()

		c, err := h.FindCoordinator(ctx, 1, "txn")
		if err != nil || c.ErrorCode != 42 || c.NodeID != -1 {
			t.Fatalf("transaction key: %+v, %v; want INVALID_REQUEST", c, err)
		}
		if n := e.creates(); n != 0 {
			t.Fatalf("CreateTopic called %d times for a transaction key", n)
		}

		c, err = h.FindCoordinator(ctx, 0, "g")
		if err != nil || c.ErrorCode != group.CoordinatorNotAvailable || c.NodeID != -1 {
			t.Fatalf("without the topic: %+v, %v; want COORDINATOR_NOT_AVAILABLE", c, err)
		}
		e.do(func() { e.createErr = errors.New("no controller") })
		c, err = h.FindCoordinator(ctx, 0, "g")
		if err != nil || c.ErrorCode != group.CoordinatorNotAvailable {
			t.Fatalf("when the topic cannot be created: %+v, %v; want COORDINATOR_NOT_AVAILABLE", c, err)
		}
		if n := e.creates(); n != 2 {
			t.Fatalf("CreateTopic called %d times, want 2", n)
		}

		e.do(func() { e.exists, e.createErr = true, nil })
		c, err = h.FindCoordinator(ctx, 0, "g")
		if err != nil || c.ErrorCode != group.CoordinatorNotAvailable {
			t.Fatalf("without a leader: %+v, %v; want COORDINATOR_NOT_AVAILABLE", c, err)
		}
		leaders := []kafka.Coordinator{{NodeID: 3, Host: "b3.example", Port: 29092}, {NodeID: 4, Host: "b4.example", Port: 29092}}
		e.do(func() { e.coordinators[0], e.coordinators[1] = leaders[0], leaders[1] })
		for p, want := range leaders {
			id := groupIn(t, "g", int32(p), 2)
			if c, err = h.FindCoordinator(ctx, 0, id); err != nil || c != want {
				t.Fatalf("coordinator of %s (partition %d): %+v, %v; want %+v", id, p, c, err, want)
			}
		}
		if n := e.creates(); n != 2 {
			t.Fatalf("CreateTopic called %d times once the topic exists, want 2", n)
		}
	})
}

// groupIn is a group id of partition p of n.
func groupIn(t *testing.T, prefix string, p, n int32) string {
	t.Helper()
	for i := range 1000 {
		if id := fmt.Sprintf("%s-%d", prefix, i); group.PartitionFor(id, n) == p {
			return id
		}
	}
	t.Fatalf("no group id of partition %d", p)
	return ""
}

// TestDeleteGroupsAcrossShards: a DeleteGroups over groups of two shards
// (and of a partition this broker does not lead) answers in the request's
// order.
func TestDeleteGroupsAcrossShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 3)
		e.do(func() { delete(e.leads, 2) })
		h := newHost(t, e, group.Config{})
		loaded(h)
		a0, b0 := groupIn(t, "a", 0, 3), groupIn(t, "b", 0, 3)
		a1, b1 := groupIn(t, "a", 1, 3), groupIn(t, "b", 1, 3)
		x1, c2 := groupIn(t, "x", 1, 3), groupIn(t, "c", 2, 3)
		for _, id := range []string{a0, b0, a1, b1} {
			r := recv(t, "commit", commit(h, t.Context(), simpleCommit(id, tpo{"t", 0, 1})))
			wantCodes(t, "commit of "+id, commitCodes(t, r), "t/0=NONE")
		}

		ids := []string{a1, a0, x1, c2, b1, b0}
		resp, err := h.DeleteGroups(t.Context(), ids)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range resp.Results {
			got = append(got, fmt.Sprintf("%s=%v", r.GroupID, r.ErrorCode))
		}
		wantCodes(t, "deletion", got, a1+"=NONE", a0+"=NONE", x1+"=GROUP_ID_NOT_FOUND", c2+"=NOT_COORDINATOR", b1+"=NONE", b0+"=NONE")
		for _, id := range []string{a0, b0, a1, b1} {
			if _, err := h.Group(id); !errors.Is(err, group.ErrNoGroup) {
				t.Fatalf("group %s after its deletion: %v", id, err)
			}
			wantOffsets(t, h, id)
		}
	})
}

// TestStartAndClose: Start reconciles at once and then on its timer;
// Close stops the timer and answers parked requests NOT_COORDINATOR.
func TestStartAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 1)
		e.do(func() { delete(e.leads, 0) })
		h := newHost(t, e, delayedGroups(1_000_000))
		h.Start()
		if d := e.deadlines(); !slices.Equal(d, []int64{1005}) {
			t.Fatalf("timers after Start %v, want the reconcile at 1005", d)
		}
		if r := recv(t, "join", join(h, t.Context(), "g")); r.err != nil || r.v.ErrorCode != group.NotCoordinator {
			t.Fatalf("join before leading: %+v, %v; want NOT_COORDINATOR", r.v, r.err)
		}

		e.do(func() { e.leads[0] = 1 })
		e.fire(false)
		synctest.Wait()
		j := join(h, t.Context(), "g")
		unanswered(t, "join", j)
		// The shard's earliest deadline is the new member's join timeout
		// (5 minutes), before the initial delay and the offsets expiration.
		if d := e.deadlines(); !slices.Equal(d, []int64{1010, 301_005}) {
			t.Fatalf("timers %v, want the next reconcile and the member's join timeout", d)
		}

		h.Close()
		if r := recv(t, "join", j); r.err != nil || r.v.ErrorCode != group.NotCoordinator {
			t.Fatalf("parked join after Close: %+v, %v; want NOT_COORDINATOR", r.v, r.err)
		}
		if d := e.deadlines(); len(d) != 0 {
			t.Fatalf("timers after Close: %v", d)
		}
		h.Reconcile() // a metadata change after Close loads nothing
		synctest.Wait()
		if code, _ := fetchOffsets(t, h, "g"); code != group.NotCoordinator {
			t.Fatalf("offset fetch after Close: %v, want NOT_COORDINATOR", code)
		}
	})
}

// TestUnknownOutcomeBehindDurableOnes: outcomes arriving third, second,
// first, the second unknown (as the broker reports an append whose wait
// the run's end cut short): the first commit succeeds, then the shard
// unloads at the second, whose commit and the third's are answered
// NOT_COORDINATOR; the third's durable outcome, reported out of order
// before, never reaches the coordinator (it would panic).
func TestUnknownOutcomeBehindDurableOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 1)
		e.do(func() { e.logs[0].hold = true })
		h := newHost(t, e, group.Config{})
		loaded(h)
		var commits []<-chan result[*group.OffsetCommitResponse]
		var as []*fakeAppend
		for i := range 3 {
			commits = append(commits, commit(h, t.Context(), simpleCommit("g", tpo{"t", int32(i), int64(i)})))
			as = append(as, e.append(0, i))
		}
		e.complete(as[2], group.None)
		e.complete(as[1], group.RequestTimedOut)
		for i, c := range commits {
			unanswered(t, fmt.Sprintf("commit %d before the first outcome", i), c)
		}
		e.complete(as[0], group.None)
		want := []string{"t/0=NONE", "t/1=NOT_COORDINATOR", "t/2=NOT_COORDINATOR"}
		for i, c := range commits {
			wantCodes(t, "commit", commitCodes(t, recv(t, "commit", c)), want[i])
		}
		if code, _ := fetchOffsets(t, h, "g"); code != group.NotCoordinator {
			t.Fatalf("offset fetch after the unload: %v, want NOT_COORDINATOR", code)
		}
	})
}

// TestStartFormsAnswerByCallback: a Start… call returns at once and its
// answer comes through done when the append is durable, on the goroutine
// that settles it (no goroutine of the host waits); a cancelled one is
// never answered; a group this host does not coordinate is answered
// NOT_COORDINATOR before Start… returns.
func TestStartFormsAnswerByCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 1)
		e.do(func() { e.logs[0].hold = true })
		h := newHost(t, e, group.Config{})
		loaded(h)
		var got []string
		answered := func(what string) func(*group.OffsetCommitResponse, error) {
			return func(r *group.OffsetCommitResponse, err error) {
				if err != nil {
					t.Errorf("%s: %v", what, err)
					return
				}
				got = append(got, what+":"+strings.Join(commitCodes(t, result[*group.OffsetCommitResponse]{v: r}), ","))
			}
		}
		h.StartOffsetCommit(simpleCommit("g", tpo{"t", 0, 1}), answered("first"))
		cancel := h.StartOffsetCommit(simpleCommit("g", tpo{"t", 0, 2}), answered("cancelled"))
		a1, a2 := e.append(0, 0), e.append(0, 1)
		if len(got) != 0 {
			t.Fatalf("answered before the appends were durable: %v", got)
		}
		cancel()
		e.complete(a1, group.None)
		e.complete(a2, group.None)
		if want := []string{"first:t/0=NONE"}; !slices.Equal(got, want) {
			t.Fatalf("answers %v, want %v", got, want)
		}
		wantOffsets(t, h, "g", "t/0=2") // the cancelled commit was still made

		got = nil
		h.Close()
		h.StartOffsetCommit(simpleCommit("g", tpo{"t", 0, 3}), answered("closed"))
		if want := []string{"closed:t/0=NOT_COORDINATOR"}; !slices.Equal(got, want) {
			t.Fatalf("answers of a closed host %v, want %v", got, want)
		}
	})
}
