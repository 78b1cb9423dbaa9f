package metastate

import (
	"maps"
	"math"
	"slices"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
	"pgregory.net/rapid"
)

// model tracks, per partition, what SPEC §8 invariant 5 needs: whether an
// unclean election, min ISR change, ELR toggle or reassignment happened
// (weak) or an unclean registration (lossy) since |ISR| was last ≥ m.
type model struct {
	h     *harness
	now   int64
	weak  map[tpKey]bool
	lossy map[tpKey]bool
}

func (m *model) step(d *twinlogv1.MetadataDelta, bumped bool, weak, lossy bool) {
	m.h.t.Helper()
	if d == nil {
		return
	}
	before := m.h.s.Snapshot()
	m.h.apply(d, bumped)
	old := map[tpKey]*twinlogv1.PartitionRecord{}
	for _, p := range before.GetPartitions() {
		old[tpKey{p.GetTopic(), p.GetPartition()}] = p
	}
	for _, p := range d.GetPartitions() {
		k := tpKey{p.GetTopic(), p.GetPartition()}
		if weak || (p.GetRecoveryState() == recovering && old[k].GetRecoveryState() != recovering) {
			m.weak[k] = true
		}
		if lossy {
			m.lossy[k] = true
		}
	}
	if weak {
		for _, p := range m.h.s.SortedPartitions() {
			m.weak[tpKey{p.GetTopic(), p.GetPartition()}] = true
		}
	}
	m.checkInv5()
}

func (m *model) checkInv5() {
	s := m.h.s
	if !s.ELREnabled() {
		for k := range m.weak {
			m.weak[k] = true
		}
	}
	for _, p := range s.SortedPartitions() {
		k := tpKey{p.GetTopic(), p.GetPartition()}
		mm := s.MinISR(p.GetTopic(), len(p.GetReplicas()))
		if len(p.GetIsr()) >= mm {
			m.weak[k], m.lossy[k] = false, false
			continue
		}
		if m.weak[k] || !s.ELREnabled() {
			continue
		}
		if n := len(union(union(p.GetIsr(), p.GetElr()), p.GetLastKnownElr())); n < mm {
			m.h.t.Fatalf("invariant 5: %v |ISR ∪ ELR ∪ LKE| = %d < m %d: %v", k, n, mm, p)
		}
		if n := len(union(p.GetIsr(), p.GetElr())); !m.lossy[k] && n < mm {
			m.h.t.Fatalf("invariant 5: %v |ISR ∪ ELR| = %d < m %d: %v", k, n, mm, p)
		}
	}
}

