package metastate

import (
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

var (
	topicRes   = twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC
	clusterRes = twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_CLUSTER
	brokerRes  = twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER
	m2         = map[string]string{metadata.KeyMinInsyncReplicas: "2"}
	m3         = map[string]string{metadata.KeyMinInsyncReplicas: "3"}
)

// S5 Last replica standing.
func TestS5LastReplicaStanding(t *testing.T) {
	h := seeded(t, ids(0, 1, 2), nil, m2, part(ids(0, 1, 2), 2, ids(0, 1, 2), nil, nil, -1, 5, 10))
	h.fence(0)
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(1, 2), LE: 5, PE: 11})
	h.fence(1)
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(2), ELR: ids(1), LE: 5, PE: 12})
	h.fence(2)
	h.expect(0, ps{L: -1, LKL: 2, ELR: ids(1, 2), LE: 6, PE: 13})
	h.register(2, false)
	h.expect(0, ps{L: -1, LKL: 2, ELR: ids(1), LKE: ids(2), LE: 6, PE: 14})
	h.register(1, true)
	h.unfence(1)
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1), LKE: ids(2), LE: 7, PE: 15, RS: recovered})
	h.unfence(2)
	h.alterISR(0, 1, 2)
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1, 2), LE: 7, PE: 16})
}

// S5, ELR off: 2 stays in ISR and is re-elected with its short log.
func TestS5ELROff(t *testing.T) {
	h := seeded(t, ids(0, 1, 2), nil, m2, part(ids(0, 1, 2), 2, ids(0, 1, 2), nil, nil, -1, 5, 10))
	h.setConfig(clusterRes, "", metadata.KeyEligibleLeaderReplicas, "false")
	h.fence(0)
	h.fence(1)
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(2), LE: 5, PE: 12})
	h.fence(2)
	h.expect(0, ps{L: -1, LKL: 2, ISR: ids(2), LE: 6, PE: 13})
	h.register(2, false)
	h.expect(0, ps{L: -1, LKL: 2, ISR: ids(2), LE: 6, PE: 13})
	h.unfence(2)
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(2), LE: 7, PE: 14})
}

// S6 ELR election.
func TestS6ELRElection(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, m2, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
	h.alterISR(0, 1, 3)
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1, 3), PE: 1})
	h.alterISR(0, 1)
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1), ELR: ids(3), PE: 2})
	h.fence(1)
	h.expect(0, ps{L: 3, LKL: -1, ISR: ids(3), ELR: ids(1), LE: 1, PE: 3})
	if ev := h.events[len(h.events)-1]; ev.Kind != EventLeaderElected || ev.Broker != 3 {
		t.Fatalf("want a clean election of 3, got %+v", ev)
	}
	h.register(1, false)
	h.expect(0, ps{L: 3, LKL: -1, ISR: ids(3), LKE: ids(1), LE: 1, PE: 4})
	h.unfence(1)
	h.alterISR(0, 1, 3)
	h.expect(0, ps{L: 3, LKL: -1, ISR: ids(1, 3), LE: 1, PE: 5})
}

func s7Start(t *testing.T) *harness {
	h := seeded(t, ids(1, 2, 3), nil, m2, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
	h.fence(1)
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(2, 3), LE: 1, PE: 1})
	h.fence(2)
	h.expect(0, ps{L: 3, LKL: -1, ISR: ids(3), ELR: ids(2), LE: 2, PE: 2})
	h.fence(3)
	h.expect(0, ps{L: -1, LKL: 3, ELR: ids(2, 3), LE: 3, PE: 3})
	return h
}

