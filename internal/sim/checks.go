package sim

import (
	"fmt"
	"iter"
	"slices"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/broker/replica"
)

// check runs after every Ready of one replica: the replica's own invariants
// (replica.CheckInvariants panics), its view of the log against storage and
// the shadow, and the leader's HW monotonicity (SPEC §8.8).
func (p *simPart) check() {
	s := p.b.s
	if s.failed {
		return
	}
	s.report.Checks["replica-invariants"]++
	func() {
		defer func() {
			if r := recover(); r != nil {
				s.fail("replica invariants", "broker %d %s: %v", p.b.id, p.key, r)
			}
		}()
		p.r.CheckInvariants()
	}()
	if s.failed {
		return
	}
	s.report.Checks["replica-vs-storage"]++
	if leo := p.r.LogEndOffset(); leo != p.log.LogEndOffset() || int64(leo) != p.shadow.leo() {
		s.fail("replica view = storage", "broker %d %s: replica LEO %d, storage LEO %d, shadow LEO %d", p.b.id, p.key, leo, p.log.LogEndOffset(), p.shadow.leo())
		return
	}
	if hw := p.r.HighWatermark(); hw != p.log.HighWatermark() {
		s.fail("replica view = storage", "broker %d %s: replica HW %d, storage HW %d", p.b.id, p.key, hw, p.log.HighWatermark())
		return
	}
	if re, le := p.r.EpochEntries(), p.log.Epochs().Entries(); !slices.Equal(re, le) {
		s.fail("§8.10 epoch cache = checkpoint", "broker %d %s: replica cache %v, storage cache %v", p.b.id, p.key, re, le)
		return
	}
	if p.r.Role() == replica.RoleLeader {
		le, hw := int32(p.r.LeaderEpoch()), int64(p.r.HighWatermark())
		s.report.Checks["leader-hw-monotonic"]++
		if le == p.leaderLE && hw < p.leaderHW {
			s.fail("§8.8 leader HW never decreases", "broker %d %s: HW %d -> %d in LE %d", p.b.id, p.key, p.leaderHW, hw, le)
			return
		}
		p.leaderLE, p.leaderHW = le, hw
		stale := s.w != nil && s.w.staleLeader(p, le, hw)
		if !stale {
			p.validatedLE = max(p.validatedLE, le)
		}
		if le >= s.lastUnclean[p.key] && hw > s.trueHW[p.key] && !stale {
			s.trueHW[p.key] = hw
			if p.b.image.Offset() < s.lastMinISRChange && !s.cfg.Strict87 {
				// SPEC §3.8: the leader still uses the old m, so the HW
				// may pass members the controller (new m) keeps in ELR.
				// §8.7 cannot hold in this leader epoch, nor, later, for
				// the members the advance passed until they catch up or
				// leave ISR ∪ ELR (behind87); see TestMinISRRaceELRBelowHW.
				if s.suspend87[p.key] != le {
					s.report.StaleMinISRAdvances++
					s.tracef("%s: HW %d advanced by broker %d with metadata %d older than the min.insync.replicas change at %d", p.key, hw, p.b.id, p.b.image.Offset(), s.lastMinISRChange)
				}
				s.suspend87[p.key] = le
				s.noteBehind87(p.tp, hw)
			}
			s.tracef("trueHW %s = %d (broker %d LE %d, ISR %v, maximal %v, LEO %d)", p.key, hw, p.b.id, le, p.r.ISR(), p.r.MaximalISR(), p.r.LogEndOffset())
		}
	}
}

// checkStep runs after every step: SPEC §8.7 (every running acceptable ISR ∪
// ELR member has LEO ≥ trueHW) and §8.9 (two replicas hold identical records
// below the smaller of their HWs, suspended for a replica that has not
// fetched since the latest unclean election).
func (s *Sim) checkStep() {
	for i, tp := range s.topics {
		key := s.topicKeys[i]
		pr := s.ctl.image.Partition(tp.Topic, tp.Partition)
		if pr == nil {
			continue
		}
		if s.suspend87[key] == pr.GetLeaderEpoch() {
			continue
		}
		s.report.Checks["§8.7 trueHW"]++
		behind := s.behind87[key]
		for id := range behind {
			if !slices.Contains(pr.GetIsr(), id) && !slices.Contains(pr.GetElr(), id) {
				delete(behind, id)
			}
		}
		for id := range isrThenELR(pr.GetIsr(), pr.GetElr()) {
			b := s.brokers[id-1]
			p := b.parts[tp]
			if !b.up || !b.registered || p == nil || !s.ctl.image.Acceptable(id) {
				continue
			}
			if s.ctl.image.Broker(id).GetBrokerEpoch() != b.epoch {
				continue
			}
			if leo := int64(p.r.LogEndOffset()); leo >= s.trueHW[key] {
				delete(behind, id)
			} else if behind[id] {
				s.report.Checks["§8.7 skipped: passed by a stale-m HW advance"]++
			} else {
				s.fail("§8.7 ISR ∪ ELR member below trueHW", "%s: broker %d (ISR %v ELR %v) LEO %d < trueHW %d\n%s", key, id, pr.GetIsr(), pr.GetElr(), leo, s.trueHW[key], s.describe())
				return
			}
		}
		if s.w != nil && s.w.exempt[key] {
			// SPEC §8 exemption (§6.8): after a tainted replica's unclean
			// election 9 may fail (its records and the other cluster's of
			// the same epoch number cannot be told apart, §6.10 case 2).
			// staleLeader suspends it only in LEs whose leader it has
			// classified; this covers every LE, a leaderless one too
			// (seed 191, TestKnownBugExemptionLeaderlessLE).
			continue
		}
		var reps []*simPart
		for _, id := range pr.GetReplicas() {
			b := s.brokers[id-1]
			if p := b.parts[tp]; b.up && p != nil && p.validatedLE >= s.lastUnclean[key] {
				reps = append(reps, p)
			}
		}
		for i := 0; i < len(reps); i++ {
			for j := i + 1; j < len(reps); j++ {
				s.report.Checks["§8.9 replicas agree below HW"]++
				if err := s.agreeBelowHW(reps[i], reps[j]); err != nil {
					s.fail("§8.9 replicas agree below min HW", "%s: %v", key, err)
					return
				}
			}
		}
	}
}

