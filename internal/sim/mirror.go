package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/assign"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/controller/metastate"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/runner"
	"github.com/twinlog/twinlog/storage"
)

// Two-cluster mode (Config.Clusters = 2): clusters A and B are two Sims
// stepped in lockstep by a world. B's topic t is created by CreateMirror
// from A's (same topic id and partition count) and mirrored by a
// plan.Machine on each of B's partition leaders, driven by a shell that
// copies broker/mirror.go: Start from metadata, GetLastMirroredEpochs
// answered from the other cluster's __mirror_state per
// plan.AnswerLastMirroredEpoch, BumpLeaderEpoch through the local
// metastate (a truncation offset records a truncation point, §6.2f),
// Fetch{MIRROR} to the source leader (served by the source replica's
// HandleFollowerFetch and storage.Log.Read below its HW), append via
// AppendAsMirrorLeader, taints. At random moments the world fails over
// (Stop on the destination; half of the time after draining the source)
// and fails back (the old source mirrors from the new one: CreateMirror or
// StartMirrorTopics on it), with cross-cluster link cuts, drops and delays
// and flips of mirror.support.unclean.leader.election.
//
// __mirror_state is modelled as a table per cluster held at the
// controller node (durable, acks=all once applied): writes are ordered per
// writer (one in flight, stale ones dropped like an idempotent producer),
// carry stateEpoch = LE, and are applied with plan.StateTable's reader
// rule. A new leader reads it with a round trip before BecameLeader.
//
// Checks (besides each cluster's own): §8.15 at every copy (the record
// appended equals the source's at serve time; the source served below its
// HW; D.LEO ≤ the source HW of that response), §8.16 after every step (LE ≥
// every record epoch on every replica with a role; the D leader's cache has
// no empty epoch above lmleUsed while MIRRORING), §8.17 (Produce to a
// partition the mirror shell has not made writable is refused with
// READ_ONLY_TOPIC and the LEO is unchanged; a Fetch{MIRROR} answered NONE
// comes from a writable partition), §8.20 (every 200 steps and at the end,
// while the destination leader is MIRRORING: per epoch, the untainted
// replicas of both clusters hold records produced in one cluster only),
// §8.21 after the final failback and catch-up, and the cross-cluster
// history: at every failover each acks=all write the source acknowledged
// below the destination's HW must be on the destination (unless the source
// recorded a truncation since the ack or the copy); it then counts as an
// ack of the destination, whose History checks it survives to the end.
// 20 and 21 are suspended for a partition once a tainted replica is
// elected uncleanly (the §6.8 exemption).

// MirrorReport is what the mirror did in a two-cluster run.
type MirrorReport struct {
	Failovers, PlannedFailovers, Failbacks int
	// Truncations by reason (lmle, divergence, out_of_range) as done by
	// destination leaders; LMLENoOps counts LMLE truncations with nothing
	// to cut.
	Truncations     map[string]int
	LMLENoOps       int
	Bumps           int
	LMLEQueries     int
	MirroredRecords int
	// TransferredAcks are acks=all writes of the source found on the
	// destination at a failover (then checked there to the end);
	// UncopiedAcks were above the destination's HW (lost by design).
	TransferredAcks, UncopiedAcks int
	Transitions                   map[string]int // by target state
	CrossFaults                   map[string]int
	Checks                        map[string]int
	// StaleLeaders counts leaders for whose LE §8.7 and §8.9 are suspended
	// (after a tainted replica's unclean election, see staleLeader).
	StaleLeaders int
	// HWCaps counts replicas that became leader with a HW above a
	// truncation point recorded after their last validated LE: broker/replica
	// capped the HW there (SPEC §6.2f, see staleLeader).
	HWCaps int
	// Exempt counts partitions where §8.20/21 were suspended (§6.8).
	Exempt int
	// CaughtUp: the final mirror direction caught up during healing.
	CaughtUp bool
}

func (m *MirrorReport) String() string {
	kinds := func(x map[string]int) string {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range x {
				if !yield(k) {
					return
				}
			}
		})
		var b strings.Builder
		for i, k := range keys {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s=%d", k, x[k])
		}
		return b.String()
	}
	return fmt.Sprintf("mirror: failovers %d (planned %d), failbacks %d, truncations %s (lmle no-ops %d), bumps %d, lmle queries %d, mirrored records %d, transferred acks %d, uncopied acks %d, caught up %t, stale leaders %d, HW caps %d, exempt %d\n  transitions %s\n  cross faults %s\n  mirror checks %s",
		m.Failovers, m.PlannedFailovers, m.Failbacks, kinds(m.Truncations), m.LMLENoOps, m.Bumps, m.LMLEQueries, m.MirroredRecords,
		m.TransferredAcks, m.UncopiedAcks, m.CaughtUp, m.StaleLeaders, m.HWCaps, m.Exempt, kinds(m.Transitions), kinds(m.CrossFaults), kinds(m.Checks))
}

func (r *Report) mirrorString() string {
	if r.Mirror == nil {
		return ""
	}
	out := "\n  " + r.Mirror.String()
	if r.Peer != nil {
		out += "\ncluster b: " + r.Peer.String()
	}
	return out
}

type phase int

const (
	phaseMirroring  phase = iota // dst mirrors src
	phaseDraining                // planned failover: src producers off, waiting for catch-up
	phaseFailedOver              // dst stopped: both writable until the failback
)

const mirrorName = "m"

// world owns both clusters of a two-cluster run.
type world struct {
	cfg      Config
	rng      *rand.Rand
	a, b     *Sim
	src, dst *Sim
	phase    phase
	since    int64 // phase start
	drainEnd int64
	faultsOn bool

	xq       []*xmsg
	xseq     uint64
	cutUntil int64 // cross-cluster link cut until (0: none)
	fetchSeq uint64

	runners  []*mirrorRunner
	byPart   map[*simPart]*mirrorRunner
	writable map[*simPart]bool // the shell's mirrorWritable
	// writableLE: the LE of the last SetWritable (mirrorWritableLE).
	writableLE map[*simPart]twinlog.Epoch
	tables     map[*Sim]*stateTable
	confirmQ   []confirmReq
	// copies[dst][partition][offset]: the last record the mirror copied
	// there, with the source history's position at serve time.
	copies map[*Sim]map[string]map[int64]copyRec
	exempt map[string]bool
	// leaderSeen: the LE in which a leader replica was last classified by
	// staleLeader, and whether it was stale then.
	leaderSeen map[*simPart]int32
	staleLE    map[*simPart]bool
	// staleUntilTrunc: a stale leader led the partition since its last
	// truncation point.
	staleUntilTrunc map[*Sim]map[string]bool
	rep             *MirrorReport
	step            int
	ops             *worldOps // ops.go: pause/resume, §8.18
}

type copyRec struct {
	value  string
	srcSeq uint64
}

type confirmReq struct {
	p  *simPart
	id twinlog.BrokerID
}

// xmsg is one cross-cluster packet.
type xmsg struct {
	seq     uint64
	at      int64
	to      *Sim
	toNode  nodeID
	toInc   int
	deliver func()
}

func runTwo(cfg Config) (rep *Report, err error) {
	w := &world{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x6d6972726f72)),
		byPart: map[*simPart]*mirrorRunner{}, writable: map[*simPart]bool{}, writableLE: map[*simPart]twinlog.Epoch{}, tables: map[*Sim]*stateTable{},
		copies: map[*Sim]map[string]map[int64]copyRec{}, exempt: map[string]bool{},
		leaderSeen: map[*simPart]int32{}, staleLE: map[*simPart]bool{}, staleUntilTrunc: map[*Sim]map[string]bool{},
		rep: &MirrorReport{Truncations: map[string]int{}, Transitions: map[string]int{}, CrossFaults: map[string]int{}, Checks: map[string]int{}}}
	w.a = newSim(cfg, "a", cfg.Seed)
	w.b = newSim(cfg, "b", cfg.Seed+0xb)
	w.b.producerBase = 10
	w.a.tracePrefix, w.b.tracePrefix = "[a] ", "[b] "
	w.b.traceSink = w.a
	for _, s := range []*Sim{w.a, w.b} {
		s.w = w
		w.tables[s] = &stateTable{lastSeq: map[writerKey]uint64{}}
		w.copies[s] = map[string]map[int64]copyRec{}
		w.staleUntilTrunc[s] = map[string]bool{}
	}
	w.src, w.dst = w.a, w.b
	defer func() {
		if r := recover(); r != nil {
			w.a.fail("panic", "%v\n%s", r, debug.Stack())
		}
		for _, s := range []*Sim{w.a, w.b} {
			s.report.Steps, s.report.SimMs, s.report.TraceHash = s.step, s.now, w.a.traceHash
			s.report.History = s.hist.Summary()
		}
		ra, rb := w.a.report, w.b.report
		ra.Peer, ra.Mirror = &rb, w.rep
		rep = &ra
		switch {
		case w.a.failure != nil:
			err = w.a.failure
		case w.b.failure != nil:
			err = w.b.failure
		}
	}()
	w.run()
	return
}

func (w *world) failed() bool { return w.a.failed || w.b.failed }

func (w *world) run() {
	a, b := w.a, w.b
	if w.cfg.FaultMs == 0 || w.cfg.HealMs == 0 {
		panic("runTwo needs defaults applied")
	}
	a.setupStart()
	b.cfg.Partitions = a.report.Partitions
	b.setupStart()
	for !w.failed() && a.now < 5000 {
		w.tick()
		if a.registeredAll() && b.registeredAll() {
			break
		}
	}
	a.setupTopic(nil)
	topicID := a.ctl.image.Topic("t").GetTopicId()
	b.setupTopic(func(rf int) {
		b.ctl.do("create-mirror", func(st *metastate.State) *pb.MetadataDelta {
			d, resp := st.CreateMirror(&pb.CreateMirrorRequest{Name: mirrorName, SourceBootstrap: []string{"a"}, Topics: []string{"t"}}, "a",
				map[string]metastate.SourceTopic{"t": {TopicID: topicID, Partitions: int32(a.report.Partitions), ReplicationFactor: int32(rf)}})
			if resp.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
				b.fail("setup", "create mirror: %v", resp)
			}
			for _, r := range resp.GetTopics() {
				if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
					b.fail("setup", "create mirror: %v", r)
				}
			}
			return d
		})
	})
	a.startClients()
	b.startClients()
	w.faultsOn = true
	w.since = a.now
	a.tracef("mirror: b mirrors a (topic id %s)", topicID)
	end := a.now + w.cfg.FaultMs
	for !w.failed() && a.now < end {
		w.tick()
	}
	w.heal()
}

