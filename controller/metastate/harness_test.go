package metastate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"google.golang.org/protobuf/testing/protocmp"
)

const (
	recovered  = twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERED
	recovering = twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING
)

// tb is what the harness needs of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// harness drives a State like the shell does: compute, check the transition,
// apply, check invariants and that replaying every delta from the initial
// snapshot reproduces the image.
type harness struct {
	t      tb
	s      *State
	base   *twinlogv1.MetadataSnapshot
	deltas []*twinlogv1.MetadataDelta
	events []Event
	// replayAtEnd skips the per-step replay check (property tests replay once).
	replayAtEnd bool
}

func newHarness(t tb) *harness {
	s := New(Config{ClusterID: "a"})
	return &harness{t: t, s: s, base: s.Snapshot()}
}

// seeded builds a harness from a given image: brokers 1..n (or ids) registered
// and unfenced with epoch 10+id, topic "t" with the partitions given.
func seeded(t testing.TB, brokers []int32, fenced []int32, topicCfg map[string]string, parts ...*twinlogv1.PartitionRecord) *harness {
	return seededCluster(t, brokers, fenced, nil, topicCfg, parts...)
}

func seededCluster(t testing.TB, brokers []int32, fenced []int32, clusterCfg, topicCfg map[string]string, parts ...*twinlogv1.PartitionRecord) *harness {
	snap := &twinlogv1.MetadataSnapshot{Offset: 100, ClusterId: "a", ClusterConfig: &twinlogv1.ClusterConfigRecord{Configs: clusterCfg}}
	for _, b := range brokers {
		snap.Brokers = append(snap.Brokers, &twinlogv1.BrokerRecord{BrokerId: b, BrokerEpoch: int64(10 + b), Fenced: contains(fenced, b)})
	}
	snap.Topics = append(snap.Topics, &twinlogv1.TopicRecord{Name: "t", TopicId: "tid", PartitionCount: int32(len(parts)), Configs: topicCfg})
	for i, p := range parts {
		p.Topic, p.TopicId, p.Partition = "t", "tid", int32(i)
		if p.RecoveryState == 0 {
			p.RecoveryState = recovered
		}
		snap.Partitions = append(snap.Partitions, p)
	}
	s := FromSnapshot(snap, Config{ClusterID: "a"})
	h := &harness{t: t, s: s, base: s.Snapshot()}
	h.check()
	return h
}

func (h *harness) check() {
	h.t.Helper()
	if err := h.s.CheckInvariants(); err != nil {
		h.t.Fatalf("invariants: %v", err)
	}
}

// apply persists-and-applies d as the shell would.
func (h *harness) apply(d *twinlogv1.MetadataDelta, bumped bool) *twinlogv1.MetadataDelta {
	h.t.Helper()
	if d == nil {
		return nil
	}
	if err := CheckTransition(h.s.Snapshot(), d, bumped); err != nil {
		h.t.Fatalf("transition: %v\ndelta: %v", err, d)
	}
	ev, err := h.s.Apply(d)
	if err != nil {
		h.t.Fatal(err)
	}
	h.events = append(h.events, ev...)
	h.deltas = append(h.deltas, d)
	h.check()
	if !h.replayAtEnd {
		h.checkReplay()
	}
	return d
}

func (h *harness) checkReplay() {
	h.t.Helper()
	r := FromSnapshot(h.base, Config{})
	for _, d := range h.deltas {
		if _, err := r.Apply(d); err != nil {
			h.t.Fatal(err)
		}
	}
	if diff := cmp.Diff(h.s.Snapshot(), r.Snapshot(), protocmp.Transform()); diff != "" {
		h.t.Fatalf("replay differs (-live +replay):\n%s", diff)
	}
}

func (h *harness) epoch(b int32) int64 { return h.s.Broker(b).GetBrokerEpoch() }

func (h *harness) register(b int32, clean bool) int64 {
	h.t.Helper()
	prev := int64(-1)
	if clean && h.s.Broker(b) != nil {
		prev = h.epoch(b)
	}
	d, resp := h.s.RegisterBroker(&twinlogv1.RegisterBrokerRequest{BrokerId: b, PreviousBrokerEpoch: prev, LogDirs: []string{"/d"}}, 0)
	if resp.GetError() != ecNone {
		h.t.Fatalf("register %d: %v", b, resp)
	}
	h.apply(d, false)
	return resp.GetBrokerEpoch()
}