// S7 All crash, balanced.
func TestS7AllCrashBalanced(t *testing.T) {
	h := s7Start(t)
	h.register(1, false)
	h.expect(0, ps{L: -1, LKL: 3, ELR: ids(2, 3), LE: 3, PE: 3})
	h.register(2, false)
	h.expect(0, ps{L: -1, LKL: 3, ELR: ids(3), LKE: ids(2), LE: 3, PE: 4})
	h.unfence(1)
	d := h.unfence(2)
	for _, p := range d.GetPartitions() {
		t.Fatalf("unfence 2 wrote a partition change: %v", p)
	}
	h.register(3, false)
	h.expect(0, ps{L: -1, LKL: 3, LKE: ids(2, 3), LE: 3, PE: 5})
	// No round while 3 is fenced.
	d, tr := h.s.Tick(0)
	h.apply(d, false)
	if len(tr.StartRounds) != 0 {
		t.Fatalf("round before all of LKE is acceptable: %+v", tr.StartRounds)
	}
	h.unfence(3)
	d, tr = h.s.Tick(0)
	h.apply(d, false)
	if len(tr.StartRounds) != 1 || !sameSet(tr.StartRounds[0].Candidates, ids(2, 3)) || tr.StartRounds[0].Strategy != metadata.StrategyBalanced {
		t.Fatalf("want a balanced round over {2,3}, got %+v", tr.StartRounds)
	}
	r := tr.StartRounds[0]
	// A stale-epoch answer is ignored: balanced then lacks an answer.
	d, out := h.s.CompleteRecoveryRound(r.ID, []ReplicaLogAnswer{
		{Broker: 2, BrokerEpoch: h.epoch(2), LastWrittenLeaderEpoch: 2, LogEndOffset: 10},
		{Broker: 3, BrokerEpoch: h.epoch(3) - 1, LastWrittenLeaderEpoch: 3, LogEndOffset: 12},
	}, 1)
	if d != nil || out.Applied {
		t.Fatalf("stale answer applied: %+v", out)
	}
	d, tr = h.s.Tick(2)
	h.apply(d, false)
	r = tr.StartRounds[0]
	d, out = h.s.CompleteRecoveryRound(r.ID, []ReplicaLogAnswer{
		{Broker: 2, BrokerEpoch: h.epoch(2), LastWrittenLeaderEpoch: 2, LogEndOffset: 10},
		{Broker: 3, BrokerEpoch: h.epoch(3), LastWrittenLeaderEpoch: 3, LogEndOffset: 4},
	}, 3)
	h.apply(d, false)
	if out.Winner != 3 {
		t.Fatalf("winner %d, want 3 (highest epoch)", out.Winner)
	}
	h.expect(0, ps{L: 3, LKL: -1, ISR: ids(3), LE: 4, PE: 6, RS: recovering})
	if ev := h.events[len(h.events)-1]; ev.Kind != EventUncleanLeaderElected {
		t.Fatalf("want an unclean election event, got %+v", ev)
	}
	// The RECOVERING leader reports RECOVERED, then expands.
	h.alterISR(0, 3)
	h.expect(0, ps{L: 3, LKL: -1, ISR: ids(3), LE: 4, PE: 7})
	h.alterISR(0, 2, 3)
	h.expect(0, ps{L: 3, LKL: -1, ISR: ids(2, 3), LE: 4, PE: 8})
}

// S7, aggressive: a round as soon as any replica is acceptable; none: leaderless.
func TestS7AllCrashAggressiveAndNone(t *testing.T) {
	h := s7Start(t)
	h.setConfig(topicRes, "t", metadata.KeyMinInsyncReplicas, "2", metadata.KeyUncleanLeaderElection, "true")
	h.register(1, false)
	h.unfence(1)
	d, tr := h.s.Tick(0)
	h.apply(d, false)
	if len(tr.StartRounds) != 1 || !sameSet(tr.StartRounds[0].Candidates, ids(1)) || tr.StartRounds[0].Strategy != metadata.StrategyAggressive {
		t.Fatalf("want an aggressive round over {1}, got %+v", tr.StartRounds)
	}
	d, out := h.s.CompleteRecoveryRound(tr.StartRounds[0].ID, []ReplicaLogAnswer{{Broker: 1, BrokerEpoch: h.epoch(1), LastWrittenLeaderEpoch: 0, LogEndOffset: 3}}, 1)
	h.apply(d, false)
	if !out.Applied {
		t.Fatalf("round not applied: %+v", out)
	}
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1), LE: 4, PE: 4, RS: recovering})

	n := s7Start(t)
	n.setConfig(topicRes, "t", metadata.KeyMinInsyncReplicas, "2", metadata.KeyUncleanRecoveryStrategy, "none")
	n.register(1, false)
	n.unfence(1)
	d, tr = n.s.Tick(0)
	n.apply(d, false)
	if len(tr.StartRounds) != 0 {
		t.Fatalf("strategy none started a round: %+v", tr.StartRounds)
	}
	n.expect(0, ps{L: -1, LKL: 3, ELR: ids(2, 3), LE: 3, PE: 3})
}

