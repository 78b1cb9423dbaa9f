package metastate

import (
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// Property-test finding 1 (rapid fail file of TestPropertyRandomOperations):
// an unclean round installed 3 as leader of a partition mid-reassignment
// (R [4 1 2 3], adding [3], removing [4]); the completion check runs before
// the election, so it stayed pending with ISR [3], RECOVERING, m 1. Turning
// ELR off re-runs §3.3 on every partition and so completes it: R [1 2 3],
// LE + 1 because 4 left R (SPEC §3.3, §3.8). The state machine was right;
// CheckTransition tied "LE may rise without a leader change" to the command
// and rejected it. It now reads dropped replicas from the records.
func TestRegressionELROffCompletesReassignment(t *testing.T) {
	p := part(ids(4, 1, 2, 3), 3, ids(3), nil, nil, -1, 5, 8)
	p.AddingReplicas, p.RemovingReplicas = ids(3), ids(4)
	p.RecoveryState = recovering
	h := seeded(t, ids(1, 2, 3, 4), nil, map[string]string{metadata.KeyMinInsyncReplicas: "1"}, p)
	h.setConfig(clusterRes, "", metadata.KeyEligibleLeaderReplicas, "false")
	h.expect(0, ps{L: 3, LKL: -1, ISR: ids(3), R: ids(1, 2, 3), LE: 6, PE: 9, RS: recovering})
	if got := h.p(0); len(got.GetAddingReplicas())+len(got.GetRemovingReplicas()) > 0 {
		t.Fatalf("reassignment still pending: %v", got)
	}
}

// CheckTransition's LE rule (SPEC §3.3) on hand-made deltas.
func TestCheckTransitionLeaderEpochRule(t *testing.T) {
	base := part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 5, 8)
	base.AddingReplicas, base.RemovingReplicas = nil, nil
	for _, tc := range []struct {
		name   string
		edit   func(p *twinlogv1.PartitionRecord)
		bumped bool
		ok     bool
	}{
		{"isr shrink keeps LE", func(p *twinlogv1.PartitionRecord) { p.Isr = ids(1, 2) }, false, true},
		{"isr shrink with LE+1", func(p *twinlogv1.PartitionRecord) { p.Isr, p.LeaderEpoch = ids(1, 2), 6 }, false, false},
		{"leader change LE+1", func(p *twinlogv1.PartitionRecord) { p.Leader, p.LeaderEpoch = 2, 6 }, false, true},
		{"leader change LE same", func(p *twinlogv1.PartitionRecord) { p.Leader = 2 }, false, false},
		{"replica dropped LE+1", func(p *twinlogv1.PartitionRecord) { p.Replicas, p.Isr, p.LeaderEpoch = ids(1, 2), ids(1, 2), 6 }, false, true},
		{"replica dropped LE same", func(p *twinlogv1.PartitionRecord) { p.Replicas, p.Isr = ids(1, 2), ids(1, 2) }, false, false},
		{"bump +3", func(p *twinlogv1.PartitionRecord) { p.LeaderEpoch = 8 }, true, true},
		{"bump without rise", func(p *twinlogv1.PartitionRecord) { p.Isr = ids(1, 2) }, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := seeded(t, ids(1, 2, 3), nil, nil, metadata.ClonePartition(base))
			n := metadata.ClonePartition(h.p(0))
			tc.edit(n)
			n.PartitionEpoch++
			err := CheckTransition(h.s.Snapshot(), &twinlogv1.MetadataDelta{Offset: h.s.Offset() + 1, Partitions: []*twinlogv1.PartitionRecord{n}}, tc.bumped)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckTransition = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// AbortRounds forgets rounds whose planning delta was not persisted, so the
// next Tick plans them again.
func TestAbortRounds(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), ids(1, 2), map[string]string{metadata.KeyUncleanLeaderElection: "true"},
		part(ids(1, 2, 3), -1, nil, ids(1, 2), nil, 1, 5, 8))
	_, res := h.s.Tick(0)
	if len(res.StartRounds) != 1 {
		t.Fatalf("rounds %v", res.StartRounds)
	}
	if _, res2 := h.s.Tick(0); len(res2.StartRounds) != 0 {
		t.Fatalf("second round planned while one is active: %v", res2.StartRounds)
	}
	h.s.AbortRounds([]uint64{res.StartRounds[0].ID, 999})
	if len(h.s.ActiveRounds()) != 0 {
		t.Fatal(h.s.ActiveRounds())
	}
	if _, out := h.s.CompleteRecoveryRound(res.StartRounds[0].ID, nil, 0); out.Applied || out.Reason != "round is not active" {
		t.Fatal(out)
	}
	if _, res3 := h.s.Tick(0); len(res3.StartRounds) != 1 || res3.StartRounds[0].ID == res.StartRounds[0].ID {
		t.Fatalf("rounds after abort %v", res3.StartRounds)
	}
}

func TestInitialClusterConfigs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     map[string]string
		want    map[string]string // nil: nil delta
		wantErr bool
	}{
		{"empty", nil, nil, false},
		{"defaults only", map[string]string{metadata.KeyMinInsyncReplicas: "1", metadata.KeyMirrorStateReplication: "3"}, nil, false},
		{"static and dynamic", map[string]string{metadata.KeyMirrorStateReplication: "2", metadata.KeyMirrorStateNumPartitions: "4", metadata.KeyMinInsyncReplicas: "2"},
			map[string]string{metadata.KeyMirrorStateReplication: "2", metadata.KeyMirrorStateNumPartitions: "4", metadata.KeyMinInsyncReplicas: "2"}, false},
		{"unknown key", map[string]string{"nope": "1"}, nil, true},
		{"topic-only key", map[string]string{metadata.KeyMirrorSupportUnclean: "true"}, nil, true},
		{"bad value", map[string]string{metadata.KeyMirrorStateNumPartitions: "0"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{ClusterID: "a"})
			d, err := s.InitialClusterConfigs(tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if tc.want == nil {
				if d != nil {
					t.Fatalf("delta %v", d)
				}
				return
			}
			if _, err := s.Apply(d); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got := s.ClusterConfig(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if _, err := s.InitialClusterConfigs(tc.cfg); err == nil {
				t.Fatal("second InitialClusterConfigs on a non-empty image succeeded")
			}
		})
	}
}

