package sim

import (
	"fmt"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/broker/serve"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/state"
	"github.com/twinlog/twinlog/storage"
)

// __mirror_state in the simulator is the cluster's real internal topic: the
// controller creates it at the first CreateMirror, the brokers host and
// replicate it like any partition, and each broker reads and answers from
// it with the shipped mirror/state.Store over simStateLog, as
// broker/mirrorstate.go does over gRPC. A runner's write is an acks=all
// append through the state partition's leader over the lossy network
// (AppendInternal: serve.InternalWriter, then the leader's produce path).

// simStateLog is __mirror_state as a simulated broker reads it (state.Log):
// its own replica when it leads the partition, else a consumer fetch to
// the leader of its metadata, answered by that broker's serveFetch.
type simStateLog struct{ b *simBroker }

func (l simStateLog) NowMs() int64 { return l.b.s.clock().UnixMilli() }

func (l simStateLog) Partitions() (int32, bool) {
	t := l.b.image.Topic(state.Topic)
	if t == nil {
		return 0, false
	}
	return t.GetPartitionCount(), true
}

func (l simStateLog) part(sp int32) *simPart {
	b := l.b
	if !b.up {
		return nil
	}
	return b.parts[twinlog.TopicPartition{Topic: state.Topic, Partition: sp}]
}

func (l simStateLog) Leads(sp int32) bool {
	p := l.part(sp)
	return p != nil && p.r.Role() == replica.RoleLeader
}

func (l simStateLog) Read(sp int32, from twinlog.Offset, last twinlog.Epoch, done func([]storage.Record, twinlog.Epoch, twinlog.Offset, error)) {
	b, s := l.b, l.b.s
	if p := l.part(sp); p != nil && p.r.Role() == replica.RoleLeader {
		done(state.ReadLocal(p.log, from, last, p.r.HighWatermark(), p.r.LeaderEpochStartOffset()))
		return
	}
	lb, le := b.stateLeader(sp)
	if lb == nil {
		done(nil, twinlog.NoEpoch, -1, state.ErrNotReady)
		return
	}
	req := state.ReadRequest(sp, from, last, le)
	reply := s.once(s.cfg.RPCTimeoutMs, func() { done(nil, twinlog.NoEpoch, -1, errNoAnswer) })
	principal := s.brokerPrincipal(b.id)
	s.net.send(b.node(), lb.node(), "mirror-state-read", func() {
		if err := lb.admit(principal, pb.FetchService_Fetch_FullMethodName, req); err != nil {
			s.net.send(lb.node(), b.node(), "mirror-state-read-resp", func() { reply(func() { done(nil, twinlog.NoEpoch, -1, err) }) })
			return
		}
		resp := lb.serveFetch(req, state.MaxReadBytes)
		s.net.send(lb.node(), b.node(), "mirror-state-read-resp", func() {
			reply(func() { done(state.ReadAnswer(sp, resp)) })
		})
	})
}

// stateLeader is the leader of __mirror_state partition sp in b's
// metadata (broker.leaderHint: nil when none or not alive) and its LE.
func (b *simBroker) stateLeader(sp int32) (*simBroker, int32) {
	pr := b.image.Partition(state.Topic, sp)
	if pr == nil || pr.GetLeader() < 1 || !b.image.Alive(pr.GetLeader()) {
		return nil, -1
	}
	return b.s.brokers[pr.GetLeader()-1], pr.GetLeaderEpoch()
}