// S8 Restarts.
func TestS8Restarts(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), ids(2, 3), m2, part(ids(1, 2, 3), 1, ids(1), ids(2, 3), nil, -1, 4, 9))
	h.register(3, true)
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1), ELR: ids(2, 3), LE: 4, PE: 9})
	h.register(2, false)
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1), ELR: ids(3), LKE: ids(2), LE: 4, PE: 10})
}

// S11 AlterPartition validation order.
func TestS11AlterPartition(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), ids(3), m2, part(ids(1, 2, 3), 1, ids(1, 2), nil, nil, -1, 5, 7))
	mk := func(from int32, le, pe int32, isr ...int32) *twinlogv1.AlterPartitionRequest {
		r := &twinlogv1.AlterPartitionRequest{BrokerId: from, BrokerEpoch: h.epoch(from), Topic: "t", Partition: 0, LeaderEpoch: le, PartitionEpoch: pe}
		for _, b := range isr {
			r.NewIsr = append(r.NewIsr, &twinlogv1.IsrMember{BrokerId: b, BrokerEpoch: -1})
		}
		return r
	}
	stale := mk(1, 5, 7, 1)
	stale.BrokerEpoch--
	unknown := mk(1, 5, 7, 1)
	unknown.Partition = 9
	badMemberEpoch := mk(1, 5, 7, 1, 2)
	badMemberEpoch.NewIsr[1].BrokerEpoch = 3
	recoveringBig := mk(1, 5, 7, 1, 2)
	recoveringBig.RecoveryState = recovering
	for _, c := range []struct {
		name string
		req  *twinlogv1.AlterPartitionRequest
		want twinlogv1.ErrorCode
	}{
		{"stale requester", stale, ecStale},
		{"unknown partition", unknown, ecUnknown},
		{"newer LE", mk(1, 6, 7, 1), twinlogv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER},
		{"newer PE", mk(1, 5, 8, 1), twinlogv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER},
		{"older LE", mk(1, 4, 7, 1), twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH},
		{"not leader", mk(2, 5, 7, 2), ecInvalid},
		{"older PE", mk(1, 5, 6, 1), twinlogv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION},
		{"without leader", mk(1, 5, 7, 2), ecInvalid},
		{"duplicates", mk(1, 5, 7, 1, 1), ecInvalid},
		{"not a replica", mk(1, 5, 7, 1, 4), ecInvalid},
		{"recovering > 1", recoveringBig, ecInvalid},
		{"recovered to recovering", func() *twinlogv1.AlterPartitionRequest {
			r := mk(1, 5, 7, 1)
			r.RecoveryState = recovering
			return r
		}(), ecInvalid},
		{"fenced member", mk(1, 5, 7, 1, 3), twinlogv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA},
		{"member epoch", badMemberEpoch, twinlogv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA},
	} {
		d, resp := h.s.AlterPartition(c.req)
		if d != nil || resp.GetError() != c.want {
			t.Errorf("%s: got %v (delta %v), want %v", c.name, resp.GetError(), d != nil, c.want)
		}
	}
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1, 2), LE: 5, PE: 7})
	// No-op: nothing written, current state returned.
	d, resp := h.s.AlterPartition(mk(1, 5, 7, 1, 2))
	if d != nil || resp.GetError() != ecNone || resp.GetPartitionEpoch() != 7 {
		t.Fatalf("no-op: %v %v", d, resp)
	}
	resp = h.alterISR(0, 1)
	if resp.GetPartitionEpoch() != 8 || resp.GetLeaderEpoch() != 5 || resp.GetLeader() != 1 {
		t.Fatalf("valid: %v", resp)
	}
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1), ELR: ids(2), LE: 5, PE: 8})
}

