package replica

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"pgregory.net/rapid"
)

// TestPropertyReplication drives 3–4 replicas through an adversarial
// schedule and checks SPEC §8 invariants 7, 8, 9 and 12 after every step.
//
// The schedule has random proposals (acks=all and acks=1), follower fetches
// that are queued, reordered, duplicated and dropped, ticks (ISR shrink),
// and a controller model (SPEC §3.6 checks) whose metadata and
// AlterPartition answers are adversarial:
//   - every controller change is recorded; each live replica applies it
//     only with some probability, lagging replicas catch up later to any
//     newer version (skipping some), and old versions are redelivered
//     (stale/reordered metadata, which the replica must ignore);
//   - AlterPartition requests are decided in any order, and the answers
//     reach the leader later, possibly after leader changes;
//   - clean leader switches, biased towards the member that joined the ISR
//     last (the S9 hazard: electing a just-added replica);
//   - leader crashes (fenced: out of the ISR, a live ISR member elected);
//   - follower crashes with clean restarts, and unclean restarts that lose
//     the log tail and register a new broker epoch (the controller drops
//     the broker from the ISR, SPEC §3.2; stale fetches with the old epoch
//     are still in the queue: S10).
//
// Checks: the replicas' own CheckInvariants; every acked acks=all record
// on the leader and on each ISR member below its HW; no two logs differing
// below min(HW₁, HW₂) (§8.9); each leader's HW monotonic within its LE,
// checked here independently of the machine's hwFloor (§8.8); and every
// running member of the controller's ISR has LEO ≥ trueHW, the highest HW
// any leader exposed (§8.7) — the invariant that KAFKA-7128 (S1) and the
// committed-ISR HW (S9) break before any election loses data.
//
// Mutations this test was checked against (each applied by hand to
// leader.go in a scratch copy of the repository, the test run five times
// with fresh seeds and default flags); each was caught in every run:
//  1. maybeAdvanceHW computes the HW over the committed ISR (r.isr) instead
//     of the maximal ISR (S9).
//  2. maybeExpandISR without the `fs.leo < r.leso` condition (S1,
//     KAFKA-7128).
//  3. maybeAdvanceHW sets the HW whenever it differs (`hw != r.hw`, also
//     moving hwFloor), i.e. the leader HW may decrease (§4.2).
func TestPropertyReplication(t *testing.T) {
	// The hazards need long, specific schedules (about one case in 50–100
	// hits a lagging-HW election): several rounds of -rapid.checks cases
	// (each with a fresh seed unless -rapid.seed is set) catch the
	// mutations below reliably while staying near 10 s with -race.
	rounds := 8
	if testing.Short() {
		rounds = 2
	}
	for i := 0; i < rounds && !t.Failed(); i++ {
		t.Run(fmt.Sprintf("round%d", i), testPropertyReplicationRound)
	}
}

func testPropertyReplicationRound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newPropModel(rt)
		defer func() {
			if rt.Failed() {
				rt.Log(m.e.out.String())
			}
		}()
		steps := rapid.IntRange(100, 400).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			m.step()
			m.collectAcks()
			m.check()
		}
	})
}

type delayedAlterResp struct {
	leader twinlog.BrokerID
	seq    uint64
	resp   *pb.AlterPartitionResponse
}

type leaderHW struct {
	le twinlog.Epoch
	hw twinlog.Offset
}

type propModel struct {
	rt      *rapid.T
	e       *env
	hist    []PartitionState // every controller version, in order
	applied map[twinlog.BrokerID]int
	resps   []delayedAlterResp
	lastAdd twinlog.BrokerID // member added to the ISR most recently
	trueHW  twinlog.Offset
	lhw     map[twinlog.BrokerID]leaderHW
	props   map[twinlog.BrokerID]*inflightAlter // last ISR proposal checked, per node
	acked   map[twinlog.Offset]string
	ackAll  map[ProposalID]bool
}