// tick is one world step: both clusters step, cross-cluster packets are
// delivered, the mirror shells run, world faults strike, checks run.
func (w *world) tick() {
	w.step++
	w.a.tick()
	if w.failed() {
		return
	}
	w.b.tick()
	if w.failed() {
		return
	}
	w.deliver()
	w.confirmTaints()
	w.syncRunners()
	for _, r := range w.runners {
		if w.failed() {
			return
		}
		r.run()
	}
	if w.faultsOn {
		w.injectFaults()
	}
	w.operator()
	w.stepOps()
	if !w.failed() {
		w.checkStep()
	}
}

func (w *world) now() int64 { return w.a.now }

func (w *world) other(s *Sim) *Sim {
	if s == w.a {
		return w.b
	}
	return w.a
}

// ---- cross-cluster network ----

func (w *world) xcut() bool { return w.cutUntil > w.now() }

// xsend sends a packet from one cluster to a node of the other: drops,
// delays and the cross-cluster cut as in network.send.
func (w *world) xsend(to *Sim, toNode nodeID, kind string, deliver func()) {
	w.xseq++
	if w.xcut() {
		w.rep.CrossFaults["drop-cut"]++
		return
	}
	if w.faultsOn && w.rng.Float64() < w.cfg.DropProb {
		w.rep.CrossFaults["drop"]++
		return
	}
	delay := int64(2 + w.rng.IntN(int(2*w.cfg.MaxDelayMs)))
	if w.faultsOn && w.rng.Float64() < w.cfg.SlowProb {
		delay += int64(w.rng.IntN(int(w.cfg.SlowDelayMs)))
		w.rep.CrossFaults["delay"]++
	}
	w.xq = append(w.xq, &xmsg{seq: w.xseq, at: w.now() + delay, to: to, toNode: toNode, toInc: to.incarnation(toNode), deliver: deliver})
	w.a.report.Messages++
}

func (w *world) deliver() {
	now := w.now()
	var due, keep []*xmsg
	for _, m := range w.xq {
		if m.at <= now {
			due = append(due, m)
		} else {
			keep = append(keep, m)
		}
	}
	w.xq = keep
	slices.SortFunc(due, func(x, y *xmsg) int {
		if x.at != y.at {
			return int(x.at - y.at)
		}
		return int(x.seq - y.seq)
	})
	for _, m := range due {
		if w.failed() {
			return
		}
		if w.xcut() {
			w.rep.CrossFaults["drop-cut"]++
			continue
		}
		if !m.to.nodeUp(m.toNode) || m.to.incarnation(m.toNode) != m.toInc {
			continue
		}
		m.deliver()
	}
}

// ---- __mirror_state ----

type writerKey struct {
	cluster string
	broker  int32
	inc     int
	lead    int
	tp      twinlog.TopicPartition
}

// stateTable is one cluster's __mirror_state (SPEC §6.4) as applied by its
// readers.
type stateTable struct {
	lmle    plan.StateTable[plan.LmleKey, *pb.MirrorLmleRecord]
	run     plan.StateTable[plan.RunKey, *pb.MirrorRunRecord]
	lastSeq map[writerKey]uint64
}

func (t *stateTable) lmleRec(topicID string, part int32) *pb.MirrorLmleRecord {
	r, _ := t.lmle.Get(plan.LmleKey{TopicID: topicID, Partition: part})
	return r
}

func (t *stateTable) runRec(mirror, topicID string, part int32) *pb.MirrorRunRecord {
	r, _ := t.run.Get(plan.RunKey{Mirror: mirror, TopicID: topicID, Partition: part})
	return r
}

// taints is the durable taint set of a partition.
func (t *stateTable) taints(topicID string, part int32) []int32 {
	var out []int32
	for _, x := range t.lmleRec(topicID, part).GetTaints() {
		out = append(out, x.GetReplica())
	}
	return out
}

// ---- hooks called by the cluster shells ----

// applyAssignment hands a metadata change to the replica as
// broker/metadata.go does (assign.Apply), with the world's record of the
// runner's writable flag and the LE it was set in.
func (w *world) applyAssignment(p *simPart, a assign.Assignment, st replica.PartitionState) {
	le, ok := w.writableLE[p]
	if !ok {
		le = twinlog.NoEpoch
	}
	w.writable[p] = assign.Apply(p.r, a, st, twinlog.BrokerID(p.b.id), w.writable[p], le, w.now())
}

// repaired is broker.repaired: cleared taints go to the partition's runner
// (FollowerRepaired), or are confirmed at once if it has none.
func (w *world) repaired(p *simPart, ids []twinlog.BrokerID) {
	for _, id := range ids {
		if r := w.byPart[p]; r != nil {
			r.post(plan.FollowerRepaired{Replica: id})
		} else {
			w.confirmQ = append(w.confirmQ, confirmReq{p: p, id: id})
		}
	}
}

func (w *world) confirmTaints() {
	q := w.confirmQ
	w.confirmQ = nil
	for _, c := range q {
		p := c.p
		if p.b.up && p.b.parts[p.tp] == p {
			p.r.ConfirmTaintCleared(c.id, p.b.s.now)
			p.processReady()
		}
	}
}

// partWritable: the mirror shell lets Produce through (a topic in no mirror,
// or a mirror partition its runner made writable).
func (w *world) partWritable(p *simPart) bool {
	t := p.b.image.Topic(p.tp.Topic)
	return t.GetMirrorName() == "" || w.writable[p]
}

// checkProduce is §8.17 on one Propose.
func (w *world) checkProduce(p *simPart, d replica.ProposeDecision, leoBefore twinlog.Offset) {
	s := p.b.s
	w.rep.Checks["§8.17 produce"]++
	if d.Error == pb.ErrorCode_ERROR_CODE_NONE && !w.partWritable(p) {
		s.fail("§8.17 produce to a non-writable partition", "broker %d %s accepted a produce at [%d, %d] LE %d while the mirror shell has not made it writable",
			p.b.id, p.key, d.BaseOffset, d.LastOffset, d.LeaderEpoch)
		return
	}
	if d.Error == pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC && p.r.LogEndOffset() != leoBefore {
		s.fail("§8.17 READ_ONLY_TOPIC changed the log", "broker %d %s: LEO %d -> %d", p.b.id, p.key, leoBefore, p.r.LogEndOffset())
		return
	}
	w.check18(p, d, leoBefore) // ops.go
}

// onUncleanElection: a tainted replica elected uncleanly suspends §8.20/21
// for the partition (the §6.8 exemption).
func (w *world) onUncleanElection(s *Sim, key string, broker int32) {
	tp, ok := parseKey(key)
	if !ok || tp.Topic != "t" {
		return
	}
	topicID := s.ctl.image.Topic(tp.Topic).GetTopicId()
	tainted := slices.Contains(w.tables[s].taints(topicID, tp.Partition), broker)
	for _, b := range s.brokers {
		if p := b.parts[tp]; b.up && p != nil && p.r.Role() == replica.RoleLeader {
			if _, t := p.r.Taints()[twinlog.BrokerID(broker)]; t || slices.Contains(p.r.TaintsClearing(), twinlog.BrokerID(broker)) {
				tainted = true
			}
		}
	}
	if tainted && !w.exempt[key] {
		w.exempt[key] = true
		w.rep.Exempt++
		s.hist.Exempt(key)
		s.tracef("mirror: tainted replica %d of %s elected uncleanly: §8.9/13/20/21 suspended (§6.8)", broker, key)
	}
}

func parseKey(key string) (twinlog.TopicPartition, bool) {
	i := strings.LastIndexByte(key, '-')
	if i < 0 {
		return twinlog.TopicPartition{}, false
	}
	n, err := strconv.Atoi(key[i+1:])
	if err != nil {
		return twinlog.TopicPartition{}, false
	}
	return twinlog.TopicPartition{Topic: key[:i], Partition: int32(n)}, true
}

// staleLeader classifies a leader the first time it is checked in LE le:
// it is stale (§8.7/§8.9 suspended for the partition in that LE, its HW
// kept out of trueHW) only under the §6.8 exemption below, or when a stale
// leader led the partition since its last recorded truncation.
//
// It used to classify as stale, too, a leader that had not fetched since a
// truncation point (e, o) with o below its HW was recorded (e > its last
// validated LE). That was a real consistency gap, not only a checker
// limitation (reproduction on broker/replica:
// TestKnownBugStaleReplicaHWAboveTruncationPoint). Leader L bumps to LE e
// with truncation point (e, o), o below the HW h, cuts [o, h) and copies
// new records Y from o. Its HW stays ≤ o until every ISR member has
// fetched in e (§4.2: a member not yet fetched in the LE blocks), and a
// member's first fetch diverges and truncates it, so no replica of e ever
// exposes Y above o while a stale member remains in the ISR. The stale
// member F (ISR, or ELR, not fetched since e) keeps [o, h) with HW h.
// Elected cleanly in e1 > e, F served consumers up to h at once (a new
// leader started from its own HW), and F's plan machine does not truncate
// first (a MIRRORING record re-truncates only after the source answers
// with DivergingEpoch). If F's leadership ended before that, a member G
// that did fetch in e (holding Y, HW ≤ o) was elected cleanly in e2 and
// exposed Y at o.. with no truncation point newer than e1: a consumer that
// read X at o in e1 read Y at o without LOG_TRUNCATED (§8.13), and the
// clean leader G lacked records below trueHW h (§8.7).
//
// Fixed in broker/replica (Replica.capHWAtTruncationPoints): a replica
// becoming leader in e1 caps HW := min(HW, o) for every truncation point
// (e, o) with validated < e < e1, validated being its persisted
// aligned_epoch (a follower raises it on every fetch answered NONE without
// DivergingEpoch) or, in memory, an LE it led with the cap applied and its
// owed truncation done. Only the HW moves; §4.2 lets it pass o again once
// every maximal-ISR member has fetched in e1 without DivergingEpoch, i.e.
// agrees with F's log. The HW such a leader exposes is then ≤ o, so §8.7
// and §8.9 hold for it and are checked; MirrorReport.HWCaps counts the
// elections where the cap applied (simBroker.applyMetadata).
func (w *world) staleLeader(p *simPart, le int32, hw int64) bool {
	if w.leaderSeen[p] == le {
		return w.staleLE[p]
	}
	w.leaderSeen[p] = le
	s := p.b.s
	// Its records then spread to its followers, which fetch without
	// divergence: every later leader until the next recorded truncation
	// is suspect too.
	stale := w.staleUntilTrunc[s][p.key]
	if w.exempt[p.key] {
		// After a tainted replica's unclean election its durable taint
		// outlives the leadership that resumed the run (only enterMirroring
		// clears a leader's own taint): a later leader loads it and cuts that
		// ISR member back (an epoch −1 taint: fully), below trueHW. The §6.8
		// exemption lists 7's last clause, 9, 11, 19–21; the simulator also
		// suspends 7 and 9 here (see the report).
		stale = true
	}
	w.staleLE[p] = stale
	if stale {
		w.staleUntilTrunc[s][p.key] = true
		w.rep.StaleLeaders++
		s.suspend87[p.key] = le
		s.tracef("mirror: %s leader %d in LE %d (HW %d, last validated LE %d) after a tainted replica's unclean election (§6.8): §8.7/§8.9 suspended in this LE",
			p.key, p.b.id, le, hw, p.validatedLE)
	}
	return stale
}

