package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/memstore"
	"github.com/twinlog/twinlog/controller/metastate"
)

// heldRounds is a RoundTransport that keeps every round's question for the
// test to answer when it likes (the simulator's network does the same).
type heldRounds struct{ asks []heldAsk }

type heldAsk struct {
	ctx     context.Context
	round   metastate.Round
	targets []RoundTarget
	timeout time.Duration
	done    func([]metastate.ReplicaLogAnswer)
}

func (h *heldRounds) AskReplicaLogs(ctx context.Context, r metastate.Round, targets []RoundTarget, timeout time.Duration, done func([]metastate.ReplicaLogAnswer)) {
	h.asks = append(h.asks, heldAsk{ctx, r, targets, timeout, done})
}

// TestRoundTransportAndCommitHook drives a controller without gRPC or
// goroutines, as the simulator does: broker RPCs through ControllerService,
// commands through Propose, Tick by hand, recovery rounds through a
// RoundTransport. The transport gets each candidate's address and expected
// broker epoch and the round's timeout; an answer that arrives after Tick
// ended its round changes nothing; an answer to a live round elects; the
// Committed hook sees every change once, in offset order, on the state it
// produced.
func TestRoundTransportAndCommitHook(t *testing.T) {
	clock := newClock()
	rounds := &heldRounds{}
	var committed []int64
	c, err := New(Config{ClusterID: "test-cluster", RecoveryRPCTimeout: 2 * time.Second}, Deps{
		Now:    clock.Now,
		Store:  memstore.New(memstore.Options{}),
		Rounds: rounds,
		Committed: func(st *metastate.State, d *twinlogv1.MetadataDelta, _ []metastate.Event) {
			if st.Offset() != d.GetOffset() {
				t.Errorf("hook: state at offset %d for delta %d", st.Offset(), d.GetOffset())
			}
			committed = append(committed, d.GetOffset())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	svc := c.ControllerService()
	register := func(id int32) int64 {
		t.Helper()
		resp, err := svc.RegisterBroker(ctx, &twinlogv1.RegisterBrokerRequest{BrokerId: id, IncarnationId: "i", Host: "b", Port: 9090 + id,
			LogDirs: []string{"/d"}, PreviousBrokerEpoch: -1})
		if err != nil || resp.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("register %d: %v %v", id, resp, err)
		}
		return resp.GetBrokerEpoch()
	}
	heartbeat := func(id int32, epoch int64) {
		t.Helper()
		if _, err := svc.BrokerHeartbeat(ctx, &twinlogv1.BrokerHeartbeatRequest{BrokerId: id, BrokerEpoch: epoch, AppliedOffset: c.Offset()}); err != nil {
			t.Fatal(err)
		}
	}
	tick := func() {
		t.Helper()
		if err := c.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	leader := func() int32 {
		c.mu.RLock()
		defer c.mu.RUnlock()
		return c.state.Partition("u", 0).GetLeader()
	}
	for id := int32(1); id <= 3; id++ {
		heartbeat(id, register(id))
	}
	if err := c.Propose(func(st *metastate.State) *twinlogv1.MetadataDelta {
		d, _ := st.CreateTopics(&twinlogv1.CreateTopicsRequest{Topics: []*twinlogv1.CreatableTopic{{Name: "u", NumPartitions: 1, ReplicationFactor: 3,
			Configs: map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"}}}})
		return d
	}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second) // everyone silent: all fenced, u-0 leaderless
	tick()
	if l := leader(); l != -1 {
		t.Fatalf("leader %d, want none", l)
	}
	// Broker 2 comes back: the only acceptable replica, asked by a round.
	e2 := register(2)
	heartbeat(2, e2)
	tick()
	if len(rounds.asks) != 1 {
		t.Fatalf("%d rounds asked, want 1", len(rounds.asks))
	}
	first := rounds.asks[0]
	if want := []RoundTarget{{Broker: 2, Addr: "b:9092", BrokerEpoch: e2}}; !slices.Equal(first.targets, want) {
		t.Fatalf("targets %+v, want %+v", first.targets, want)
	}
	if first.timeout != 2*time.Second {
		t.Fatalf("timeout %v, want RecoveryRPCTimeout (the round's deadline is later)", first.timeout)
	}
	answer := []metastate.ReplicaLogAnswer{{Broker: 2, BrokerEpoch: e2, LastWrittenLeaderEpoch: 0, LogEndOffset: 0}}

	// The round outlives its deadline (unclean.recovery.timeout.ms, 5 min):
	// Tick ends it, and its late answer elects nobody.
	for end := clock.Now().Add(6 * time.Minute); clock.Now().Before(end); clock.Advance(time.Second) {
		heartbeat(2, e2)
		tick()
	}
	if first.ctx.Err() == nil {
		t.Fatal("the ended round's context is live")
	}
	before := c.Offset()
	first.done(answer)
	if l := leader(); l != -1 || c.Offset() != before {
		t.Fatalf("a late answer changed the metadata: leader %d, offset %d → %d", l, before, c.Offset())
	}
	// The next round (Tick planned one as the first ended) elects on its answer.
	if len(rounds.asks) < 2 {
		t.Fatalf("no round after the first ended (%d asked)", len(rounds.asks))
	}
	last := rounds.asks[len(rounds.asks)-1]
	last.done(answer)
	if l := leader(); l != 2 {
		t.Fatalf("leader %d after the live round's answer, want 2", l)
	}
	for i, o := range committed {
		if o != int64(i+1) {
			t.Fatalf("hook saw offsets %v, want 1..%d in order", committed, c.Offset())
		}
	}
	if int64(len(committed)) != c.Offset() {
		t.Fatalf("hook saw %d changes, the log has %d", len(committed), c.Offset())
	}
}