func newPropModel(rt *rapid.T) *propModel {
	e := newEnv(1000)
	e.quiet = false
	m := &propModel{rt: rt, e: e, applied: map[twinlog.BrokerID]int{}, lastAdd: twinlog.NoBroker,
		lhw: map[twinlog.BrokerID]leaderHW{}, props: map[twinlog.BrokerID]*inflightAlter{}, acked: map[twinlog.Offset]string{}, ackAll: map[ProposalID]bool{}}
	n := rapid.IntRange(3, 4).Draw(rt, "replicas")
	e.ctl.m = rapid.IntRange(1, n).Draw(rt, "m")
	for i := 1; i <= n; i++ {
		id := twinlog.BrokerID(i)
		e.addNode(id, &memLog{}, 0)
		e.ctl.replicas = append(e.ctl.replicas, id)
	}
	// A random initial ISR that holds the leader: the others start as new
	// replicas that must earn their place (S1's r3).
	e.ctl.isr = []twinlog.BrokerID{1}
	for _, id := range e.ctl.replicas[1:] {
		if rapid.Bool().Draw(rt, fmt.Sprintf("in-isr-%d", id)) {
			e.ctl.isr = append(e.ctl.isr, id)
		}
	}
	e.ctl.leader, e.ctl.le, e.ctl.pe = 1, 1, 1
	m.write(true)
	return m
}

// write records the controller's current state as a new version and
// delivers it to every live replica (all) or to a random subset.
func (m *propModel) write(all bool) {
	m.hist = append(m.hist, m.e.partitionState())
	v := len(m.hist) - 1
	m.e.printf("controller v%d: L %d LE %d PE %d ISR %v brokers %v\n", v, m.e.ctl.leader, m.e.ctl.le, m.e.ctl.pe, m.e.ctl.isr, m.e.ctl.brokers)
	for _, id := range m.e.ids() {
		if all || rapid.Bool().Draw(m.rt, "deliver") {
			m.deliver(id, v)
		}
	}
}

func (m *propModel) deliver(id twinlog.BrokerID, v int) {
	n := m.e.nodes[id]
	if !n.up {
		return
	}
	m.e.printf("metadata v%d -> %d\n", v, id)
	n.r.ApplyPartitionState(m.hist[v], m.e.now)
	m.e.processReady(n)
	m.applied[id] = max(m.applied[id], v)
}

func (m *propModel) liveISR(except twinlog.BrokerID) []twinlog.BrokerID {
	var out []twinlog.BrokerID
	for _, id := range m.e.ctl.isr {
		if id != except && m.e.nodes[id].up {
			out = append(out, id)
		}
	}
	return out
}