// recordTruncationPoint: a BumpLeaderEpoch with a truncation offset
// installed LE le on the partition (a recorded truncation, SPEC §8).
func (w *world) recordTruncationPoint(s *Sim, key string, le int32, o int64) {
	delete(w.staleUntilTrunc[s], key)
	s.hist.RecordTruncation(key, le)
	s.noteUnclean(key, le)
	s.tracef("mirror: truncation point %s (LE %d, offset %d)", key, le, o)
}

// ---- runners ----

// syncRunners keeps one runner per hosted partition of a (once-)mirrored
// topic on every running broker, as syncMirrorRunners does.
func (w *world) syncRunners() {
	live := map[*simPart]bool{}
	for _, s := range []*Sim{w.a, w.b} {
		for _, b := range s.brokers {
			if !b.up || !b.registered {
				continue
			}
			for _, p := range b.sortedParts() {
				t := b.image.Topic(p.tp.Topic)
				if p.tp.Topic != "t" || t == nil || (t.GetMirrorName() == "" && !t.GetOnceMirrored()) || t.GetTopicId() != p.topicID {
					continue
				}
				live[p] = true
				if w.byPart[p] == nil {
					r := &mirrorRunner{w: w, s: s, p: p, owedLE: twinlog.NoEpoch}
					r.core.Leadership.KnownLE = twinlog.NoEpoch
					r.core.Rejected = func(ev plan.Event, err error) {
						r.s.tracef("mirror %s broker %d: request rejected: %T: %v", r.p.key, r.p.b.id, ev, err)
					}
					w.byPart[p] = r
					w.runners = append(w.runners, r)
				}
			}
		}
	}
	w.runners = slices.DeleteFunc(w.runners, func(r *mirrorRunner) bool {
		if live[r.p] {
			return false
		}
		delete(w.byPart, r.p)
		return true
	})
}

// mirrorRunner is broker/mirror.go's mirrorRunner for one hosted
// partition, stepped by the world instead of a goroutine.
type mirrorRunner struct {
	w *world
	s *Sim
	p *simPart

	core     runner.Core
	srcLE    atomic.Int32 // runner.FetchConfig.Seen
	mirror   string
	events   []plan.Event
	nextTick int64

	loading   bool
	loadSent  int64
	loadSeq   int
	loaded    *loadedState
	bumpWaits []bumpWait

	// owedLE: BecameLeader was stepped in this LE, which carries a
	// truncation point (a bump whose answer was lost); the machine must
	// truncate before anything else (checkOwed). −1 none.
	owedLE twinlog.Epoch

	// Fetcher: the session (runner.FetchSession) and the step it waits to
	// perform at nextFetchAt, or the fetch in flight (fetchID ≠ 0) with
	// what the source served for it (the §8.15 checks).
	fetching    bool
	fetch       *runner.FetchSession
	fetchGen    uint64 // sessions started by this runner
	fetchNext   runner.Step
	fetchID     uint64
	fetchSentAt int64
	nextFetchAt int64
	served      map[int64]shadowRec
	servedHW    twinlog.Offset
	servedBy    *Sim

	// Ordered __mirror_state writer of the current leadership.
	lead      int
	wq        []*writeJob
	wInflight *writeJob
	wSentAt   int64
	wseq      uint64
}

type loadedState struct {
	le   twinlog.Epoch
	run  *pb.MirrorRunRecord
	lmle *pb.MirrorLmleRecord
}

type bumpWait struct {
	seq  uint64
	want twinlog.Epoch
}

type writeJob struct {
	seq  uint64
	run  *pb.MirrorRunRecord
	lmle *pb.MirrorLmleRecord
}

func (r *mirrorRunner) live() bool {
	return r.w.byPart[r.p] == r && r.p.b.up && r.p.b.parts[r.p.tp] == r.p
}

// post queues an event; the runner steps it on its next run.
func (r *mirrorRunner) post(ev plan.Event) {
	if r.live() {
		r.events = append(r.events, ev)
	}
}

func (r *mirrorRunner) run() {
	s := r.s
	r.observe()
	r.drain()
	r.checkOwed()
	r.settleTaintsPending()
	for i := 0; i < 100 && !s.failed; i++ {
		r.progressBumps()
		r.progressWrites()
		if len(r.events) == 0 {
			break
		}
		ev := r.events[0]
		r.events = r.events[1:]
		r.onEvent(ev)
		r.drain()
	}
	if r.core.M != nil && s.now >= r.nextTick {
		r.nextTick = s.now + 50
		r.core.Step(plan.Tick{NowMs: s.now})
		r.drain()
	}
	r.progressFetch()
	r.progressWrites()
	r.settleTaintsPending()
}

func (r *mirrorRunner) onEvent(ev plan.Event) { r.core.Post(ev) }

// observe is mirrorRunner.observe: leadership, desired state and replica
// status into the machine.
func (r *mirrorRunner) observe() {
	s, p, b := r.s, r.p, r.p.b
	leading := b.registered && p.r.Role() == replica.RoleLeader
	le := p.r.LeaderEpoch()
	view := runner.ViewOf(b.image, p.tp.Topic)
	var lead plan.ReplicaStatus
	if leading {
		var replicas []twinlog.BrokerID
		if pr := b.image.Partition(p.tp.Topic, p.tp.Partition); pr != nil {
			replicas = assign.IDs(pr.GetReplicas())
		}
		lead = runner.LeaderStatus(p.r, replicas, twinlog.BrokerID(b.id))
	}
	st, desired, mirror := view.Status(lead), view.Desired, view.Mirror
	r.mirror = mirror
	end, begin := r.core.Leadership.Observe(leading, le)
	if !leading {
		if end {
			r.core.Ended()
			r.fetching = false
		}
		r.loaded, r.loading = nil, false
		return
	}
	if r.core.M == nil {
		m, err := plan.New(plan.Config{
			BrokerID: twinlog.BrokerID(b.id), Mirror: mirror, TopicPartition: p.tp, TopicID: p.topicID,
			PendingTimeoutMs: 4000, RetryInitialBackoffMs: 100, RetryMaxBackoffMs: 2000, RetryMaxAttempts: 1 << 30,
		}, plan.Deps{Log: runner.ReplicaLog{Replica: p.r}, Rand: s.rng})
		if err != nil {
			s.fail("mirror machine", "%v", err)
			return
		}
		r.core.M = m
		r.core.Step(plan.Tick{NowMs: s.now})
	}
	if end {
		// The old leadership ends before the records load, so none of its
		// late outcomes acts in le (runner.Leadership.Observe).
		s.tracef("mirror %s broker %d: leadership in LE %d ends (LE %d is not its own)", p.key, b.id, r.core.Leadership.KnownLE, le)
		r.core.Ended()
		r.fetching = false
	}
	if begin {
		// A leadership this machine did not cause: load the state records
		// (a round trip to the cluster's __mirror_state), then start from
		// them.
		if r.loaded == nil || r.loaded.le != le {
			r.loaded = nil
			r.load(le)
			return
		}
		ld := r.loaded
		r.loaded = nil
		truncPts := runner.TruncationPointsOf(b.image.Partition(p.tp.Topic, p.tp.Partition))
		became := plan.BecameLeader{LeaderEpoch: le, Run: ld.run, Lmle: ld.lmle, Desired: desired, TruncationPoints: truncPts}
		if se := max(ld.run.GetStateEpoch(), ld.run.GetTruncationEpoch(), ld.lmle.GetStateEpoch()); se > int32(le) {
			// A zombie leader (stale metadata) loaded records written in a
			// later LE (seed 104). broker/mirror.go steps BecameLeader all the
			// same; plan.Machine must refuse the leadership: no write, bump,
			// query, truncation, taint or fetch, not writable (it used to
			// panic "truncation epoch above LE"). The runner then waits for
			// newer metadata like broker/'s, its taints still pending.
			r.stale(became)
			return
		}
		r.core.Began(le, desired)
		r.lead++
		r.wq, r.wInflight = nil, nil
		r.fetching = false
		s.tracef("mirror %s broker %d: became leader LE %d (run %v, lmle %v, desired %v gen %d)", p.key, b.id, le, shortRun(ld.run), shortLmle(ld.lmle), desired.State, desired.Generation)
		w := r.w
		w.rep.Checks["§8.19 no durably tainted replica in ISR"]++
		for _, t := range ld.lmle.GetTaints() {
			// (Its own taint, or any once a tainted replica was elected
			// uncleanly: the §6.8 exemption covers 19.)
			if t.GetReplica() != b.id && !w.exempt[p.key] && slices.Contains(p.r.ISR(), twinlog.BrokerID(t.GetReplica())) {
				s.fail("§8.19 tainted replica in ISR", "broker %d %s: new leader in LE %d loaded taint %v while replica %d is in the ISR %v (a leader served follower fetches before loading the taints?)",
					b.id, p.key, le, t, t.GetReplica(), p.r.ISR())
				return
			}
		}
		r.loadTaints(ld.lmle)
		// With the LE's truncation points: a bump whose answer was lost
		// left its truncation to this leadership (§6.2f; seed 1149).
		if slices.ContainsFunc(truncPts, func(tp plan.TruncationPoint) bool { return tp.LeaderEpoch == le }) {
			r.owedLE = le
			w.rep.Checks["§6.2f owed truncation at BecameLeader"]++
		}
		r.core.Step(became)
	}
	r.core.ApplyDesired(desired)
	r.core.NoteStatus(st)
}