// isrThenELR yields isr's then elr's members, without the copy an
// append(slices.Clone(isr), elr...) makes every step.
func isrThenELR(isr, elr []int32) iter.Seq[int32] {
	return func(yield func(int32) bool) {
		for _, id := range isr {
			if !yield(id) {
				return
			}
		}
		for _, id := range elr {
			if !yield(id) {
				return
			}
		}
	}
}

// agreeBelowHW compares two replicas below the smaller HW. The prefix
// already verified is skipped while neither log was truncated since.
func (s *Sim) agreeBelowHW(a, b *simPart) error {
	hw := int64(min(a.r.HighWatermark(), b.r.HighWatermark()))
	from := max(a.shadow.start, b.shadow.start)
	key := [2]*simPart{a, b}
	if v, ok := s.verified[key]; ok && v.genA == a.shadow.gen && v.genB == b.shadow.gen {
		from = max(from, v.upTo)
	}
	defer func() {
		s.verified[key] = verifiedPrefix{genA: a.shadow.gen, genB: b.shadow.gen, upTo: hw}
	}()
	for o := from; o < hw; o++ {
		ra, oka := a.shadow.at(o)
		rb, okb := b.shadow.at(o)
		if !oka || !okb || ra != rb {
			return fmt.Errorf("offset %d: broker %d has %v (%t, HW %d, LE %d, validated LE %d), broker %d has %v (%t, HW %d, LE %d, validated LE %d)",
				o, a.b.id, ra, oka, a.r.HighWatermark(), a.r.LeaderEpoch(), a.validatedLE, b.b.id, rb, okb, b.r.HighWatermark(), b.r.LeaderEpoch(), b.validatedLE)
		}
	}
	return nil
}

// fullCheck re-reads every running replica's log from storage and compares
// it with the shadow the simulator kept from the LogOps: the storage engine
// must hold exactly what it was told.
func (s *Sim) fullCheck() {
	for _, b := range s.brokers {
		if !b.up {
			continue
		}
		for _, p := range b.sortedParts() {
			s.report.Checks["storage-vs-shadow"]++
			got := s.readShadow(p.log)
			if s.failed {
				return
			}
			if got.leo() != p.shadow.leo() {
				s.fail("storage = applied log ops", "broker %d %s: storage [%d, %d), shadow [%d, %d)", b.id, p.key, got.start, got.leo(), p.shadow.start, p.shadow.leo())
				return
			}
			for o := max(got.start, p.shadow.start); o < got.leo(); o++ {
				x, _ := got.at(o)
				y, _ := p.shadow.at(o)
				if x != y {
					s.fail("storage = applied log ops", "broker %d %s: offset %d storage %v shadow %v", b.id, p.key, o, x, y)
					return
				}
			}
		}
	}
	_ = twinlog.NoOffset
}

type verifiedPrefix struct {
	genA, genB int
	upTo       int64
}

// noteBehind87 records the ISR ∪ ELR members of tp that a stale-m HW
// advance to hw passed (those below it, or not running to say): §8.7
// skips them until they catch up or leave ISR ∪ ELR (see behind87).
func (s *Sim) noteBehind87(tp twinlog.TopicPartition, hw int64) {
	pr := s.ctl.image.Partition(tp.Topic, tp.Partition)
	key := tp.String()
	for id := range isrThenELR(pr.GetIsr(), pr.GetElr()) {
		b := s.brokers[id-1]
		if p := b.parts[tp]; b.up && p != nil && int64(p.r.LogEndOffset()) >= hw {
			continue
		}
		if s.behind87[key] == nil {
			s.behind87[key] = map[int32]bool{}
		}
		s.behind87[key][id] = true
	}
}
