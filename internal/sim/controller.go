package sim

import (
	"fmt"
	"slices"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastate"
)

// controller is the controller shell of one cluster: metastate.State plus
// the persisted change log (the bbolt store in production), recovery rounds
// in flight and the checks of SPEC §8 controller invariants on every change.
type controller struct {
	s      *Sim
	state  *metastate.State
	deltas []*pb.MetadataDelta // every written change, offset i+1 at index i
	inc    int                 // incarnation: a restart drops connections and soft state
	rounds map[uint64]*roundRun
}

type roundRun struct {
	round   metastate.Round
	answers map[int32]metastate.ReplicaLogAnswer
}

func newController(s *Sim) *controller {
	return &controller{s: s, state: metastate.New(metastate.Config{ClusterID: s.clusterID, Rand: s.rng}), rounds: map[uint64]*roundRun{}}
}

// commit is the shell's persist-then-apply with the simulator's checks:
// CheckTransition (invariants 3, 4, 6) on the delta against the image it was
// computed on, Apply, CheckInvariants (1, 2, 4).
func (c *controller) commit(what string, before *pb.MetadataSnapshot, d *pb.MetadataDelta, bumped bool) {
	s := c.s
	if d == nil {
		return
	}
	s.report.Checks["controller-transition"]++
	if err := metastate.CheckTransition(before, d, bumped); err != nil {
		s.fail("§8.1-6 controller transition ("+what+")", "%v\ndelta: %v", err, d)
		return
	}
	evs, err := c.state.Apply(d)
	if err != nil {
		s.fail("controller apply", "%s: %v", what, err)
		return
	}
	c.deltas = append(c.deltas, d)
	s.report.Checks["controller-invariants"]++
	if err := c.state.CheckInvariants(); err != nil {
		s.fail("§8.1-4 controller invariants", "after %s: %v", what, err)
	}
	for _, p := range d.GetPartitions() {
		s.tracef("ctl %s: %s-%d L %d LE %d PE %d ISR %v ELR %v LKE %v LKL %d %v", what, p.GetTopic(), p.GetPartition(),
			p.GetLeader(), p.GetLeaderEpoch(), p.GetPartitionEpoch(), p.GetIsr(), p.GetElr(), p.GetLastKnownElr(), p.GetLastKnownLeader(),
			shortRecovery(p.GetRecoveryState()))
	}
	for _, b := range d.GetBrokers() {
		s.tracef("ctl %s: broker %d epoch %d fenced %t shutdown %t", what, b.GetBrokerId(), b.GetBrokerEpoch(), b.GetFenced(), b.GetInControlledShutdown())
	}
	for _, ev := range evs {
		tp := fmt.Sprintf("%s-%d", ev.Topic, ev.Partition)
		switch ev.Kind {
		case metastate.EventLeaderElected:
			s.report.Elections++
		case metastate.EventUncleanLeaderElected:
			s.report.UncleanElections++
			s.hist.RecordTruncation(tp, ev.LeaderEpoch)
			s.noteUnclean(tp, ev.LeaderEpoch)
			s.tracef("ctl unclean election %s leader %d LE %d", tp, ev.Broker, ev.LeaderEpoch)
			if s.w != nil {
				s.w.onUncleanElection(s, tp, ev.Broker)
			}
		case metastate.EventBrokerFenced:
			s.report.Fences++
		}
	}
}

// do runs one command: fn computes a delta against the current image.
// Commands never change the image (only soft state), so the snapshot taken
// after computing the delta is the image it was computed on.
func (c *controller) do(what string, bumped bool, fn func() *pb.MetadataDelta) {
	d := fn()
	if d == nil {
		return
	}
	c.commit(what, c.state.Snapshot(), d, bumped)
}

func (c *controller) tick() {
	now := c.s.now
	// Aggressive rounds use what arrived; complete them before Tick ends
	// them at their deadline.
	for _, id := range c.roundIDs() {
		rr := c.rounds[id]
		if now >= rr.round.DeadlineMs-100 && len(rr.answers) > 0 {
			c.completeRound(id)
		}
	}
	var res metastate.TickResult
	c.do("tick", false, func() *pb.MetadataDelta {
		d, r := c.state.Tick(now)
		res = r
		return d
	})
	for _, r := range res.EndedRounds {
		delete(c.rounds, r.ID)
	}
	for _, r := range res.StartRounds {
		c.startRound(r)
	}
}

func (c *controller) roundIDs() []uint64 {
	ids := make([]uint64, 0, len(c.rounds))
	for id := range c.rounds {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (c *controller) startRound(r metastate.Round) {
	s := c.s
	s.report.RecoveryRounds++
	s.tracef("ctl round %d %s-%d %s candidates %v", r.ID, r.Topic, r.Partition, r.Strategy, r.Candidates)
	c.rounds[r.ID] = &roundRun{round: r, answers: map[int32]metastate.ReplicaLogAnswer{}}
	inc := c.inc
	for _, cand := range r.Candidates {
		b := s.brokers[cand-1]
		s.net.send(controllerNode, nodeID(cand), "get-replica-log-info", func() {
			ans := b.replicaLogInfo(r.Topic, r.TopicID, r.Partition)
			s.net.send(nodeID(cand), controllerNode, "replica-log-info", func() {
				rr := c.rounds[r.ID]
				if rr == nil || c.inc != inc {
					return
				}
				rr.answers[cand] = ans
				if len(rr.answers) == len(rr.round.Candidates) {
					c.completeRound(r.ID)
				}
			})
		})
	}
}

func (c *controller) completeRound(id uint64) {
	rr := c.rounds[id]
	delete(c.rounds, id)
	var answers []metastate.ReplicaLogAnswer
	for _, cand := range rr.round.Candidates {
		if a, ok := rr.answers[cand]; ok {
			answers = append(answers, a)
		}
	}
	var out metastate.RoundOutcome
	c.do("round", false, func() *pb.MetadataDelta {
		d, o := c.state.CompleteRecoveryRound(id, answers, c.s.now)
		out = o
		return d
	})
	c.s.tracef("ctl round %d done: applied %t winner %d %s", id, out.Applied, out.Winner, out.Reason)
}

// restart models a controller fail-over to the same persisted log: the
// image is rebuilt from the deltas, soft state (heartbeat times, rounds) is
// lost and connections break.
func (c *controller) restart() {
	s := c.s
	snap := c.state.Snapshot()
	c.state = metastate.New(metastate.Config{ClusterID: s.clusterID, Rand: s.rng})
	c.state.Restore(snap)
	c.rounds = map[uint64]*roundRun{}
	c.inc++
	s.report.Faults["controller-restart"]++
	s.tracef("controller restart at offset %d", snap.GetOffset())
}

// deltasFrom returns the changes after offset from (exclusive).
func (c *controller) deltasFrom(from int64) []*pb.MetadataDelta {
	if from >= int64(len(c.deltas)) {
		return nil
	}
	if from < 0 {
		from = 0
	}
	return c.deltas[from:]
}

func shortRecovery(r pb.LeaderRecoveryState) string {
	if r == pb.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING {
		return "RECOVERING"
	}
	return ""
}