// S12 Reassignment.
func TestS12Reassignment(t *testing.T) {
	h := seeded(t, ids(1, 2, 3, 4), nil, m2, part(ids(1, 2, 3), 1, ids(1, 2), nil, nil, -1, 1, 2))
	reassign := func(target ...int32) *twinlogv1.PartitionResult {
		d, resp := h.s.AlterPartitionReassignments(&twinlogv1.AlterPartitionReassignmentsRequest{Partitions: []*twinlogv1.ReassignablePartition{{Topic: "t", Partition: 0, Replicas: target}}})
		h.apply(d, false)
		return resp.GetResults()[0]
	}
	if r := reassign(1, 2, 4); r.GetError() != ecNone {
		t.Fatal(r)
	}
	h.expect(0, ps{L: 1, LKL: -1, R: ids(1, 2, 3, 4), ISR: ids(1, 2), LE: 1, PE: 3})
	if p := h.p(0); !sameSet(p.GetAddingReplicas(), ids(4)) || !sameSet(p.GetRemovingReplicas(), ids(3)) {
		t.Fatalf("adding %v removing %v", p.GetAddingReplicas(), p.GetRemovingReplicas())
	}
	h.alterISR(0, 1, 2, 4)
	h.expect(0, ps{L: 1, LKL: -1, R: ids(1, 2, 4), ISR: ids(1, 2, 4), LE: 2, PE: 4})
	if p := h.p(0); len(p.GetAddingReplicas())+len(p.GetRemovingReplicas()) != 0 {
		t.Fatalf("reassignment not cleared: %v", p)
	}
	if r := reassign(); r.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NO_REASSIGNMENT_IN_PROGRESS {
		t.Fatal(r)
	}

	// With m 3 and ISR {1,4}, neither completion nor cancel is allowed.
	h = seeded(t, ids(1, 2, 3, 4), nil, m3, &twinlogv1.PartitionRecord{Replicas: ids(1, 2, 3, 4), AddingReplicas: ids(4),
		RemovingReplicas: ids(3), Leader: 1, Isr: ids(1, 2, 3, 4), LastKnownLeader: -1, LeaderEpoch: 1, PartitionEpoch: 3})
	h.alterISR(0, 1, 4)
	h.expect(0, ps{L: 1, LKL: -1, R: ids(1, 2, 3, 4), ISR: ids(1, 4), ELR: ids(2, 3), LE: 1, PE: 4})
	if r := reassign(); r.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS {
		t.Fatalf("cancel: %v", r)
	}
	h.expect(0, ps{L: 1, LKL: -1, R: ids(1, 2, 3, 4), ISR: ids(1, 4), ELR: ids(2, 3), LE: 1, PE: 4})
	// A completion that moves the leader reports NEW_LEADER_ELECTED.
	h = seeded(t, ids(1, 2, 3, 4), nil, m2, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 1, 2))
	reassign(2, 3, 4)
	resp := h.alterISR(0, 1, 2, 3, 4)
	if resp.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NEW_LEADER_ELECTED || resp.GetLeader() != 2 {
		t.Fatalf("want NEW_LEADER_ELECTED with leader 2: %v", resp)
	}
	h.expect(0, ps{L: 2, LKL: -1, R: ids(2, 3, 4), ISR: ids(2, 3, 4), LE: 2, PE: 4})
}