// stale steps a BecameLeader whose records were written in a later LE (a
// zombie leader on old metadata, seed 104) as broker/mirror.go does, and
// checks that plan.Machine refuses the leadership: nothing that writes,
// bumps, queries, truncates, touches taints or fetches; not writable, not
// leading (so settleTaintsPending keeps the replica's follower fetches
// waiting). Like broker/'s runner it then waits for newer metadata.
func (r *mirrorRunner) stale(ev plan.BecameLeader) {
	s, p := r.s, r.p
	r.core.Began(ev.LeaderEpoch, ev.Desired)
	r.lead++
	r.wq, r.wInflight = nil, nil
	r.fetching = false
	s.tracef("mirror %s broker %d: stale leadership LE %d (run %v, lmle %v written later)", p.key, p.b.id, ev.LeaderEpoch, shortRun(ev.Run), shortLmle(ev.Lmle))
	r.w.rep.Checks["stale leadership refused by plan"]++
	r.core.Step(ev)
	for _, a := range r.core.M.Ready().Actions {
		harmful := false
		switch a := a.(type) {
		case plan.WriteRunRecord, plan.WriteLmleRecord, plan.BumpLeaderEpoch, plan.QueryLMLE, plan.TruncateTo, plan.TruncateFully,
			plan.SetAlignedEpoch, plan.StartFetcher, plan.AddTaints, plan.ClearTaint:
			harmful = true
		case plan.SetWritable:
			harmful = a.Writable
		}
		if harmful {
			s.fail("mirror: plan acts on a stale leadership", "broker %d %s: BecameLeader in LE %d with run %s, lmle %s (written in a later LE) -> %#v",
				p.b.id, p.key, ev.LeaderEpoch, shortRun(ev.Run), shortLmle(ev.Lmle), a)
			return
		}
	}
	if r.core.M.Writable() || r.core.M.Leading() {
		s.fail("mirror: plan acts on a stale leadership", "broker %d %s: after BecameLeader in LE %d with run %s, lmle %s: writable %t, leading %t",
			p.b.id, p.key, ev.LeaderEpoch, shortRun(ev.Run), shortLmle(ev.Lmle), r.core.M.Writable(), r.core.M.Leading())
		return
	}
	r.loadTaints(ev.Lmle) // as broker/mirror.go observe, after any BecameLeader
	r.drain()
}

// checkOwed runs after the actions of a BecameLeader in an LE with a
// truncation point were performed (the shell truncates synchronously): the
// machine must have truncated in that LE, else the replica answers every
// follower fetch UNKNOWN_LEADER_EPOCH for the whole LE (SPEC §6.2f).
func (r *mirrorRunner) checkOwed() {
	s, p := r.s, r.p
	if r.owedLE < 0 {
		return
	}
	le := r.owedLE
	r.owedLE = twinlog.NoEpoch
	if !r.live() || !r.core.Leadership.Leading || r.core.M == nil || !r.core.M.Leading() || p.r.Role() != replica.RoleLeader || p.r.LeaderEpoch() != le {
		return
	}
	s.fail("§6.2f truncation point not executed", "broker %d %s: BecameLeader in LE %d, which carries a truncation point (%v), left it undone: follower fetches get UNKNOWN_LEADER_EPOCH for the whole LE",
		p.b.id, p.key, le, p.b.image.Partition(p.tp.Topic, p.tp.Partition).GetTruncationPoints())
}

// settleTaintsPending is mirrorRunner.settleTaintsPending: the replica,
// made taints-pending when it became leader in a new LE (broker.go, as
// broker/metadata.go), serves follower fetches once this leadership has
// loaded the durable taints (SPEC §6.4): BecameLeader stepped (not refused
// as stale) for an LE the runner knows, its AddTaints performed, and the
// loaded state rewritten with its LE (plan.Machine.StateOwned: the LMLE
// record and the leadership's first run record).
func (r *mirrorRunner) settleTaintsPending() {
	p := r.p
	if !r.live() || !r.core.Leadership.TaintsSettled(r.core.M, p.r) {
		return
	}
	p.r.SetTaintsPending(false)
	p.processReady()
	r.w.rep.Checks["§6.4 taints loaded before follower fetches"]++
}

func (r *mirrorRunner) load(le twinlog.Epoch) {
	s, b := r.s, r.p.b
	if r.loading && s.now-r.loadSent < s.cfg.RPCTimeoutMs {
		return
	}
	r.loading, r.loadSent = true, s.now
	r.loadSeq++
	seq := r.loadSeq
	mirror, topicID, part := r.mirror, r.p.topicID, r.p.tp.Partition
	tbl := r.w.tables[s]
	s.net.send(b.node(), controllerNode, "mirror-state-read", func() {
		run := tbl.runRec(mirror, topicID, part)
		lmle := tbl.lmleRec(topicID, part)
		if run != nil {
			run = cloneProto(run)
		}
		if lmle != nil {
			lmle = cloneProto(lmle)
		}
		s.net.send(controllerNode, b.node(), "mirror-state", func() {
			if !r.live() || r.loadSeq != seq {
				return
			}
			r.loading = false
			r.loaded = &loadedState{le: le, run: run, lmle: lmle}
		})
	})
}

// loadTaints is broker/mirror.go mirrorRunner.loadTaints: the new
// leadership's taints are exactly the loaded record's (SPEC §6.4, §6.6 step
// 4). A taint an earlier leadership of this broker held but another leader
// has durably cleared since must not cut that (ISR) member back (§8.7, seeds
// 312, 101); a clear still awaiting its write is settled by the record.
func (r *mirrorRunner) loadTaints(lmle *pb.MirrorLmleRecord) {
	s, p := r.s, r.p
	want := runner.TaintsOf(lmle)
	stale := 0
	for id := range p.r.Taints() {
		if _, ok := want[id]; !ok {
			stale++
		}
	}
	if stale > 0 {
		// An LE this broker leads again without having applied the
		// leadership in between (it dropped its taints otherwise).
		r.w.rep.Checks["§6.4 stale taints replaced at BecameLeader"]++
	}
	p.r.ResetTaints(want, s.now)
	p.processReady()
	// §6.4: the leader answers per the durable taints: once loaded it holds
	// none the record lacks (the machine's AddTaints adds only what the
	// record holds, and later its own new ones). A taint from an earlier
	// leadership, durably cleared since, would cut an ISR member below the
	// HW (§8.7), which §8.7's own check may not see: it is suspended in an
	// LE whose leader has not fetched since a truncation point.
	r.w.rep.Checks["§6.4 leader taints ⊆ loaded record"]++
	for id, t := range p.r.Taints() {
		if _, ok := want[id]; !ok {
			s.fail("§6.4 leader taints ⊆ loaded record", "broker %d %s: new leader in LE %d holds taint %v of replica %d; the loaded __mirror_state record has %v",
				p.b.id, p.key, p.r.LeaderEpoch(), t, id, lmle.GetTaints())
			return
		}
	}
}

// taintsOf returns a __mirror_state (topic, partition) record's taints.

func (r *mirrorRunner) drain() {
	r.core.Drain(r.perform, func() bool { return r.s.failed })
}

func (r *mirrorRunner) perform(a plan.Action) {
	s, p, w := r.s, r.p, r.w
	switch a := a.(type) {
	case plan.QueryLMLE:
		r.queryLMLE(a.Seq)
	case plan.BumpLeaderEpoch:
		r.core.Leadership.Sent()
		r.sendBump(a)
	case plan.TruncateTo:
		r.truncate(a.Seq, a.Offset, false, a.Reason)
	case plan.TruncateFully:
		r.truncate(a.Seq, a.RestartAt, true, a.Reason)
	case plan.SetAlignedEpoch:
		p.r.SetAlignedEpoch(a.Epoch)
		p.processReady()
	case plan.WriteRunRecord:
		r.wq = append(r.wq, &writeJob{seq: a.Seq, run: a.Record})
	case plan.WriteLmleRecord:
		r.wq = append(r.wq, &writeJob{seq: a.Seq, lmle: a.Record})
	case plan.StartFetcher:
		r.fetching = true
		r.fetchGen++
		r.fetch = runner.NewFetchSession(runner.FetchConfig{
			Session: a.Session, MinSourceLeaderEpoch: a.MinSourceLeaderEpoch, TopicID: p.topicID,
			Seen: &r.srcLE, Log: simMirrorLog{r: r, gen: r.fetchGen}, Post: r.postFetch, NowMs: func() int64 { return s.now },
			Pace: r.pace,
		})
		r.fetchNext = r.fetch.Start()
		r.fetchID = 0
		r.nextFetchAt = s.now
	case plan.StopFetcher:
		r.fetching, r.fetch = false, nil
	case plan.SetWritable:
		w.writable[p], w.writableLE[p] = a.Writable, a.LeaderEpoch
		p.r.SetMirrorPartition(!a.Writable)
		p.r.SetWritable(a.Writable)
		p.processReady()
		s.tracef("mirror %s broker %d: writable %t LE %d", p.key, p.b.id, a.Writable, a.LeaderEpoch)
	case plan.FailPendingProduces:
		// SetWritable(false) already failed them.
	case plan.AddTaints:
		if a.Seq > 0 {
			// As broker/mirror.go addRunTaints: a run's taints, refused if
			// one names a member of the maximal ISR.
			ts := make(map[twinlog.BrokerID]replica.Taint, len(a.Taints))
			for _, t := range a.Taints {
				ts[t.Replica] = replica.Taint{Epoch: t.Epoch, Offset: t.Offset}
			}
			refused := p.r.AddRunTaints(ts)
			p.processReady()
			if len(refused) > 0 {
				w.rep.Checks["§8.19 run taints refused for maximal-ISR members"]++
				s.tracef("mirror %s broker %d: taints %v refused (maximal ISR %v)", p.key, p.b.id, a.Taints, p.r.MaximalISR())
			} else {
				s.tracef("mirror %s broker %d: taints %v", p.key, p.b.id, a.Taints)
			}
			r.post(plan.TaintsAdded{Seq: a.Seq, Refused: refused})
			return
		}
		for _, t := range a.Taints {
			p.r.SetTaint(t.Replica, replica.Taint{Epoch: t.Epoch, Offset: t.Offset})
		}
		s.tracef("mirror %s broker %d: taints %v", p.key, p.b.id, a.Taints)
	case plan.ClearTaint:
		p.r.ConfirmTaintCleared(a.Replica, s.now)
		p.processReady()
	case plan.StopResult:
		s.tracef("mirror %s broker %d: stop not done: %v", p.key, p.b.id, a.Error)
	case plan.Transition:
		w.rep.Transitions[shortState(a.To)]++
		s.tracef("mirror %s broker %d: %v -> %v (%s) LE %d LEO %d HW %d epochs %v", p.key, p.b.id, shortState(a.From), shortState(a.To), a.Reason,
			p.r.LeaderEpoch(), p.r.LogEndOffset(), p.r.HighWatermark(), p.r.EpochEntries())
		if a.To == plan.Stopped {
			w.checkFailoverAcks(s, p)
		}
	}
}