func TestPropertyRandomOperations(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(rt)
		h.replayAtEnd = true
		m := &model{h: h, weak: map[tpKey]bool{}, lossy: map[tpKey]bool{}}
		brokers := ids(1, 2, 3, 4)
		for _, b := range brokers {
			h.register(b, false)
			h.unfence(b)
		}
		d, _ := h.s.CreateTopics(&twinlogv1.CreateTopicsRequest{Topics: []*twinlogv1.CreatableTopic{
			{Name: "t", NumPartitions: 3, ReplicationFactor: 3, Configs: m2},
			{Name: "u", NumPartitions: 1, ReplicationFactor: 2},
		}})
		m.step(d, false, false, false)
		// "t" bumps like a mirror partition; "u" is refused (hostile_test.go).
		markOnceMirrored(h, "t")
		topics := []string{"t", "u"}
		broker := rapid.SampledFrom(brokers)
		pick := func() *twinlogv1.PartitionRecord {
			tn := rapid.SampledFrom(topics).Draw(rt, "topic")
			return h.s.Partition(tn, rapid.Int32Range(0, h.s.Topic(tn).GetPartitionCount()-1).Draw(rt, "part"))
		}
		heartbeat := func(b int32, shutdown bool) (*twinlogv1.MetadataDelta, *twinlogv1.BrokerHeartbeatResponse) {
			return h.s.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: b, BrokerEpoch: h.epoch(b), AppliedOffset: h.s.Offset(), WantShutDown: shutdown}, m.now)
		}
		setCfg := func(typ twinlogv1.ConfigResourceType, name, k, v string) {
			req := &twinlogv1.AlterConfigsRequest{Resources: []*twinlogv1.AlterConfigsResource{{
				Resource: &twinlogv1.ConfigResource{Type: typ, Name: name}, Set: map[string]string{k: v}}}}
			d, _ := h.s.AlterConfigs(req)
			m.step(d, false, k == metadata.KeyMinInsyncReplicas || k == metadata.KeyEligibleLeaderReplicas, false)
			if d2, _ := h.s.AlterConfigs(req); d2 != nil {
				rt.Fatalf("repeated config change wrote %v", d2)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"register": func(rt *rapid.T) {
				b := broker.Draw(rt, "b")
				clean := rapid.Bool().Draw(rt, "clean")
				prev := int64(-1)
				if clean {
					prev = h.epoch(b)
				}
				d, _ := h.s.RegisterBroker(&twinlogv1.RegisterBrokerRequest{BrokerId: b, PreviousBrokerEpoch: prev}, m.now)
				m.step(d, false, false, !clean)
			},
			"heartbeat": func(rt *rapid.T) {
				b := broker.Draw(rt, "b")
				d, _ := heartbeat(b, false)
				m.step(d, false, false, false)
				if d2, _ := heartbeat(b, false); d2 != nil {
					rt.Fatalf("repeated heartbeat wrote %v", d2)
				}
			},
			"shutdown": func(rt *rapid.T) {
				b := broker.Draw(rt, "b")
				d, resp := heartbeat(b, true)
				m.step(d, false, false, false)
				if resp.GetError() == ecNone && resp.GetShouldShutDown() {
					for _, p := range h.s.SortedPartitions() {
						if p.GetLeader() == b {
							rt.Fatalf("shutdown granted to %d while it leads %v", b, p)
						}
					}
				}
			},
			"tick": func(rt *rapid.T) {
				m.now += rapid.Int64Range(0, 12000).Draw(rt, "dt")
				for _, b := range brokers {
					if rapid.Bool().Draw(rt, "alive") {
						d, _ := heartbeat(b, false)
						m.step(d, false, false, false)
					}
				}
				d, _ := h.s.Tick(m.now)
				m.step(d, false, false, false)
				if d2, _ := h.s.Tick(m.now); d2 != nil {
					rt.Fatalf("second tick at the same time wrote %v", d2)
				}
			},
			"alterPartition": func(rt *rapid.T) {
				p := pick()
				from := p.GetLeader()
				le, pe := p.GetLeaderEpoch(), p.GetPartitionEpoch()
				valid := rapid.Bool().Draw(rt, "valid")
				if !valid || from == noBroker {
					from = broker.Draw(rt, "from")
					le += rapid.Int32Range(-1, 1).Draw(rt, "dle")
					pe += rapid.Int32Range(-1, 1).Draw(rt, "dpe")
				}
				if h.s.Broker(from) == nil {
					return
				}
				var isr []int32
				for _, b := range p.GetReplicas() {
					if b == from || rapid.Bool().Draw(rt, "member") {
						isr = append(isr, b)
					}
				}
				req := &twinlogv1.AlterPartitionRequest{BrokerId: from, BrokerEpoch: h.epoch(from), Topic: p.GetTopic(), Partition: p.GetPartition(),
					LeaderEpoch: le, PartitionEpoch: pe, RecoveryState: recovered}
				for _, b := range isr {
					req.NewIsr = append(req.NewIsr, &twinlogv1.IsrMember{BrokerId: b, BrokerEpoch: -1})
				}
				d, resp := h.s.AlterPartition(req)
				if resp.GetError() != ecNone && resp.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NEW_LEADER_ELECTED && d != nil {
					rt.Fatalf("error %v with a delta", resp.GetError())
				}
				m.step(d, false, false, false)
				if d != nil {
					req.LeaderEpoch, req.PartitionEpoch = resp.GetLeaderEpoch(), resp.GetPartitionEpoch()
					if d2, r2 := h.s.AlterPartition(req); d2 != nil {
						rt.Fatalf("repeated AlterPartition wrote %v (%v)", d2, r2)
					}
				}
			},
			"bump": func(rt *rapid.T) {
				p := pick()
				if p.GetLeader() == noBroker {
					return
				}
				d, _ := h.s.BumpLeaderEpoch(&twinlogv1.BumpLeaderEpochRequest{BrokerId: p.GetLeader(), BrokerEpoch: h.epoch(p.GetLeader()),
					Topic: p.GetTopic(), Partition: p.GetPartition(), LeaderEpoch: p.GetLeaderEpoch(),
					MinLeaderEpoch:   rapid.OneOf(rapid.Int32Range(0, p.GetLeaderEpoch()+3), rapid.SampledFrom([]int32{math.MaxInt32, math.MinInt32, p.GetLeaderEpoch() + MaxLeaderEpochStep, p.GetLeaderEpoch() + MaxLeaderEpochStep + 1})).Draw(rt, "min"),
					TruncationOffset: rapid.OneOf(rapid.Int64Range(-1, 50), rapid.SampledFrom([]int64{-2, math.MinInt64, math.MaxInt64})).Draw(rt, "o")})
				if p.GetTopic() != "t" && d != nil {
					rt.Fatalf("bump of a non-mirror topic wrote %v", d)
				}
				m.step(d, true, false, false)
			},
			"minISR": func(rt *rapid.T) {
				v := rapid.SampledFrom([]string{"1", "2", "3", "4"}).Draw(rt, "m")
				if rapid.Bool().Draw(rt, "cluster") {
					setCfg(clusterRes, "", metadata.KeyMinInsyncReplicas, v)
				} else {
					setCfg(topicRes, rapid.SampledFrom(topics).Draw(rt, "topic"), metadata.KeyMinInsyncReplicas, v)
				}
			},
			"elr": func(rt *rapid.T) {
				setCfg(clusterRes, "", metadata.KeyEligibleLeaderReplicas, rapid.SampledFrom([]string{"true", "false"}).Draw(rt, "v"))
			},
			"unclean": func(rt *rapid.T) {
				if rapid.Bool().Draw(rt, "flag") {
					setCfg(topicRes, rapid.SampledFrom(topics).Draw(rt, "topic"), metadata.KeyUncleanLeaderElection, rapid.SampledFrom([]string{"true", "false"}).Draw(rt, "v"))
				} else {
					setCfg(clusterRes, "", metadata.KeyUncleanRecoveryStrategy, rapid.SampledFrom([]string{"none", "balanced", "aggressive"}).Draw(rt, "v"))
				}
			},
			"reassign": func(rt *rapid.T) {
				p := pick()
				var target []int32
				if !rapid.Bool().Draw(rt, "cancel") {
					target = rapid.Permutation(brokers).Draw(rt, "perm")[:rapid.IntRange(1, 4).Draw(rt, "n")]
				}
				d, _ := h.s.AlterPartitionReassignments(&twinlogv1.AlterPartitionReassignmentsRequest{Partitions: []*twinlogv1.ReassignablePartition{
					{Topic: p.GetTopic(), Partition: p.GetPartition(), Replicas: target}}})
				m.step(d, false, true, false)
			},
			"preferred": func(rt *rapid.T) {
				d, _ := h.s.ElectLeaders(&twinlogv1.ElectLeadersRequest{Type: twinlogv1.ElectionType_ELECTION_TYPE_PREFERRED}, m.now)
				m.step(d, false, false, false)
			},
			"uncleanElect": func(rt *rapid.T) {
				d, _ := h.s.ElectLeaders(&twinlogv1.ElectLeadersRequest{Type: twinlogv1.ElectionType_ELECTION_TYPE_UNCLEAN}, m.now)
				m.step(d, false, false, false)
			},
			"round": func(rt *rapid.T) {
				rounds := h.s.ActiveRounds()
				if len(rounds) == 0 {
					return
				}
				r := rapid.SampledFrom(rounds).Draw(rt, "round")
				var answers []ReplicaLogAnswer
				for _, b := range r.Candidates {
					if rapid.IntRange(0, 4).Draw(rt, "answer") == 0 {
						continue
					}
					e := h.epoch(b)
					if rapid.IntRange(0, 5).Draw(rt, "stale") == 0 {
						e--
					}
					answers = append(answers, ReplicaLogAnswer{Broker: b, BrokerEpoch: e,
						LastWrittenLeaderEpoch: rapid.Int32Range(-1, 5).Draw(rt, "lwe"), LogEndOffset: rapid.Int64Range(0, 9).Draw(rt, "leo")})
				}
				d, out := h.s.CompleteRecoveryRound(r.ID, answers, m.now+rapid.Int64Range(0, 400000).Draw(rt, "late"))
				if out.Applied {
					w := out.Winner
					if !h.s.Acceptable(w) {
						rt.Fatalf("round elected unacceptable %d", w)
					}
				}
				m.step(d, false, true, false)
			},
		})
		h.checkReplay()
		// Snapshot → Restore round-trips.
		snap := h.s.Snapshot()
		r := FromSnapshot(snap, Config{})
		if !slices.Equal(r.TopicNames(), h.s.TopicNames()) || !maps.Equal(r.ClusterConfigs(), h.s.ClusterConfigs()) || r.Offset() != h.s.Offset() {
			rt.Fatal("restore differs")
		}
	})
}