// S14 min ISR change.
func TestS14MinISRChange(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), ids(2, 3), m3, part(ids(1, 2, 3), 1, ids(1), ids(2, 3), nil, -1, 3, 6))
	d, _ := h.s.AlterConfigs(&twinlogv1.AlterConfigsRequest{Resources: []*twinlogv1.AlterConfigsResource{{
		Resource: &twinlogv1.ConfigResource{Type: topicRes, Name: "t"}, Set: map[string]string{metadata.KeyMinInsyncReplicas: "3"}}}})
	if d != nil {
		t.Fatalf("setting 3 again wrote %v", d)
	}
	h.setConfig(topicRes, "t", metadata.KeyMinInsyncReplicas, "2")
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1), ELR: ids(2, 3), LE: 3, PE: 6})
	h.setConfig(clusterRes, "", metadata.KeyMinInsyncReplicas, "2")
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1), ELR: ids(2, 3), LE: 3, PE: 6})
	resp := h.setConfig(brokerRes, "", metadata.KeyMinInsyncReplicas, "1")
	if resp.GetResults()[0].GetError() != twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG {
		t.Fatalf("min ISR on a broker: %v", resp)
	}
	h.setConfig(topicRes, "t", metadata.KeyMinInsyncReplicas, "1")
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1), LE: 3, PE: 7})
	if got := h.s.MinISR("t", 3); got != 1 {
		t.Fatalf("MinISR %d", got)
	}
	// Cluster level, same rule.
	h = seededCluster(t, ids(1, 2, 3), ids(2, 3), m3, nil, part(ids(1, 2, 3), 1, ids(1), ids(2, 3), nil, -1, 3, 6))
	h.setConfig(clusterRes, "", metadata.KeyMinInsyncReplicas, "1")
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1), LE: 3, PE: 7})
}

// S15 ELR on unfence.
func TestS15ELROnUnfence(t *testing.T) {
	start := func() *harness {
		return seeded(t, ids(1, 2, 3), ids(2, 3), m2, part(ids(1, 2, 3), -1, nil, ids(2, 3), nil, 3, 4, 8))
	}
	h := start()
	h.unfence(3)
	h.expect(0, ps{L: 3, LKL: -1, ISR: ids(3), ELR: ids(2), LE: 5, PE: 9})
	d := h.unfence(2)
	if len(d.GetPartitions()) != 0 {
		t.Fatalf("unfence 2 changed the partition: %v", d)
	}

	// Aggressive with 1 acceptable: a round over {1}; 3 unfences first → L 3
	// clean, the round is discarded.
	h = start()
	h.setConfig(topicRes, "t", metadata.KeyMinInsyncReplicas, "2", metadata.KeyUncleanLeaderElection, "true")
	d, tr := h.s.Tick(0)
	h.apply(d, false)
	if len(tr.StartRounds) != 1 || !sameSet(tr.StartRounds[0].Candidates, ids(1)) {
		t.Fatalf("want a round over {1}: %+v", tr.StartRounds)
	}
	h.unfence(3)
	h.expect(0, ps{L: 3, LKL: -1, ISR: ids(3), ELR: ids(2), LE: 5, PE: 9})
	d, out := h.s.CompleteRecoveryRound(tr.StartRounds[0].ID, []ReplicaLogAnswer{{Broker: 1, BrokerEpoch: h.epoch(1), LastWrittenLeaderEpoch: 9, LogEndOffset: 99}}, 1)
	if d != nil || out.Applied {
		t.Fatalf("obsolete round applied: %+v", out)
	}

	// ELR off instead: ISR [2], ELR = LKE = ∅, L −1 until 2 is acceptable.
	h = start()
	h.setConfig(clusterRes, "", metadata.KeyEligibleLeaderReplicas, "false")
	h.expect(0, ps{L: -1, LKL: 3, ISR: ids(2), LE: 4, PE: 9})
	h.unfence(2)
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(2), LE: 5, PE: 10})
}