func shortState(st pb.MirrorState) string {
	return strings.TrimPrefix(st.String(), "MIRROR_STATE_")
}

func shortRun(r *pb.MirrorRunRecord) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("{%s gen %d lmleUsed %d te %d lmleRec %d se %d}", shortState(r.GetState()), r.GetGeneration(), r.GetLmleUsed(), r.GetTruncationEpoch(), r.GetLmleRecorded(), r.GetStateEpoch())
}

func shortLmle(r *pb.MirrorLmleRecord) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("{lmle %d from %q leAfterStop %d leoAtStop %d taints %d se %d}", r.GetLmle(), r.GetSourceClusterId(), r.GetLeaderEpochAfterStop(), r.GetLeoAtStop(), len(r.GetTaints()), r.GetStateEpoch())
}

// queryLMLE asks the other cluster's GetLastMirroredEpochs (answered by a
// running broker of it from its __mirror_state per
// plan.AnswerLastMirroredEpoch); no answer within the RPC timeout is
// REQUEST_TIMED_OUT.
func (r *mirrorRunner) queryLMLE(seq uint64) {
	s, w, p := r.s, r.w, r.p
	src := w.other(s)
	w.rep.LMLEQueries++
	answered := false
	s.after(s.cfg.RPCTimeoutMs, func() {
		if !answered {
			answered = true
			r.post(plan.LMLEAnswer{Seq: seq, LMLE: twinlog.NoEpoch, Error: pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT})
		}
	})
	sb := src.pickBrokerW(w)
	if sb == nil {
		return
	}
	requester, topicID, tp := s.clusterID, p.topicID, p.tp
	w.xsend(src, sb.node(), "get-last-mirrored-epochs", func() {
		lmle, code := w.answerLMLE(src, requester, topicID, tp)
		w.xsend(s, p.b.node(), "last-mirrored-epochs", func() {
			if answered {
				return
			}
			answered = true
			s.tracef("mirror %s broker %d: lmle from %s: %d %s", p.key, p.b.id, src.clusterID, lmle, shortCode(code))
			r.post(plan.LMLEAnswer{Seq: seq, LMLE: lmle, Error: code})
		})
	})
}