// TestAlterPartitionStaleMinISR: the simulator's seed 169 (SPEC §3.3 + §3.8
// flaw, deviation documented in doc.go). m goes 2 → 3 (nothing written:
// |ISR| 3 ≥ 3); the leader, still at m 2, shrinks {2,3,4} to {2,4}. Computed
// with m 3 that would put 3 into ELR while the leader's HW passes 3's LEO, so
// a request whose m differs from the controller's fails
// INVALID_UPDATE_VERSION after checks 1–5, and nothing is written; the same
// change under m 3 (or unchecked, m 0) is applied.
func TestAlterPartitionStaleMinISR(t *testing.T) {
	h := seeded(t, ids(2, 3, 4), nil, m2, part(ids(2, 3, 4), 2, ids(2, 3, 4), nil, nil, -1, 4, 9))
	h.setConfig(topicRes, "t", metadata.KeyMinInsyncReplicas, "3")
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(2, 3, 4), LE: 4, PE: 9})
	mk := func(le, pe, m int32, isr ...int32) *twinlogv1.AlterPartitionRequest {
		r := &twinlogv1.AlterPartitionRequest{BrokerId: 2, BrokerEpoch: h.epoch(2), Topic: "t", Partition: 0,
			LeaderEpoch: le, PartitionEpoch: pe, RecoveryState: recovered, MinInsyncReplicas: m}
		for _, b := range isr {
			r.NewIsr = append(r.NewIsr, &twinlogv1.IsrMember{BrokerId: b, BrokerEpoch: h.epoch(b)})
		}
		return r
	}
	for _, c := range []struct {
		name string
		req  *twinlogv1.AlterPartitionRequest
		want twinlogv1.ErrorCode
		// atPE: refused at the current partition epoch, so never applied;
		// the answer carries the current state, by which the leader knows
		// (the replica rolls back on it: a stale-m refusal stays unresolved
		// otherwise when m changes back, simulator seed 1416705).
		atPE bool
	}{
		// Checks 1–5 keep their order and codes (S11).
		{"newer LE, stale m", mk(5, 9, 2, 2, 4), twinlogv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER, false},
		{"older LE, stale m", mk(3, 9, 2, 2, 4), twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH, false},
		{"older PE, stale m", mk(4, 8, 2, 2, 4), twinlogv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION, false},
		// Then m, before the ISR checks 6–8.
		{"stale m", mk(4, 9, 2, 2, 4), twinlogv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION, true},
		{"stale m, ISR without leader", mk(4, 9, 2, 4), twinlogv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION, true},
		{"newer m", mk(4, 9, 4, 2, 4), twinlogv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION, true},
		{"current m, ISR without leader", mk(4, 9, 3, 3, 4), twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST, true},
	} {
		d, resp := h.s.AlterPartition(c.req)
		if d != nil || resp.GetError() != c.want {
			t.Errorf("%s: got %v (delta %v), want %v", c.name, resp.GetError(), d != nil, c.want)
		}
		wantL, wantLE, wantPE := int32(-1), int32(0), int32(0)
		if c.atPE {
			wantL, wantLE, wantPE = 2, 4, 9
		}
		if resp.GetLeader() != wantL || resp.GetLeaderEpoch() != wantLE || resp.GetPartitionEpoch() != wantPE {
			t.Errorf("%s: answer carries L %d LE %d PE %d, want L %d LE %d PE %d", c.name,
				resp.GetLeader(), resp.GetLeaderEpoch(), resp.GetPartitionEpoch(), wantL, wantLE, wantPE)
		}
	}
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(2, 3, 4), LE: 4, PE: 9})

	// Under the controller's m the shrink applies: 3 enters ELR, and the
	// leader's HW (m 3, |ISR| 2) stays frozen.
	d, resp := h.s.AlterPartition(mk(4, 9, 3, 2, 4))
	if resp.GetError() != ecNone || d == nil {
		t.Fatalf("current m: %v", resp)
	}
	h.apply(d, false)
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(2, 4), ELR: ids(3), LE: 4, PE: 10})

	// m 0 is unchecked (a sender that does not know it).
	d, resp = h.s.AlterPartition(mk(4, 10, 0, 2, 3, 4))
	if resp.GetError() != ecNone || d == nil {
		t.Fatalf("unchecked m: %v", resp)
	}
	h.apply(d, false)
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(2, 3, 4), LE: 4, PE: 11})

	// m is min(min.insync.replicas, |R|): 5 on RF 3 is m 3.
	h.setConfig(topicRes, "t", metadata.KeyMinInsyncReplicas, "5")
	if _, resp := h.s.AlterPartition(mk(4, 11, 3, 2, 3, 4)); resp.GetError() != ecNone {
		t.Fatalf("m 3 under min.insync.replicas 5, RF 3: %v", resp)
	}
}