// S2 controller half: controlled shutdown, clean restart, ELR election.
func TestS2ControlledShutdown(t *testing.T) {
	h := seeded(t, ids(1, 2), nil, m2, part(ids(1, 2), 2, ids(1, 2), nil, nil, -1, 1, 1))
	resp := h.heartbeat(1, true)
	if !resp.GetShouldShutDown() {
		t.Fatalf("follower 1 leads nothing, shutdown should be granted: %v", resp)
	}
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(2), ELR: ids(1), LE: 1, PE: 2})
	h.register(1, true)
	h.unfence(1)
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(2), ELR: ids(1), LE: 1, PE: 2})
	h.fence(2)
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1), ELR: ids(2), LE: 2, PE: 3})
}

// Controlled shutdown of a leader moves leadership away first.
func TestControlledShutdownOfLeader(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, m2, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
	resp := h.heartbeat(1, true)
	if !resp.GetShouldShutDown() {
		t.Fatalf("leadership moved in the same change, shutdown should be granted: %v", resp)
	}
	h.expect(0, ps{L: 2, LKL: -1, ISR: ids(2, 3), LE: 1, PE: 1})
	if !h.s.Broker(1).GetInControlledShutdown() || h.s.Acceptable(1) {
		t.Fatal("broker 1 should be in controlled shutdown and unacceptable")
	}
	// Repeating the heartbeat writes nothing.
	d, _ := h.s.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: h.epoch(1), AppliedOffset: h.s.Offset(), WantShutDown: true}, 0)
	if d != nil {
		t.Fatalf("repeated shutdown heartbeat wrote %v", d)
	}
}

// Session timeouts fence through Tick; registration and unfencing rules.
func TestTickFencesAndRegistration(t *testing.T) {
	h := newHarness(t)
	for _, b := range ids(1, 2, 3) {
		e := h.register(b, false)
		if e != h.s.Offset() {
			t.Fatalf("broker epoch %d, want the registering offset %d", e, h.s.Offset())
		}
	}
	// Not caught up: stays fenced.
	d, resp := h.s.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: h.epoch(1), AppliedOffset: h.epoch(1) - 1}, 0)
	if d != nil || !resp.GetIsFenced() || resp.GetIsCaughtUp() {
		t.Fatalf("unfenced before catching up: %v", resp)
	}
	if _, resp := h.s.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: 999}, 0); resp.GetError() != ecStale {
		t.Fatalf("stale epoch: %v", resp)
	}
	for _, b := range ids(1, 2, 3) {
		h.unfence(b)
	}
	d, cresp := h.s.CreateTopics(&twinlogv1.CreateTopicsRequest{Topics: []*twinlogv1.CreatableTopic{{Name: "t", NumPartitions: 3, ReplicationFactor: 3, Configs: m2}}})
	h.apply(d, false)
	if cresp.GetTopics()[0].GetError() != ecNone {
		t.Fatal(cresp)
	}
	// Heartbeats at 5000 for 2 and 3; 1 silent. At 9001 nothing; at 9001+ 1 is fenced.
	for _, b := range ids(2, 3) {
		_, _ = h.s.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: b, BrokerEpoch: h.epoch(b), AppliedOffset: h.s.Offset()}, 5000)
	}
	d, _ = h.s.Tick(9000)
	if d != nil {
		t.Fatalf("fenced too early: %v", d)
	}
	d, _ = h.s.Tick(9001)
	h.apply(d, false)
	if !h.s.Broker(1).GetFenced() {
		t.Fatal("broker 1 not fenced after the session timeout")
	}
	for i := range int32(3) {
		if contains(h.p(i).GetIsr(), 1) || h.p(i).GetLeader() == 1 {
			t.Fatalf("fenced broker still in partition %d: %v", i, h.p(i))
		}
	}
	// Unclean re-registration is STALE for the old epoch.
	old := h.epoch(1)
	h.register(1, false)
	if _, resp := h.s.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: old}, 0); resp.GetError() != ecStale {
		t.Fatalf("old epoch accepted: %v", resp)
	}
}