func (m *propModel) step() {
	e, rt := m.e, m.rt
	ids := e.ids()
	pick := func(label string) twinlog.BrokerID { return rapid.SampledFrom(ids).Draw(rt, label) }
	switch rapid.IntRange(0, 16).Draw(rt, "action") {
	case 0, 1: // produce to whoever believes it leads (zombies included)
		id := pick("producer")
		if n := e.nodes[id]; n.up && n.r.Role() == RoleLeader {
			e.nextProp++
			acks := rapid.SampledFrom([]Acks{AcksAll, AcksAll, AcksLeader}).Draw(rt, "acks")
			m.ackAll[e.nextProp] = acks == AcksAll
			d := n.r.Propose(Proposal{ID: e.nextProp, Acks: acks, TimeoutMs: 5000, NumRecords: rapid.IntRange(1, 3).Draw(rt, "n")}, e.now)
			e.printf("propose %d to %d: %s [%d, %d]\n", e.nextProp, id, shortCode(d.Error), d.BaseOffset, d.LastOffset)
			e.processReady(n)
		}
	case 2, 3: // a follower sends its next fetch (possibly again)
		e.sendFetch(pick("fetcher"), rapid.IntRange(0, 3).Draw(rt, "max"))
	case 4, 5, 6: // one queued fetch is delivered (any order) or lost
		if len(e.fetchQ) > 0 {
			j := rapid.IntRange(0, len(e.fetchQ)-1).Draw(rt, "q")
			q := e.fetchQ[j]
			if rapid.IntRange(0, 3).Draw(rt, "duplicate") > 0 {
				// Else the network duplicates it: a copy stays queued and
				// reaches the leader again later, stale.
				e.fetchQ = slices.Delete(e.fetchQ, j, j+1)
			}
			switch rapid.IntRange(0, 5).Draw(rt, "fate") {
			case 0: // lost on the way to the leader
				e.printf("fetch %d->%d offset %d: lost\n", q.from, q.target.Leader, q.target.Request.FetchOffset)
			case 1: // the leader handles it, the answer is lost
				m.deliverFetch(q, true)
			default:
				m.deliverFetch(q, false)
			}
		}
	case 7: // the controller decides one outstanding AlterPartition
		if len(e.alters) > 0 {
			m.decideAlter(rapid.IntRange(0, len(e.alters)-1).Draw(rt, "alter"))
		}
	case 8: // a delayed AlterPartition answer reaches its sender
		if len(m.resps) > 0 {
			j := rapid.IntRange(0, len(m.resps)-1).Draw(rt, "resp")
			r := m.resps[j]
			m.resps = slices.Delete(m.resps, j, j+1)
			if n := e.nodes[r.leader]; n.up && rapid.IntRange(0, 5).Draw(rt, "resp-drop") > 0 {
				e.printf("alter-partition answer seq %d -> %d: %s\n", r.seq, r.leader, shortCode(r.resp.GetError()))
				n.r.HandleAlterPartitionResponse(r.seq, r.resp, e.now)
				e.processReady(n)
			}
		}
	case 9:
		e.now += int64(rapid.IntRange(0, 700).Draw(rt, "ms"))
		for _, id := range ids {
			if n := e.nodes[id]; n.up {
				n.r.Tick(e.now)
				e.processReady(n)
			}
		}
	case 10: // clean leader switch, preferring the last member added
		cands := m.liveISR(e.ctl.leader)
		if len(cands) == 0 {
			return
		}
		next := rapid.SampledFrom(cands).Draw(rt, "leader")
		if slices.Contains(cands, m.lastAdd) && rapid.Bool().Draw(rt, "elect-last-added") {
			next = m.lastAdd
		}
		e.ctl.leader = next
		e.ctl.le++
		e.ctl.pe++
		m.write(rapid.Bool().Draw(rt, "all"))
	case 11: // the leader crashes and is fenced out of the ISR
		cands := m.liveISR(e.ctl.leader)
		if len(cands) == 0 || !e.nodes[e.ctl.leader].up {
			return
		}
		old := e.ctl.leader
		e.nodes[old].up = false
		e.printf("crash leader %d\n", old)
		e.ctl.isr = slices.DeleteFunc(e.ctl.isr, func(x twinlog.BrokerID) bool { return x == old })
		e.ctl.leader = rapid.SampledFrom(cands).Draw(rt, "leader")
		if slices.Contains(cands, m.lastAdd) && rapid.Bool().Draw(rt, "elect-last-added") {
			e.ctl.leader = m.lastAdd
		}
		e.ctl.le++
		e.ctl.pe++
		m.write(rapid.Bool().Draw(rt, "all"))
	case 12: // a follower crashes
		id := pick("crash")
		if n := e.nodes[id]; n.up && id != e.ctl.leader {
			n.up = false
			e.printf("crash %d\n", id)
		}
	case 13: // a crashed node restarts, cleanly or losing its log tail
		id := pick("restart")
		n := e.nodes[id]
		if n.up {
			return
		}
		n.up = true
		if rapid.Bool().Draw(rt, "unclean") {
			keep := twinlog.Offset(rapid.IntRange(int(n.log.start), int(n.log.leo())).Draw(rt, "keep"))
			n.log.recs = n.log.recs[:keep-n.log.start]
			n.ckpt = n.log.epochs()
			n.hwCkpt = min(n.hwCkpt, keep)
			e.ctl.brokers[id]++
			e.printf("restart %d unclean: log %v, broker epoch %d\n", id, n.log, e.ctl.brokers[id])
			e.open(n)
			// SPEC §3.2: an unclean registration drops the broker from the
			// ISR (it is never the leader here: leaders are fenced first).
			if slices.Contains(e.ctl.isr, id) {
				e.ctl.isr = slices.DeleteFunc(e.ctl.isr, func(x twinlog.BrokerID) bool { return x == id })
			}
			e.ctl.pe++
			m.write(rapid.Bool().Draw(rt, "all"))
		} else {
			e.printf("restart %d clean\n", id)
			e.open(n)
		}
		// A restarted broker acts on partitions only once it has caught up
		// with the metadata (SPEC §3.2: it is fenced until then).
		m.deliver(id, len(m.hist)-1)
	case 14: // a lagging replica catches up to some newer version
		id := pick("catch-up")
		if m.applied[id] < len(m.hist)-1 {
			m.deliver(id, rapid.IntRange(m.applied[id]+1, len(m.hist)-1).Draw(rt, "v"))
		}
	case 15: // an old version is redelivered (must be ignored)
		m.deliver(pick("stale"), rapid.IntRange(0, len(m.hist)-1).Draw(rt, "stale-v"))
	case 16: // retention deletes a node's log prefix below its HW (broker/retention.go)
		id := pick("retention")
		n := e.nodes[id]
		if !n.up || n.r.HighWatermark() <= n.log.start {
			return
		}
		o := twinlog.Offset(rapid.IntRange(int(n.log.start)+1, int(n.r.HighWatermark())).Draw(rt, "retain-from"))
		// Storage deletes whole segments, and a batch never straddles
		// two: the cut is at a proposal's first record.
		batch := func(o twinlog.Offset) string { p, _, _ := strings.Cut(n.log.at(o).id, "."); return p }
		for o > n.log.start && o < n.log.leo() && batch(o-1) == batch(o) {
			o--
		}
		if o == n.log.start {
			return
		}
		n.log.recs = n.log.recs[o-n.log.start:]
		n.log.start = o
		e.printf("retention on %d: log start %d\n", id, o)
		n.r.AdvanceLogStart(o)
		e.processReady(n)
	}
}

