package replica

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"pgregory.net/rapid"
)

// TestPropertyReplication drives three replicas with random proposals, fetch
// deliveries (drops, reorders), controller answers, follower crashes,
// leader changes (new leader always from the ISR) and ticks, and checks
// after every step: local invariants, every acked acks=all record on every
// ISR member below its HW, and no two logs differing below min(HW₁, HW₂)
// (SPEC §8 7, 9, 12).
func TestPropertyReplication(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		e := newEnv(1000)
		e.quiet = false
		defer func() {
			if rt.Failed() {
				rt.Log(e.out.String())
			}
		}()
		e.ctl.m = rapid.IntRange(1, 3).Draw(rt, "m")
		for _, id := range []twinlog.BrokerID{1, 2, 3} {
			e.addNode(id, &memLog{}, 0)
		}
		e.ctl.replicas = []twinlog.BrokerID{1, 2, 3}
		e.ctl.isr = []twinlog.BrokerID{1, 2, 3}
		e.ctl.leader, e.ctl.le, e.ctl.pe = 1, 1, 1
		e.push(e.ids())
		acked := map[twinlog.Offset]string{}
		ackAll := map[ProposalID]bool{}
		steps := rapid.IntRange(1, 200).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			switch rapid.IntRange(0, 9).Draw(rt, "action") {
			case 0, 1:
				if l := e.nodes[e.ctl.leader]; l != nil && l.up {
					e.nextProp++
					acks := rapid.SampledFrom([]Acks{AcksAll, AcksLeader}).Draw(rt, "acks")
					ackAll[e.nextProp] = acks == AcksAll
					l.r.Propose(Proposal{ID: e.nextProp, Acks: acks, TimeoutMs: 2000, NumRecords: rapid.IntRange(1, 3).Draw(rt, "n")}, e.now)
					e.processReady(l)
				}
			case 2, 3:
				e.sendFetch(twinlog.BrokerID(rapid.IntRange(1, 3).Draw(rt, "f")), rapid.IntRange(0, 3).Draw(rt, "max"))
			case 4, 5:
				if len(e.fetchQ) > 0 {
					j := rapid.IntRange(0, len(e.fetchQ)-1).Draw(rt, "q")
					q := e.fetchQ[j]
					e.fetchQ = slices.Delete(e.fetchQ, j, j+1)
					if !rapid.Bool().Draw(rt, "drop") {
						e.deliverFetch(q)
					}
				}
			case 6:
				if len(e.alters) > 0 {
					code := rapid.SampledFrom([]ErrorCode{errNone, errNone, pb.ErrorCode_ERROR_CODE_NOT_CONTROLLER}).Draw(rt, "code")
					e.answerAlter(code)
				}
			case 7:
				e.now += int64(rapid.IntRange(0, 700).Draw(rt, "ms"))
				for _, id := range e.ids() {
					if n := e.nodes[id]; n.up {
						n.r.Tick(e.now)
						e.processReady(n)
					}
				}
			case 8:
				// Leader change to another live ISR member (clean election).
				var cands []twinlog.BrokerID
				for _, id := range e.ctl.isr {
					if id != e.ctl.leader && e.nodes[id].up {
						cands = append(cands, id)
					}
				}
				if len(cands) > 0 {
					e.ctl.leader = rapid.SampledFrom(cands).Draw(rt, "leader")
					e.ctl.le++
					e.ctl.pe++
					e.push(e.ids())
				}
			case 9:
				id := twinlog.BrokerID(rapid.IntRange(1, 3).Draw(rt, "crash"))
				n := e.nodes[id]
				switch {
				case n.up && id != e.ctl.leader:
					n.up = false
				case !n.up:
					n.up = true
					e.open(n)
					e.push([]twinlog.BrokerID{id})
				}
			}
			// Collect acks=all acknowledgements (values from the leader's log).
			for pid, res := range e.results {
				if res.Error == errNone && ackAll[pid] {
					if _, done := e.acked[pid]; !done {
						e.acked[pid] = [2]twinlog.Offset{res.BaseOffset, res.BaseOffset}
						l := e.nodes[e.ctl.leader]
						for o := res.BaseOffset; o < l.log.leo() && l.log.at(o).id == fmt.Sprintf("p%d.%d", pid, o); o++ {
							acked[o] = l.log.at(o).id
						}
					}
				}
			}
			check(rt, e, acked)
		}
	})
}

func check(rt *rapid.T, e *env, acked map[twinlog.Offset]string) {
	for _, id := range e.ids() {
		e.nodes[id].r.CheckInvariants()
	}
	for _, id := range e.ctl.isr {
		n := e.nodes[id]
		for o, want := range acked {
			if o < n.r.HighWatermark() && o >= n.log.start && n.log.at(o).id != want {
				rt.Fatalf("ISR member %d lost acked record at %d: %s vs %s", id, o, n.log.at(o).id, want)
			}
		}
		if id == e.ctl.leader && n.up && n.r.Role() == RoleLeader {
			for o, want := range acked {
				if o >= n.log.leo() || n.log.at(o).id != want {
					rt.Log(e.out.String())
					rt.Fatalf("leader %d lacks acked record at %d (%s); log %v", id, o, want, n.log)
				}
			}
		}
	}
	ids := e.ids()
	for i, a := range ids {
		for _, b := range ids[i+1:] {
			na, nb := e.nodes[a], e.nodes[b]
			h := min(na.r.HighWatermark(), nb.r.HighWatermark())
			for o := max(na.log.start, nb.log.start); o < h; o++ {
				if na.log.at(o) != nb.log.at(o) {
					rt.Fatalf("replicas %d and %d differ at %d below HW %d: %v vs %v", a, b, o, h, na.log, nb.log)
				}
			}
		}
	}
}