func (s *Sim) pickBrokerW(w *world) *simBroker {
	var c []*simBroker
	for _, b := range s.brokers {
		if b.up && b.registered {
			c = append(c, b)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[w.rng.IntN(len(c))]
}

// answerLMLE is the source side of GetLastMirroredEpochs: the state
// partition's leader, caught up (sometimes not yet: a retriable error).
func (w *world) answerLMLE(src *Sim, requester, topicID string, tp twinlog.TopicPartition) (twinlog.Epoch, pb.ErrorCode) {
	st := src.ctl.image
	v := plan.SourceView{HasStateTopic: st.Topic("__mirror_state") != nil, StateLeader: true, CaughtUp: true, Partition: tp.Partition}
	if w.faultsOn {
		v.StateLeader = w.rng.Float64() >= 0.05
		v.CaughtUp = w.rng.Float64() >= 0.05
	}
	t := st.Topic(tp.Topic)
	tbl := w.tables[src]
	if t != nil {
		v.LocalTopicID, v.PartitionCount = t.GetTopicId(), t.GetPartitionCount()
		if name := t.GetMirrorName(); name != "" {
			v.InMirror = true
			if m := st.Mirror(name); m != nil {
				for _, mt := range m.GetTopics() {
					if mt.GetTopic() == tp.Topic {
						v.DesiredState = mt.GetDesiredState()
					}
				}
			}
			v.RunState = tbl.runRec(name, t.GetTopicId(), tp.Partition).GetState()
		}
		v.Record = tbl.lmleRec(t.GetTopicId(), tp.Partition)
	}
	return plan.AnswerLastMirroredEpoch(requester, topicID, v)
}

// sendBump is mirrorRunner.bump: BumpLeaderEpoch to the controller, then
// BumpDone once the local replica runs in the new LE.
func (r *mirrorRunner) sendBump(a plan.BumpLeaderEpoch) {
	s, p, b, w := r.s, r.p, r.p.b, r.w
	w.rep.Bumps++
	if cur := r.core.M.LeaderEpoch(); a.LeaderEpoch < cur {
		// plan.Machine re-emits a failed bump as first requested (tick:
		// m.emit(m.bump)), with the LE it had then, even after a late
		// BumpDone of an earlier bump raised its LE: the controller answers
		// FENCED_LEADER_EPOCH forever (a STOPPING partition never stops).
		s.knownBug(p, "plan-bump-retry-stale-le", "broker %d %s: bump retried with LE %d, the machine knows LE %d (min %d, truncation %d)",
			b.id, p.key, a.LeaderEpoch, cur, a.MinLeaderEpoch, a.TruncationOffset)
		if !s.cfg.FailOnKnownBugs {
			a.LeaderEpoch = cur
		}
	}
	inc := b.inc
	req := &pb.BumpLeaderEpochRequest{BrokerId: b.id, BrokerEpoch: b.epoch, Topic: p.tp.Topic, Partition: p.tp.Partition,
		LeaderEpoch: int32(a.LeaderEpoch), MinLeaderEpoch: int32(a.MinLeaderEpoch), TruncationOffset: int64(a.TruncationOffset)}
	answered := false
	s.after(s.cfg.RPCTimeoutMs, func() {
		if !answered {
			answered = true
			r.post(plan.BumpFailed{Seq: a.Seq, Error: pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT})
		}
	})
	s.tracef("mirror %s broker %d: bump LE %d min %d truncation %d", p.key, b.id, a.LeaderEpoch, a.MinLeaderEpoch, a.TruncationOffset)
	s.net.send(b.node(), controllerNode, "bump-leader-epoch", func() {
		c := s.ctl
		resp := rpc(c, fmt.Sprintf("bump %d", b.id), true, c.svc.BumpLeaderEpoch, req)
		if resp.GetError() == pb.ErrorCode_ERROR_CODE_NONE && req.GetTruncationOffset() >= 0 {
			w.recordTruncationPoint(s, p.key, resp.GetLeaderEpoch(), req.GetTruncationOffset())
		}
		s.net.send(controllerNode, b.node(), "bump-leader-epoch-resp", func() {
			if answered || b.inc != inc {
				return
			}
			answered = true
			if resp.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
				r.post(plan.BumpFailed{Seq: a.Seq, Error: resp.GetError()})
				return
			}
			r.bumpWaits = append(r.bumpWaits, bumpWait{seq: a.Seq, want: twinlog.Epoch(resp.GetLeaderEpoch())})
		})
	})
}

func (r *mirrorRunner) progressBumps() {
	p := r.p
	r.bumpWaits = slices.DeleteFunc(r.bumpWaits, func(bw bumpWait) bool {
		ev, done := runner.BumpOutcome(bw.seq, bw.want, p.r.LeaderEpoch(), p.r.Role() == replica.RoleLeader)
		if done {
			r.post(ev)
		}
		return done
	})
}

func (r *mirrorRunner) truncate(seq uint64, o twinlog.Offset, full bool, reason plan.TruncateReason) {
	s, p, w := r.s, r.p, r.w
	before := p.r.LogEndOffset()
	var err error
	if full {
		err = p.r.TruncateFullyAsLeader(o, s.now)
	} else {
		err = p.r.TruncateAsLeader(o, s.now)
	}
	// §8.8: the leader HW may drop here (§6.2f); the check restarts.
	p.leaderLE = -1
	p.processReady()
	if err != nil {
		s.tracef("mirror %s broker %d: truncation to %d failed: %v", p.key, p.b.id, o, err)
		return
	}
	// Its log is now the definitive one of its LE (see staleLeader).
	p.validatedLE = max(p.validatedLE, int32(p.r.LeaderEpoch()))
	if p.r.LeaderEpoch() == r.owedLE {
		r.owedLE = twinlog.NoEpoch
	}
	// The truncation point recorded at the bump: the HW this leader exposes
	// in its LE starts here (§8.7 trueHW).
	if le := int32(p.r.LeaderEpoch()); le >= s.lastUnclean[p.key] {
		s.trueHW[p.key] = min(s.trueHW[p.key], int64(p.r.HighWatermark()))
	}
	w.rep.Truncations[string(reason)]++
	if reason == plan.ReasonLMLE && p.r.LogEndOffset() == before {
		w.rep.LMLENoOps++
	}
	s.tracef("mirror %s broker %d: truncation %s to %d (full %t): LEO %d -> %d, HW %d, epochs %v", p.key, p.b.id, reason, o, full, before, p.r.LogEndOffset(), p.r.HighWatermark(), p.r.EpochEntries())
	r.core.Step(plan.TruncationDone{Seq: seq})
}

// progressWrites is the ordered __mirror_state writer: one write in flight;
// no answer within the RPC timeout is WriteFailed (the machine rewrites it).
func (r *mirrorRunner) progressWrites() {
	s, p, b := r.s, r.p, r.p.b
	if j := r.wInflight; j != nil {
		if s.now-r.wSentAt < s.cfg.RPCTimeoutMs {
			return
		}
		r.wInflight = nil
		r.post(plan.WriteFailed{Seq: j.seq, Error: pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT})
	}
	if len(r.wq) == 0 {
		return
	}
	j := r.wq[0]
	r.wq = r.wq[1:]
	r.wInflight, r.wSentAt = j, s.now
	r.wseq++
	wseq := r.wseq
	wk := writerKey{cluster: s.clusterID, broker: b.id, inc: b.inc, lead: r.lead, tp: p.tp}
	tbl := r.w.tables[s]
	mirror, topicID, part := r.mirror, p.topicID, p.tp.Partition
	s.net.send(b.node(), controllerNode, "mirror-state-write", func() {
		if tbl.lastSeq[wk] >= wseq {
			return // a stale retry of this writer (idempotent producer)
		}
		tbl.lastSeq[wk] = wseq
		if j.run != nil {
			tbl.run.Apply(plan.RunKey{Mirror: mirror, TopicID: topicID, Partition: part}, cloneProto(j.run))
		} else {
			tbl.lmle.Apply(plan.LmleKey{TopicID: topicID, Partition: part}, cloneProto(j.lmle))
		}
		s.net.send(controllerNode, b.node(), "mirror-state-write-resp", func() {
			if r.wInflight == j {
				r.wInflight = nil
				r.post(plan.WriteAcked{Seq: j.seq})
			}
		})
	})
}

// ---- fetcher (mirrorRunner.fetchLoop) ----

// errNoAnswer is a mirror fetch whose answer did not come in time.
var errNoAnswer = errors.New("no answer")

// progressFetch performs the fetch session's steps as broker/mirror.go
// fetchLoop does, with the source cluster's Metadata answered by a random
// source broker's image (Sim.leaderFor: possibly stale) and the fetch sent
// over the cross-cluster network.
func (r *mirrorRunner) progressFetch() {
	s := r.s
	if !r.fetching || !r.core.Leadership.Leading || r.core.M == nil {
		return
	}
	if r.fetchID != 0 {
		if s.now-r.fetchSentAt >= s.cfg.FetchTimeoutMs {
			r.fetchID = 0
			r.performFetch(r.fetch.Answer(nil, errNoAnswer))
		}
		return
	}
	if r.fetchNext == nil || s.now < r.nextFetchAt {
		return
	}
	st := r.fetchNext
	r.fetchNext = nil
	r.performFetch(st)
}

// performFetch performs session steps until one waits: for the source's
// answer, or for the clock.
func (r *mirrorRunner) performFetch(st runner.Step) {
	s, w, p := r.s, r.w, r.p
	fetch := r.fetch
	for r.fetching && r.fetch == fetch {
		switch step := st.(type) {
		case runner.LookupLeader:
			src := w.other(s)
			leader, sle := src.leaderFor(p.tp)
			if leader < 1 {
				st = fetch.Leader(runner.SourceLeader{}, pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, nil)
				continue
			}
			st = fetch.Leader(runner.SourceLeader{TopicID: p.topicID, Leader: leader, LeaderEpoch: twinlog.Epoch(sle)}, pb.ErrorCode_ERROR_CODE_NONE, nil)
		case runner.SendFetch:
			r.sendFetch(step)
			return
		case runner.Wait:
			// The session keeps no clock: its step after the wait is known
			// now and performed when the wait is over.
			r.fetchNext, r.nextFetchAt = fetch.Resume(), s.now+step.D.Milliseconds()
			return
		case runner.Done:
			r.fetching, r.fetch = false, nil
			return
		}
	}
}

// checkServed runs on the source when it answers a Fetch{MIRROR}: §8.17
// (only a writable partition serves it), §8.15 (records below the HW). It
// returns the served records as the source's shadow holds them.
func (w *world) checkServed(src *Sim, sb *simBroker, tp twinlog.TopicPartition, req *pb.FetchRequest, pr *pb.FetchPartitionResponse) map[int64]shadowRec {
	sp := sb.parts[tp]
	if pr.GetError() != pb.ErrorCode_ERROR_CODE_NONE || pr.GetDivergingEpoch() != nil || sp == nil {
		return nil
	}
	w.rep.Checks["§8.17 mirror source writable"]++
	if !w.partWritable(sp) {
		src.fail("§8.17 Fetch{MIRROR} from a non-writable partition", "broker %d %s answered a mirror fetch at %d NONE while not writable", sb.id, sp.key, req.GetPartitions()[0].GetFetchOffset())
		return nil
	}
	out := map[int64]shadowRec{}
	for bv, err := range storage.Batches(pr.GetRecords()) {
		if err != nil {
			src.fail("mirror serve", "%v", err)
			return nil
		}
		w.rep.Checks["§8.15 served below source HW"]++
		if bv.LastOffset() >= twinlog.Offset(pr.GetHighWatermark()) {
			src.fail("§8.15 mirror read at or above the source HW", "broker %d %s served batch [%d, %d] with HW %d", sb.id, sp.key, bv.BaseOffset(), bv.LastOffset(), twinlog.Offset(pr.GetHighWatermark()))
			return nil
		}
		for o := bv.BaseOffset(); o <= bv.LastOffset(); o++ {
			if rec, ok := sp.shadow.at(int64(o)); ok {
				out[int64(o)] = rec
			}
		}
	}
	return out
}

// sendFetch sends the session's Fetch{MIRROR} to the source leader and
// hands the answer back to the session, with what the source served kept
// for the §8.15 checks of AppendMirrored.
func (r *mirrorRunner) sendFetch(step runner.SendFetch) {
	s, w, p := r.s, r.w, r.p
	src := w.other(s)
	req := &pb.FetchRequest{ReplicaId: -1, ReplicaBrokerEpoch: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_MIRROR,
		Partitions: []*pb.FetchPartition{{Topic: p.tp.Topic, Partition: p.tp.Partition, FetchOffset: int64(step.Request.FetchOffset),
			CurrentLeaderEpoch: int32(step.Request.CurrentLeaderEpoch), LastFetchedEpoch: int32(step.Request.LastFetchedEpoch)}}}
	w.fetchSeq++
	id := w.fetchSeq
	r.fetchID, r.fetchSentAt = id, s.now
	fetch := r.fetch
	sb := src.brokers[step.Leader.Leader-1]
	maxRecords := 1 + w.rng.IntN(40)
	w.xsend(src, sb.node(), "mirror-fetch", func() {
		pr := sb.serveFetch(req, maxRecords)
		served := w.checkServed(src, sb, p.tp, req, pr)
		w.xsend(s, p.b.node(), "mirror-fetch-resp", func() {
			if r.fetchID != id || !r.live() || !r.fetching || r.fetch != fetch || !r.core.Leadership.Leading {
				return
			}
			r.fetchID = 0
			a := &runner.Answer{
				FetchAnswer:   plan.FetchAnswer{Error: pr.GetError(), LogStartOffset: twinlog.Offset(pr.GetLogStartOffset())},
				HighWatermark: twinlog.Offset(pr.GetHighWatermark()), LogEndOffset: twinlog.Offset(pr.GetLogEndOffset()), Records: pr.GetRecords(),
			}
			if d := pr.GetDivergingEpoch(); d != nil {
				a.Diverging = &plan.Diverging{Epoch: twinlog.Epoch(d.GetEpoch()), EndOffset: twinlog.Offset(d.GetEndOffset())}
			}
			r.served, r.servedHW, r.servedBy = served, twinlog.Offset(pr.GetHighWatermark()), src
			r.performFetch(fetch.Answer(a, nil))
			r.served, r.servedBy = nil, nil
		})
	})
}

// pace is the wait after an answer: the simulated source answers at once
// (no long-poll), so an empty answer waits a while before the next fetch.
func (r *mirrorRunner) pace(empty bool) time.Duration {
	if !empty {
		return time.Millisecond
	}
	return time.Duration(10+r.w.rng.IntN(40)) * time.Millisecond
}

// postFetch traces a fetch session's event and hands it to the machine.
func (r *mirrorRunner) postFetch(ev plan.Event) {
	s, p := r.s, r.p
	switch ev := ev.(type) {
	case plan.FetchDiverging:
		s.tracef("mirror %s broker %d: fetch -> DivergingEpoch {%d %d}", p.key, p.b.id, ev.Epoch, ev.EndOffset)
	case plan.FetchOutOfRange:
		s.tracef("mirror %s broker %d: fetch -> OFFSET_OUT_OF_RANGE (source log start %d)", p.key, p.b.id, ev.SourceLogStartOffset)
	case plan.FetchStraddle:
		s.tracef("mirror %s broker %d: batch [%d, %d] straddles the LEO: no prefix of the source's log", p.key, p.b.id, ev.BaseOffset, ev.LastOffset)
	case plan.FetchForeignEpoch:
		s.tracef("mirror %s broker %d: batch at %d has epoch %d below the cached epochs (§6.8): foreign epoch", p.key, p.b.id, ev.BaseOffset, ev.Epoch)
	case plan.FetchError:
		if ev.Error == pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE {
			s.tracef("mirror %s broker %d: corrupt answer: %s", p.key, p.b.id, ev.Message)
		}
	}
	r.post(ev)
}

// simMirrorLog is the partition as a fetch session uses it (runner.Log),
// as broker/mirror.go mirrorLog (the session must still be the runner's
// current one), plus the §8.15 checks of every append.
type simMirrorLog struct {
	r   *mirrorRunner
	gen uint64
}

func (l simMirrorLog) Locked(f func(runner.LockedLog)) { f(l) }

func (l simMirrorLog) Leading() bool {
	r := l.r
	return r.fetching && r.fetchGen == l.gen && r.live() && r.p.r.Role() == replica.RoleLeader
}

func (l simMirrorLog) Position() plan.LeaderLog {
	p := l.r.p
	return plan.LeaderLog{LogEndOffset: p.r.LogEndOffset(), LeaderEpoch: p.r.LeaderEpoch(), LatestEpoch: p.r.LatestEpoch()}
}

// errSimFailed ends a fetch session once a check has failed the run.
var errSimFailed = errors.New("sim: run failed")

// AppendMirrored appends as broker/mirror.go mirrorLog does, then checks
// §8.15: each copied record equals the one the source served at that
// offset, and D.LEO ≤ the source HW the answer carried.
func (l simMirrorLog) AppendMirrored(metas []replica.BatchMeta, batches storage.Validated) error {
	r := l.r
	s, p, w := r.s, r.p, r.w
	if err := p.r.AppendAsMirrorLeader(metas, s.now); err != nil {
		s.tracef("mirror %s broker %d: append rejected: %v", p.key, p.b.id, err)
		return err
	}
	p.fetched = batches
	p.processReady()
	if s.failed {
		return errSimFailed
	}
	copies := w.copies[s][p.key]
	if copies == nil {
		copies = map[int64]copyRec{}
		w.copies[s][p.key] = copies
	}
	for o := int64(metas[0].BaseOffset); o <= int64(metas[len(metas)-1].LastOffset); o++ {
		w.rep.Checks["§8.15 copy = source"]++
		got, ok := p.shadow.at(o)
		want, wok := r.served[o]
		if !ok || !wok || got != want {
			s.fail("§8.15 mirrored record differs from the source", "broker %d %s offset %d: copied %v (%t), source had %v (%t)", p.b.id, p.key, o, got, ok, want, wok)
			return errSimFailed
		}
		copies[o] = copyRec{value: got.value, srcSeq: r.servedBy.hist.Seq()}
		w.rep.MirroredRecords++
	}
	w.rep.Checks["§8.15 LEO ≤ source HW"]++
	if p.r.LogEndOffset() > r.servedHW {
		s.fail("§8.15 D.LEO above the source HW", "broker %d %s: LEO %d after copying, source HW %d", p.b.id, p.key, p.r.LogEndOffset(), r.servedHW)
		return errSimFailed
	}
	return nil
}

// ---- failover history ----

// checkFailoverAcks runs when the destination's partition reaches
// STOPPED: every acks=all write the source still owes (history.Owed) below
// the destination's HW must be there (unless the source recorded a
// truncation since the copy); it becomes an ack of the destination.
func (w *world) checkFailoverAcks(d *Sim, p *simPart) {
	src := w.other(d)
	acks := src.hist.Owed(p.key)
	if acks == nil {
		return
	}
	hw := int64(p.r.HighWatermark())
	copies := w.copies[d][p.key]
	m := d.minISRNow(p.tp.Topic)
	for _, a := range acks {
		o := a.Offset
		if o >= hw || o < int64(p.r.LogStartOffset()) {
			w.rep.UncopiedAcks++
			continue
		}
		w.rep.Checks["failover acked write on destination"]++
		v, ok := p.shadow.at(o)
		if ok && v.value == a.Value {
			d.hist.RecordAck(p.key, o, a.Value, int32(p.r.LeaderEpoch()), true, m)
			w.rep.TransferredAcks++
			continue
		}
		c, hasCopy := copies[o]
		if !ok || !hasCopy || c.value != v.value {
			continue // not copied by this mirror: nothing to compare
		}
		// A truncation the source recorded after the copy exempts it, and
		// so does one in an LE above the copied record's epoch: a
		// zombie source leader may still serve a record of its own LE after
		// an unclean election that discarded it (seed 2931: A's broker 3,
		// leader of LE 0 on stale metadata, serves offsets 8–17 to B's
		// mirror after the unclean election of LE 2), and the
		// destination learns of the divergence only at its next fetch from
		// the new leader; an unplanned failover before that keeps the old
		// record, as it keeps any lag.
		if src.hist.TruncatedAbove(p.key, v.epoch) || src.hist.TruncatedSince(p.key, c.srcSeq) {
			continue
		}
		if src.hist.Exempted(p.key) {
			// The §6.8 exemption on the source: §8.7's last clause (a clean
			// leader holds every acked record) may fail there, so the source
			// itself may have lost the ack before the copy (sweep seed
			// 713766: a tainted leader elected uncleanly, later cut to 0 by
			// its taint while in the ELR and elected again).
			w.rep.Checks["failover acked write on destination (exempt source)"]++
			continue
		}
		d.fail("§8.12 acked write lost in failover", "%s offset %d: acked %q on %s (LE %d), destination %s holds %q below its HW %d (copied at source history %d, ack at %d)",
			p.key, o, a.Value, src.clusterID, a.LeaderEpoch, d.clusterID, v.value, hw, c.srcSeq, a.Seq)
		return
	}
}

// ---- faults and operator ----

func (w *world) injectFaults() {
	a := w.a
	if w.rng.Float64() < 0.0008 {
		heal := w.now() + int64(200+w.rng.IntN(3000))
		w.cutUntil = max(w.cutUntil, heal)
		w.rep.CrossFaults["cross-cut"]++
		a.tracef("mirror: cut the cross-cluster link until %d", heal)
	}
	if w.rng.Float64() < 0.0005 {
		s := w.a
		if w.rng.IntN(2) == 1 {
			s = w.b
		}
		val := strconv.FormatBool(w.rng.IntN(2) == 0)
		w.rep.CrossFaults["config-flip-support-unclean"]++
		s.tracef("config %s=%s on t", metadata.KeyMirrorSupportUnclean, val)
		s.ctl.do("config support unclean", func(st *metastate.State) *pb.MetadataDelta {
			d, _ := st.AlterConfigs(&pb.AlterConfigsRequest{Resources: []*pb.AlterConfigsResource{{
				Resource: &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "t"},
				Set:      map[string]string{metadata.KeyMirrorSupportUnclean: val}}}})
			return d
		})
	}
}