// deliverFetch is env.deliverFetch with a lossy answer: with lose the
// leader handles the request (its view of the follower moves) but the
// follower never sees the answer, so its HW lags (S1's r2 and r4).
func (m *propModel) deliverFetch(q queuedFetch, lose bool) {
	if !lose {
		m.e.deliverFetch(q)
		return
	}
	e := m.e
	f, l := e.nodes[q.from], e.nodes[q.target.Leader]
	if l == nil || !l.up || !f.up {
		return
	}
	d := l.r.HandleFollowerFetch(q.target.Request, e.now)
	e.printf("fetch %d->%d offset %d LE %d: %s HW %d, answer lost\n", q.from, q.target.Leader, q.target.Request.FetchOffset, q.target.Request.CurrentLeaderEpoch, shortCode(d.Error), d.HighWatermark)
	e.processReady(l)
}

// decideAlter plays the controller for outstanding AlterPartition j (SPEC
// §3.6 checks 1–8, simplified); the answer is queued, not delivered.
func (m *propModel) decideAlter(j int) {
	e, c := m.e, &m.e.ctl
	a := e.alters[j]
	e.alters = slices.Delete(e.alters, j, j+1)
	req := a.prop.Request
	code := errNone
	if rapid.IntRange(0, 6).Draw(m.rt, "alter-fail") == 0 {
		code = pb.ErrorCode_ERROR_CODE_NOT_CONTROLLER
	}
	if code == errNone {
		acc := func(id int32, be int64) bool {
			reg, ok := c.brokers[twinlog.BrokerID(id)]
			return ok && !c.fenced[twinlog.BrokerID(id)] && (be == -1 || be == int64(reg))
		}
		switch {
		case req.BrokerEpoch != int64(c.brokers[twinlog.BrokerID(req.BrokerId)]):
			code = pb.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH
		case twinlog.Epoch(req.LeaderEpoch) > c.le || twinlog.PartitionEpoch(req.PartitionEpoch) > c.pe:
			code = pb.ErrorCode_ERROR_CODE_NOT_CONTROLLER
		case twinlog.Epoch(req.LeaderEpoch) < c.le:
			code = errFenced
		case twinlog.BrokerID(req.BrokerId) != c.leader:
			code = errInvalidRequest
		case twinlog.PartitionEpoch(req.PartitionEpoch) < c.pe:
			code = pb.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION
		default:
			for _, x := range req.NewIsr {
				if !acc(x.BrokerId, x.BrokerEpoch) {
					code = pb.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA
				}
			}
		}
	}
	resp := &pb.AlterPartitionResponse{Error: code}
	e.printf("controller: alter-partition seq %d from %d -> %s\n", a.prop.Seq, a.leader, shortCode(code))
	if code == errNone {
		old := c.isr
		c.pe++
		c.isr = nil
		for _, x := range req.NewIsr {
			id := twinlog.BrokerID(x.BrokerId)
			c.isr = append(c.isr, id)
			if !slices.Contains(old, id) {
				m.lastAdd = id
			}
		}
		c.recovery = req.RecoveryState
		resp = &pb.AlterPartitionResponse{Leader: int32(c.leader), LeaderEpoch: int32(c.le), PartitionEpoch: int32(c.pe), RecoveryState: c.recovery}
		for _, id := range c.isr {
			resp.Isr = append(resp.Isr, int32(id))
		}
		m.write(rapid.Bool().Draw(m.rt, "all"))
	}
	m.resps = append(m.resps, delayedAlterResp{leader: a.leader, seq: a.prop.Seq, resp: resp})
}