// BumpLeaderEpoch (SPEC §3.7) and truncation point merging (§6.2f).
func TestBumpLeaderEpoch(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, m2, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 1, 1))
	markOnceMirrored(h, "t") // only mirror partitions bump (hostile_test.go)
	bump := func(minLE int32, off int64) *twinlogv1.BumpLeaderEpochResponse {
		p := h.p(0)
		d, resp := h.s.BumpLeaderEpoch(&twinlogv1.BumpLeaderEpochRequest{BrokerId: 1, BrokerEpoch: h.epoch(1), Topic: "t",
			LeaderEpoch: p.GetLeaderEpoch(), MinLeaderEpoch: minLE, TruncationOffset: off})
		h.apply(d, true)
		return resp
	}
	if r := bump(0, -1); r.GetLeaderEpoch() != 2 || r.GetPartitionEpoch() != 2 {
		t.Fatal(r)
	}
	if r := bump(7, 100); r.GetLeaderEpoch() != 7 || r.GetPartitionEpoch() != 3 {
		t.Fatal(r)
	}
	for i := range 8 {
		bump(0, int64(90-i))
	}
	tps := h.p(0).GetTruncationPoints()
	if len(tps) != 8 {
		t.Fatalf("%d truncation points", len(tps))
	}
	// The ninth point merged the two oldest, (7,100) and (8,90), into (8,90).
	if tps[0].GetLeaderEpoch() != 8 || tps[0].GetOffset() != 90 || tps[7].GetLeaderEpoch() != 15 || tps[7].GetOffset() != 83 {
		t.Fatalf("truncation points %v", tps)
	}
	_, resp := h.s.BumpLeaderEpoch(&twinlogv1.BumpLeaderEpochRequest{BrokerId: 2, BrokerEpoch: h.epoch(2), Topic: "t", LeaderEpoch: h.p(0).GetLeaderEpoch()})
	if resp.GetError() != ecInvalid {
		t.Fatal(resp)
	}
	_, resp = h.s.BumpLeaderEpoch(&twinlogv1.BumpLeaderEpochRequest{BrokerId: 1, BrokerEpoch: h.epoch(1), Topic: "t", LeaderEpoch: 1})
	if resp.GetError() != twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH {
		t.Fatal(resp)
	}
}

func TestTopicNamesAndCreate(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{{"a", true}, {"a.b_c-D9", true}, {"", false}, {".", false}, {"..", false}, {"a b", false}, {string(make([]byte, 250)), false}} {
		if err := ValidateTopicName(c.name); (err == nil) != c.ok {
			t.Errorf("%q: %v", c.name, err)
		}
	}
	h := newHarness(t)
	for _, b := range ids(1, 2) {
		h.register(b, false)
		h.unfence(b)
	}
	d, resp := h.s.CreateTopics(&twinlogv1.CreateTopicsRequest{Topics: []*twinlogv1.CreatableTopic{
		{Name: "x.y", NumPartitions: 2, ReplicationFactor: 2},
		{Name: "x_y", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "big", NumPartitions: 1, ReplicationFactor: 3},
		{Name: "cfg", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{metadata.KeyMinInsyncReplicas: "0"}},
		{Name: "bad/", NumPartitions: 1, ReplicationFactor: 1},
	}})
	want := []twinlogv1.ErrorCode{ecNone, twinlogv1.ErrorCode_ERROR_CODE_INVALID_TOPIC, twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR,
		twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG, twinlogv1.ErrorCode_ERROR_CODE_INVALID_TOPIC}
	for i, w := range want {
		if got := resp.GetTopics()[i].GetError(); got != w {
			t.Errorf("topic %d: %v, want %v", i, got, w)
		}
	}
	h.apply(d, false)
	p0, p1 := h.s.Partition("x.y", 0), h.s.Partition("x.y", 1)
	if p0.GetReplicas()[0] == p1.GetReplicas()[0] {
		t.Fatalf("placement not spread: %v %v", p0.GetReplicas(), p1.GetReplicas())
	}
	if id := h.s.Topic("x.y").GetTopicId(); len(id) != 22 {
		t.Fatalf("topic id %q", id)
	}
	d, resp = h.s.CreateTopics(&twinlogv1.CreateTopicsRequest{Topics: []*twinlogv1.CreatableTopic{{Name: "x.y", NumPartitions: 1, ReplicationFactor: 1}}})
	if d != nil || resp.GetTopics()[0].GetError() != twinlogv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS {
		t.Fatal(resp)
	}
	d, dresp := h.s.DeleteTopics(&twinlogv1.DeleteTopicsRequest{Names: []string{"x.y", "nope"}})
	h.apply(d, false)
	if dresp.GetTopics()[1].GetError() != ecUnknown || h.s.Topic("x.y") != nil || h.s.Partition("x.y", 0) != nil {
		t.Fatal(dresp)
	}
}