// operator performs failovers and failbacks at random moments.
func (w *world) operator() {
	now := w.now()
	switch w.phase {
	case phaseMirroring:
		if w.faultsOn && now-w.since > 800 && w.rng.Float64() < 0.003 {
			if w.rng.IntN(2) == 0 {
				w.phase, w.since, w.drainEnd = phaseDraining, now, now+2500
				w.src.producing = false
				w.a.tracef("mirror: planned failover of %s: draining %s", w.dst.clusterID, w.src.clusterID)
				return
			}
			w.failover(false)
		}
	case phaseDraining:
		if w.caughtUp() || now >= w.drainEnd {
			w.failover(w.caughtUp())
		}
	case phaseFailedOver:
		if w.faultsOn && now-w.since > 600 && w.rng.Float64() < 0.004 {
			w.failback()
		}
	}
}

func (w *world) failover(planned bool) {
	d := w.dst
	ok := true
	d.ctl.do("stop-mirror", func(st *metastate.State) *pb.MetadataDelta {
		delta, res := st.SetMirrorTopicsDesiredState(mirrorName, []string{"t"}, metastate.MirrorStop, nil)
		for _, r := range res {
			if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
				ok = false
				d.tracef("mirror: stop: %s", errText(r))
			}
		}
		return delta
	})
	if w.faultsOn {
		w.src.producing = true
	}
	if !ok {
		w.phase, w.since = phaseMirroring, w.now()
		return
	}
	w.rep.Failovers++
	if planned {
		w.rep.PlannedFailovers++
	}
	w.phase, w.since = phaseFailedOver, w.now()
	w.a.tracef("mirror: failover to %s (planned %t)", d.clusterID, planned)
	if w.faultsOn && w.rng.IntN(2) == 0 {
		// The old source "fails": unreachable from the other cluster.
		heal := w.now() + int64(200+w.rng.IntN(2000))
		w.cutUntil = max(w.cutUntil, heal)
		w.rep.CrossFaults["cross-cut"]++
		w.a.tracef("mirror: cut the cross-cluster link until %d", heal)
	}
}

// failback: the old source mirrors from the cluster that took over.
func (w *world) failback() {
	nd, ns := w.src, w.dst
	topicID := ns.ctl.image.Topic("t").GetTopicId()
	sources := map[string]metastate.SourceTopic{"t": {TopicID: topicID, Partitions: int32(ns.report.Partitions)}}
	ok := true
	nd.ctl.do("start-mirror", func(st *metastate.State) *pb.MetadataDelta {
		var d *pb.MetadataDelta
		var res []*pb.MirrorTopicResult
		if st.Mirror(mirrorName) == nil {
			var resp *pb.CreateMirrorResponse
			d, resp = st.CreateMirror(&pb.CreateMirrorRequest{Name: mirrorName, SourceBootstrap: []string{ns.clusterID}, Topics: []string{"t"}}, ns.clusterID, sources)
			if resp.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
				ok = false
				nd.tracef("mirror: create mirror: %s", errText(resp))
			}
			res = resp.GetTopics()
		} else {
			d, res = st.StartMirrorTopics(mirrorName, []string{"t"}, []string{ns.clusterID}, ns.clusterID, sources)
		}
		for _, r := range res {
			if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
				ok = false
				nd.tracef("mirror: start: %s", errText(r))
			}
		}
		if !ok {
			return nil
		}
		return d
	})
	if !ok {
		return
	}
	w.rep.Failbacks++
	w.src, w.dst = ns, nd
	w.phase, w.since = phaseMirroring, w.now()
	w.a.tracef("mirror: failback: %s mirrors %s", nd.clusterID, ns.clusterID)
}

// leaderPart is the partition's current leader replica if it runs in the
// controller's LE.
func (s *Sim) leaderPart(tp twinlog.TopicPartition) *simPart {
	pr := s.ctl.image.Partition(tp.Topic, tp.Partition)
	if pr.GetLeader() < 1 {
		return nil
	}
	b := s.brokers[pr.GetLeader()-1]
	p := b.parts[tp]
	if !b.up || p == nil || p.r.LeaderEpoch() != twinlog.Epoch(pr.GetLeaderEpoch()) || p.r.Role() != replica.RoleLeader {
		return nil
	}
	return p
}

// caughtUp: every destination leader mirrors and holds the source leader's
// whole log, which is fully committed.
func (w *world) caughtUp() bool {
	for _, tp := range w.src.topics {
		sp, dp := w.src.leaderPart(tp), w.dst.leaderPart(tp)
		if sp == nil || dp == nil {
			return false
		}
		r := w.byPart[dp]
		// The machine's own view too: equal LEOs are no proof of equal logs
		// before this run's first fetch, which may still cut the log
		// (seed 1950059).
		if r == nil || r.core.M == nil || !r.core.Leadership.Leading || !r.core.M.CaughtUp() || !r.fetching {
			return false
		}
		if sp.r.HighWatermark() != sp.r.LogEndOffset() || dp.r.LogEndOffset() != sp.r.LogEndOffset() {
			return false
		}
	}
	return true
}