// writeState is a runner's acks=all write through the state partition's
// leader (broker.writeMirrorState and AppendInternal).
func (b *simBroker) writeState(batch []byte, sp int32, done func(error)) {
	s := b.s
	lb, _ := b.stateLeader(sp)
	if lb == nil {
		done(fmt.Errorf("%w: no leader", state.ErrNotReady))
		return
	}
	tp := twinlog.TopicPartition{Topic: state.Topic, Partition: sp}
	reply := s.once(s.cfg.RPCTimeoutMs, func() { done(errNoAnswer) })
	id, epoch := b.id, b.epoch
	s.net.send(b.node(), lb.node(), "mirror-state-write", func() {
		if !lb.up || !lb.registered {
			return
		}
		answer := func(code pb.ErrorCode) {
			s.net.send(lb.node(), b.node(), "mirror-state-write-resp", func() {
				reply(func() {
					if code != pb.ErrorCode_ERROR_CODE_NONE {
						done(fmt.Errorf("%w: %v", state.ErrNotReady, code))
						return
					}
					done(nil)
				})
			})
		}
		areq := &pb.AppendInternalRequest{BrokerId: id, BrokerEpoch: epoch, Partition: &pb.ProducePartitionData{Topic: tp.Topic, Partition: sp, Records: batch}}
		if err := lb.admit(s.brokerPrincipal(id), pb.ReplicationService_AppendInternal_FullMethodName, areq); err != nil {
			s.net.send(lb.node(), b.node(), "mirror-state-write-resp", func() { reply(func() { done(fmt.Errorf("%w: %v", state.ErrNotReady, err)) }) })
			return
		}
		if code, _ := serve.InternalWriter(lb.image.Broker(id), id, epoch); code != pb.ErrorCode_ERROR_CODE_NONE {
			answer(code)
			return
		}
		lb.handleProduce(tp, replica.AcksAll, batch, []string{"__mirror_state"}, s.cfg.RPCTimeoutMs-100, func(code pb.ErrorCode, base int64, _ int32) {
			s.tracef("broker %d appended __mirror_state-%d for broker %d at %d: %s", lb.id, sp, id, base, shortCode(code))
			if code == pb.ErrorCode_ERROR_CODE_NONE && s.w != nil {
				s.w.stateAcked(s, sp, twinlog.Offset(base)+1, batch)
			}
			answer(code)
		})
	})
}

// ---- what the checkers read ----

// committedState is cluster s's __mirror_state as a reader will find it:
// the records of t's state partition below the greatest HW any replica
// of it has reached (or an acknowledged write has shown), read from a
// live replica whose log reaches that far. Records below that point are
// committed (§6.4: a transition counts once acknowledged).
func (w *world) committedState(s *Sim) *state.View {
	t := s.ctl.image.Topic(state.Topic)
	if t == nil {
		return &state.View{}
	}
	sp := state.PartitionFor("t", t.GetPartitionCount())
	hw := w.stateHW[s]
	for _, b := range s.brokers {
		if p := (simStateLog{b}).part(sp); p != nil {
			hw = max(hw, p.r.HighWatermark())
		}
	}
	w.stateHW[s] = hw
	var from *simPart
	for _, b := range s.brokers {
		if p := (simStateLog{b}).part(sp); p != nil && p.log.LogEndOffset() >= hw && (from == nil || p.r.HighWatermark() > from.r.HighWatermark()) {
			from = p
		}
	}
	if from == nil {
		// No live replica holds the committed prefix (all down): the
		// last view read stands.
		if v := w.stateViews[s]; v != nil {
			return v.view
		}
		return &state.View{}
	}
	if c := w.stateViews[s]; c != nil && c.p == from && c.hw == hw && c.gen == from.shadow.gen {
		return c.view
	}
	v := &state.View{Next: from.log.LogStartOffset()}
	for v.Next < hw {
		recs, _, _, err := state.ReadLocal(from.log, v.Next, twinlog.NoEpoch, hw, twinlog.NoOffset)
		if err != nil || len(recs) == 0 {
			s.fail("storage read", "broker %d %s: read [%d, %d): %d records, %v", from.b.id, from.key, v.Next, hw, len(recs), err)
			return v
		}
		for _, r := range recs {
			if err := v.Apply(r.Key, r.Value); err != nil {
				s.fail("§6.4 __mirror_state record", "broker %d %s offset %d: %v", from.b.id, from.key, r.Offset, err)
			}
			v.Next = r.Offset + 1
		}
	}
	w.stateViews[s] = &stateViewCache{p: from, hw: hw, gen: from.shadow.gen, view: v}
	return v
}

type stateViewCache struct {
	p    *simPart
	hw   twinlog.Offset
	gen  int
	view *state.View
}