func TestDescribeConfigs(t *testing.T) {
	h := seeded(t, ids(1), nil, m2, part(ids(1), 1, ids(1), nil, nil, -1, 0, 0))
	h.setConfig(clusterRes, "", metadata.KeyUncleanRecoveryStrategy, "aggressive")
	resp := h.s.DescribeConfigs(&twinlogv1.DescribeConfigsRequest{Resources: []*twinlogv1.ConfigResource{{Type: topicRes, Name: "t"}}})
	got := map[string]*twinlogv1.ConfigEntry{}
	for _, e := range resp.GetResults()[0].GetEntries() {
		got[e.GetName()] = e
	}
	if e := got[metadata.KeyMinInsyncReplicas]; e.GetValue() != "2" || e.GetSource() != twinlogv1.ConfigSource_CONFIG_SOURCE_TOPIC {
		t.Fatal(e)
	}
	if e := got[metadata.KeyUncleanRecoveryStrategy]; e.GetValue() != "aggressive" || e.GetSource() != twinlogv1.ConfigSource_CONFIG_SOURCE_CLUSTER {
		t.Fatal(e)
	}
	if e := got[metadata.KeyUncleanLeaderElection]; e.GetValue() != "false" || e.GetSource() != twinlogv1.ConfigSource_CONFIG_SOURCE_DEFAULT {
		t.Fatal(e)
	}
	for _, bad := range []map[string]string{{"nope": "1"}, {metadata.KeyUncleanRecoveryStrategy: "wild"}, {metadata.KeyEligibleLeaderReplicas: "true"}, {metadata.KeyMinInsyncReplicas: "x"}} {
		d, r := h.s.AlterConfigs(&twinlogv1.AlterConfigsRequest{Resources: []*twinlogv1.AlterConfigsResource{{
			Resource: &twinlogv1.ConfigResource{Type: topicRes, Name: "t"}, Set: bad}}})
		if d != nil || r.GetResults()[0].GetError() != twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG {
			t.Errorf("%v accepted: %v", bad, r)
		}
	}
}

func TestElectLeadersPreferred(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, m2, part(ids(1, 2, 3), 2, ids(1, 2, 3), nil, nil, -1, 3, 3))
	elect := func() twinlogv1.ErrorCode {
		d, res := h.s.ElectLeaders(&twinlogv1.ElectLeadersRequest{Type: twinlogv1.ElectionType_ELECTION_TYPE_PREFERRED}, 0)
		h.apply(d, false)
		return res.Response.GetResults()[0].GetError()
	}
	if ec := elect(); ec != ecNone {
		t.Fatal(ec)
	}
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1, 2, 3), LE: 4, PE: 4})
	if ec := elect(); ec != twinlogv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED {
		t.Fatal(ec)
	}
}