// heal: faults off, clusters healed, a pending failover completed by a
// failback, then both clusters run until they are quiescent and the mirror
// has caught up; then the final checks.
func (w *world) heal() {
	if w.failed() {
		return
	}
	a, b := w.a, w.b
	w.faultsOn = false
	w.cutUntil = 0
	a.healStart()
	b.healStart()
	if w.phase == phaseDraining {
		w.phase = phaseMirroring
	}
	end := a.now + w.cfg.HealMs
	quiet := 0
	for !w.failed() && a.now < end {
		if w.phase == phaseFailedOver {
			w.failback()
		}
		w.tick()
		if w.phase == phaseMirroring && a.quiescent() && b.quiescent() && w.caughtUp() {
			quiet++
			if quiet > 200 {
				break
			}
		} else {
			quiet = 0
		}
	}
	if w.failed() {
		return
	}
	w.rep.CaughtUp = w.phase == phaseMirroring && w.caughtUp()
	a.healFinish()
	b.healFinish()
	if w.failed() {
		return
	}
	if !w.rep.CaughtUp {
		w.dst.fail("liveness: mirror not caught up", "%s mirrors %s\n%s\n%s", w.dst.clusterID, w.src.clusterID, w.describe(w.src), w.describe(w.dst))
		return
	}
	w.check20()
	w.check21()
}

func (w *world) describe(s *Sim) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %s:\n%s", s.clusterID, s.describe())
	for _, r := range w.runners {
		if r.s == s && r.core.Leadership.Leading && r.core.M != nil {
			st := r.core.M.Status()
			fmt.Fprintf(&b, "  mirror %s broker %d: %s lmle %d srcHW %d LEO %d HW %d fetching %t lastError %q retries %d taints %v\n", r.p.key, r.p.b.id,
				shortState(st.GetState()), st.GetLmle(), st.GetSourceHighWatermark(), st.GetLogEndOffset(), st.GetHighWatermark(), r.fetching, st.GetLastError(), st.GetRetryCount(), st.GetTaints())
		}
	}
	return b.String()
}

// ---- checks ----

func (w *world) checkStep() {
	for _, s := range []*Sim{w.a, w.b} {
		for _, b := range s.brokers {
			if !b.up {
				continue
			}
			for _, p := range b.sortedParts() {
				if p.tp.Topic != "t" || p.r.Role() == replica.RoleNone {
					continue
				}
				w.rep.Checks["§8.16 LE ≥ record epochs"]++
				es := p.r.EpochEntries()
				if n := len(es); n > 0 && es[n-1].Epoch > p.r.LeaderEpoch() {
					s.fail("§8.16 record epoch above LE", "broker %d %s (%v): LE %d, epochs %v", b.id, p.key, p.r.Role(), p.r.LeaderEpoch(), es)
					return
				}
				r := w.byPart[p]
				if r == nil || !r.core.Leadership.Leading || r.core.M == nil || r.core.M.State() != plan.Mirroring || p.r.Role() != replica.RoleLeader {
					continue
				}
				if !r.fetching {
					// A new leader resuming MIRRORING may arrive with its own
					// record-less entry (a tainted replica elected uncleanly,
					// §6.8, that once led writable); the machine drops it (bump,
					// cut at the LEO, §6.2f) before its fetcher starts, so the
					// cache is checked while it fetches (seed 177,
					// TestKnownBugResumeMirroringKeepsOwnEmptyEpoch).
					continue
				}
				lmle := r.core.M.Status().GetLmle()
				if lmle < 0 && p.r.LogEndOffset() == p.r.LogStartOffset() && len(es) > 0 {
					// plan.LMLETruncationOffset(−1) on an empty log is a
					// no-op, so an entry the leader assigned while the
					// partition was writable (its own (LE, LEO)) survives
					// the run's truncation: a mirror cache epoch without
					// records; the first fetch carries it as lastFetchedEpoch.
					s.knownBug(p, "plan-lmle-minus-one-keeps-empty-epoch", "broker %d %s: MIRRORING with lmleUsed −1, empty log at %d, cache %v",
						b.id, p.key, p.r.LogEndOffset(), es)
					continue
				}
				w.rep.Checks["§8.16 mirror cache without empty epochs"]++
				for i, e := range es {
					if int32(e.Epoch) <= lmle {
						continue
					}
					end := p.r.LogEndOffset()
					if i+1 < len(es) {
						end = es[i+1].StartOffset
					}
					if e.StartOffset >= end {
						s.fail("§8.16 mirror cache epoch without records", "broker %d %s: epochs %v, LEO %d, lmleUsed %d", b.id, p.key, es, p.r.LogEndOffset(), lmle)
						return
					}
				}
			}
		}
	}
	if w.step%200 == 0 {
		w.check20()
	}
}

// origin is the cluster whose producer wrote value ("p<id>-<n>").
func origin(value string) string {
	i := strings.IndexByte(value, '-')
	if len(value) < 2 || value[0] != 'p' || i < 0 {
		return "?"
	}
	id, err := strconv.Atoi(value[1:i])
	if err != nil {
		return "?"
	}
	if id >= 10 {
		return "b"
	}
	return "a"
}

// untainted returns the running replicas of tp in both clusters that no
// leader or __mirror_state record calls tainted. A broker outside the
// controller's replica set is no replica: the log a removed broker still
// holds is dead (a broker added back restarts it at 0), so it is left out
// (sweep seed 728689: removed b4 kept epoch-8 records its cluster's
// failback truncated on every replica). So is a broker being added back
// whose replica has not yet applied the addition: its log is still that
// dead one, which it restarts at 0 when it does (replica's
// discardLogIfAddedBack; sweep seed 4101812: b4, cut off from its
// controller while a reassignment removed it and a failback truncated,
// counted again the moment a reassignment re-added it).
func (w *world) untainted(tp twinlog.TopicPartition) []*simPart {
	var out []*simPart
	for _, s := range []*Sim{w.a, w.b} {
		t := s.ctl.image.Topic(tp.Topic)
		pr := s.ctl.image.Partition(tp.Topic, tp.Partition)
		tainted := map[int32]bool{}
		for _, id := range w.tables[s].taints(t.GetTopicId(), tp.Partition) {
			tainted[id] = true
		}
		for _, b := range s.brokers {
			if p := b.parts[tp]; b.up && p != nil && p.r.Role() == replica.RoleLeader {
				for id := range p.r.Taints() {
					tainted[int32(id)] = true
				}
				for _, id := range p.r.TaintsClearing() {
					tainted[int32(id)] = true
				}
			}
		}
		for _, b := range s.brokers {
			p := b.parts[tp]
			if !b.up || p == nil || tainted[b.id] || !slices.Contains(pr.GetReplicas(), b.id) {
				continue
			}
			if slices.Contains(pr.GetAddingReplicas(), b.id) && p.r.PartitionEpoch() < twinlog.PartitionEpoch(pr.GetPartitionEpoch()) {
				// Being added and behind the record (it may not have
				// applied the addition yet): its log may be the dead one.
				continue
			}
			out = append(out, p)
		}
	}
	return out
}

// check20 is §8.20 while the destination leader is MIRRORING: each epoch on
// the untainted replicas of both clusters has all its records from one
// cluster.
func (w *world) check20() {
	if w.phase != phaseMirroring {
		return
	}
	for _, tp := range w.dst.topics {
		key := tp.String()
		if w.exempt[key] {
			continue
		}
		dp := w.dst.leaderPart(tp)
		if dp == nil {
			continue
		}
		if r := w.byPart[dp]; r == nil || !r.core.Leadership.Leading || r.core.M == nil || r.core.M.State() != plan.Mirroring {
			continue
		}
		w.rep.Checks["§8.20 one cluster per epoch"]++
		owner := map[int32]string{}
		where := map[int32]string{}
		for _, p := range w.untainted(tp) {
			for i, rec := range p.shadow.recs {
				o := origin(rec.value)
				if cur, ok := owner[rec.epoch]; ok && cur != o {
					w.dst.fail("§8.20 epoch with records of both clusters", "%s epoch %d: %s has %q (cluster %s) at %d; %s\n%s\n%s", key, rec.epoch, p.b.s.clusterID+strconv.Itoa(int(p.b.id)), rec.value, o, p.shadow.start+int64(i), where[rec.epoch],
						w.logs(tp), w.describe(w.dst))
					return
				}
				if _, ok := owner[rec.epoch]; !ok {
					owner[rec.epoch] = o
					where[rec.epoch] = fmt.Sprintf("%s%d has %q (cluster %s) at %d", p.b.s.clusterID, p.b.id, rec.value, o, p.shadow.start+int64(i))
				}
			}
		}
	}
}

// logs summarises every running replica's log of tp (offset ranges per
// epoch and origin).
func (w *world) logs(tp twinlog.TopicPartition) string {
	var b strings.Builder
	for _, s := range []*Sim{w.a, w.b} {
		for _, br := range s.brokers {
			p := br.parts[tp]
			if !br.up || p == nil {
				continue
			}
			fmt.Fprintf(&b, "  %s%d LE %d HW %d:", s.clusterID, br.id, p.r.LeaderEpoch(), p.r.HighWatermark())
			for i := 0; i < len(p.shadow.recs); {
				j := i
				for j+1 < len(p.shadow.recs) && p.shadow.recs[j+1].epoch == p.shadow.recs[i].epoch && origin(p.shadow.recs[j+1].value) == origin(p.shadow.recs[i].value) {
					j++
				}
				fmt.Fprintf(&b, " %d-%d@%d%s", p.shadow.start+int64(i), p.shadow.start+int64(j), p.shadow.recs[i].epoch, origin(p.shadow.recs[i].value))
				i = j + 1
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// check21 is §8.21 after the final failback and catch-up: the untainted
// replicas of both clusters are identical on [max(logStart_S, logStart_D),
// min(HW_S, HW_D)).
func (w *world) check21() {
	for _, tp := range w.dst.topics {
		key := tp.String()
		if w.exempt[key] {
			continue
		}
		sp, dp := w.src.leaderPart(tp), w.dst.leaderPart(tp)
		if sp == nil || dp == nil {
			continue
		}
		from := max(sp.shadow.start, dp.shadow.start)
		to := int64(min(sp.r.HighWatermark(), dp.r.HighWatermark()))
		reps := w.untainted(tp)
		w.rep.Checks["§8.21 identical after failback"]++
		for o := from; o < to; o++ {
			want, _ := sp.shadow.at(o)
			for _, p := range reps {
				if got, ok := p.shadow.at(o); !ok || got != want {
					w.dst.fail("§8.21 clusters differ after failback", "%s offset %d: %s leader %d has %v, %s%d has %v (%t)\n%s", key, o, w.src.clusterID, sp.b.id, want, p.b.s.clusterID, p.b.id, got, ok, w.logs(tp))
					return
				}
			}
		}
	}
}

func cloneProto[T proto.Message](m T) T { return proto.Clone(m).(T) }