// collectAcks records acked acks=all records (values from the log of the
// leader that acked them).
func (m *propModel) collectAcks() {
	e := m.e
	for pid, res := range e.results {
		if res.Error != errNone || !m.ackAll[pid] {
			continue
		}
		if _, done := e.acked[pid]; done {
			continue
		}
		e.acked[pid] = [2]twinlog.Offset{res.BaseOffset, res.BaseOffset}
		want := fmt.Sprintf("p%d.%d", pid, res.BaseOffset)
		var l *node
		for _, id := range e.ids() {
			if n := e.nodes[id]; n.up && res.BaseOffset < n.log.leo() && res.BaseOffset >= n.log.start && n.log.at(res.BaseOffset).id == want {
				l = n
			}
		}
		if l == nil {
			m.rt.Fatalf("acked proposal %d at %d is on no replica", pid, res.BaseOffset)
		}
		for o := res.BaseOffset; o < l.log.leo() && l.log.at(o).id == fmt.Sprintf("p%d.%d", pid, o); o++ {
			m.acked[o] = l.log.at(o).id
		}
	}
}

func (m *propModel) check() {
	e, rt := m.e, m.rt
	for _, id := range e.ids() {
		n := e.nodes[id]
		if !n.up || n.r.Role() != RoleLeader {
			continue
		}
		hw, le := n.r.HighWatermark(), n.r.LeaderEpoch()
		if prev, ok := m.lhw[id]; ok && prev.le == le && hw < prev.hw {
			rt.Fatalf("leader %d HW went back in LE %d: %d -> %d", id, le, prev.hw, hw)
		}
		m.lhw[id] = leaderHW{le: le, hw: hw}
		m.trueHW = max(m.trueHW, hw)
	}
	// A new ISR proposal may add f only if the leader saw f's LEO ≥ trueHW
	// (SPEC §4.5: f.LEO ≥ LESO, and LESO ≥ trueHW by §8.7): else f would
	// be a member lacking committed records.
	for _, id := range e.ids() {
		n := e.nodes[id]
		in := n.r.inflight
		if !n.up || in == nil || m.props[id] == in {
			continue
		}
		m.props[id] = in
		for _, f := range in.isr {
			if fs := n.r.followers[f]; fs != nil && !slices.Contains(n.r.isr, f) && fs.leo < m.trueHW {
				rt.Fatalf("leader %d (LE %d, HW %d, LESO %d) proposes ISR %v adding %d at LEO %d < trueHW %d",
					id, n.r.le, n.r.hw, n.r.leso, in.isr, f, fs.leo, m.trueHW)
			}
		}
	}
	for _, id := range e.ctl.isr {
		if n := e.nodes[id]; n.up && n.log.leo() < m.trueHW {
			rt.Fatalf("ISR %v member %d has LEO %d < trueHW %d (log %v)", e.ctl.isr, id, n.log.leo(), m.trueHW, n.log)
		}
	}
	check(rt, e, m.acked)
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
				if o < n.log.start {
					continue // deleted by retention
				}
				if o >= n.log.leo() || n.log.at(o).id != want {
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