// stateAcked notes an acknowledged write: the record below end is
// committed even before another replica's HW shows it, and it is applied
// to the cluster's acknowledged view.
func (w *world) stateAcked(s *Sim, sp int32, end twinlog.Offset, batch []byte) {
	t := s.ctl.image.Topic(state.Topic)
	if t == nil || sp != state.PartitionFor("t", t.GetPartitionCount()) {
		return
	}
	w.stateHW[s] = max(w.stateHW[s], end)
	recs, err := state.DecodeRecords(batch)
	if err != nil {
		s.fail("§6.4 __mirror_state record", "acknowledged write: %v", err)
		return
	}
	v := w.stateAckedView[s]
	if v == nil {
		v = &state.View{}
		w.stateAckedView[s] = v
	}
	for _, r := range recs {
		if err := v.Apply(r.Key, r.Value); err != nil {
			s.fail("§6.4 __mirror_state record", "acknowledged write: %v", err)
		}
	}
}

// ackedState is what cluster s's __mirror_state was acknowledged for, in
// acknowledgement order (one write in flight per leadership, so per key
// the log's order): a transition counts once acknowledged (§6.4), whether
// or not a live replica still holds it.
func (w *world) ackedState(s *Sim) *state.View {
	if v := w.stateAckedView[s]; v != nil {
		return v
	}
	return &state.View{}
}

func lmleOf(v *state.View, topicID string, part int32) *pb.MirrorLmleRecord {
	r, _ := v.Lmle.Get(plan.LmleKey{TopicID: topicID, Partition: part})
	return r
}

func runOf(v *state.View, mirror, topicID string, part int32) *pb.MirrorRunRecord {
	r, _ := v.Run.Get(plan.RunKey{Mirror: mirror, TopicID: topicID, Partition: part})
	return r
}

// taintsOf is the durable taint set of a partition.
func taintsOf(v *state.View, topicID string, part int32) []int32 {
	var out []int32
	for _, x := range lmleOf(v, topicID, part).GetTaints() {
		out = append(out, x.GetReplica())
	}
	return out
}

// reviveState is the operator's runbook for a __mirror_state partition
// left without a leader: §6.4 makes it unclean.recovery.strategy=none, so
// once every replica has crashed uncleanly (no ISR, no ELR) nothing elects
// one and the cluster's mirrors stall; the operator elects uncleanly
// (twinctl's ElectLeaders UNCLEAN, through the controller shell). The
// records the new leader lacks are lost: the checks of the cluster's
// mirrored partitions that rest on them (§8.20/21) are suspended, as for a
// tainted replica's unclean election (§6.8), and so is the final
// catch-up (a runner does not write again the state it holds).
func (w *world) reviveState(s *Sim) {
	t := s.ctl.image.Topic(state.Topic)
	if t == nil {
		return
	}
	for part := range t.GetPartitionCount() {
		pr := s.ctl.image.Partition(state.Topic, part)
		if pr.GetLeader() >= 1 || len(pr.GetIsr()) > 0 || len(pr.GetElr()) > 0 || !s.anyRegistered(pr.GetReplicas()) {
			continue
		}
		req := &pb.ElectLeadersRequest{Type: pb.ElectionType_ELECTION_TYPE_UNCLEAN,
			Partitions: []*pb.TopicPartitions{{Topic: state.Topic, Partitions: []int32{part}}}}
		resp := rpc(s.ctl, "operator elect-unclean", false, operatorCaller(pb.AdminService_ElectLeaders_FullMethodName), s.ctl.admin.ElectLeaders, req)
		s.tracef("operator: %s-%d has no leader, ISR or ELR: ElectLeaders UNCLEAN: %v", state.Topic, part, resp.GetResults())
		w.rep.StateRevivals++
		w.stateHW[s], w.stateViews[s], w.stateAckedView[s] = 0, nil, nil
		for _, tp := range s.topics {
			if key := tp.String(); !w.exempt[key] {
				w.exempt[key] = true
				w.rep.Exempt++
			}
		}
	}
}

// anyRegistered: one of ids is a running, registered broker.
func (s *Sim) anyRegistered(ids []int32) bool {
	for _, id := range ids {
		if b := s.brokers[id-1]; b.up && b.registered {
			return true
		}
	}
	return false
}