func (h *harness) heartbeat(b int32, shutdown bool) *twinlogv1.BrokerHeartbeatResponse {
	h.t.Helper()
	d, resp := h.s.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: b, BrokerEpoch: h.epoch(b),
		AppliedOffset: h.s.Offset(), WantShutDown: shutdown}, 0)
	h.apply(d, false)
	return resp
}

// unfence heartbeats b caught up; it returns the delta (nil: nothing written).
func (h *harness) unfence(b int32) *twinlogv1.MetadataDelta {
	h.t.Helper()
	d, resp := h.s.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: b, BrokerEpoch: h.epoch(b), AppliedOffset: h.s.Offset()}, 0)
	if resp.GetIsFenced() {
		h.t.Fatalf("broker %d still fenced: %v", b, resp)
	}
	return h.apply(d, false)
}

func (h *harness) fence(b int32) *twinlogv1.MetadataDelta {
	h.t.Helper()
	return h.apply(h.s.FenceBroker(b), false)
}

func (h *harness) p(i int32) *twinlogv1.PartitionRecord { return h.s.Partition("t", i) }

// alterISR sends AlterPartition from the current leader with current epochs.
func (h *harness) alterISR(i int32, isr ...int32) *twinlogv1.AlterPartitionResponse {
	h.t.Helper()
	p := h.p(i)
	req := &twinlogv1.AlterPartitionRequest{BrokerId: p.GetLeader(), BrokerEpoch: h.epoch(p.GetLeader()), Topic: "t", Partition: i,
		LeaderEpoch: p.GetLeaderEpoch(), PartitionEpoch: p.GetPartitionEpoch(), RecoveryState: recovered}
	for _, b := range isr {
		req.NewIsr = append(req.NewIsr, &twinlogv1.IsrMember{BrokerId: b, BrokerEpoch: h.epoch(b)})
	}
	d, resp := h.s.AlterPartition(req)
	if resp.GetError() != ecNone && resp.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NEW_LEADER_ELECTED {
		h.t.Fatalf("alter partition: %v", resp)
	}
	h.apply(d, false)
	return resp
}

func (h *harness) setConfig(typ twinlogv1.ConfigResourceType, name string, kv ...string) *twinlogv1.AlterConfigsResponse {
	h.t.Helper()
	set := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		set[kv[i]] = kv[i+1]
	}
	d, resp := h.s.AlterConfigs(&twinlogv1.AlterConfigsRequest{Resources: []*twinlogv1.AlterConfigsResource{{
		Resource: &twinlogv1.ConfigResource{Type: typ, Name: name}, Set: set}}})
	h.apply(d, false)
	return resp
}

// ps is the asserted part of a partition (SPEC §9 scenario columns).
type ps struct {
	L, LKL        int32
	ISR, ELR, LKE []int32
	R             []int32
	LE, PE        int32
	RS            twinlogv1.LeaderRecoveryState
}

func (h *harness) expect(i int32, want ps) {
	h.t.Helper()
	p := h.p(i)
	got := ps{L: p.GetLeader(), LKL: p.GetLastKnownLeader(), ISR: p.GetIsr(), ELR: p.GetElr(), LKE: p.GetLastKnownElr(),
		R: p.GetReplicas(), LE: p.GetLeaderEpoch(), PE: p.GetPartitionEpoch(), RS: p.GetRecoveryState()}
	if want.RS == 0 {
		want.RS = recovered
	}
	if want.R == nil {
		want.R = got.R
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		h.t.Fatalf("partition %d (-want +got):\n%s", i, diff)
	}
}

func part(r []int32, l int32, isr, elr, lke []int32, lkl, le, pe int32) *twinlogv1.PartitionRecord {
	return &twinlogv1.PartitionRecord{Replicas: r, Leader: l, Isr: isr, Elr: elr, LastKnownElr: lke,
		LastKnownLeader: lkl, LeaderEpoch: le, PartitionEpoch: pe}
}

func ids(b ...int32) []int32 { return b }
