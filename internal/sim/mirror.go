package sim

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/assign"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/controller/metastate"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/state"
)

// Two-cluster mode (Config.Clusters = 2): clusters A and B are two Sims
// stepped in lockstep by a world. B's topic t is created by CreateMirror
// from A's (same topic id and partition count) and mirrored by a
// plan.Machine on each of B's partition leaders, run by the shipped
// mirror/runner.Runner (mirrorhost.go): GetLastMirroredEpochs answered
// by the other cluster's __mirror_state leader (state.Store.Answer),
// BumpLeaderEpoch through the controller shell (a truncation offset
// records a truncation point, §6.2f), Fetch{MIRROR} to the source leader
// (served by the source replica's HandleFollowerFetch and storage.Log.Read
// below its HW), append via AppendAsMirrorLeader, taints. At random moments the world fails over
// (Stop on the destination; half of the time after draining the source)
// and fails back (the old source mirrors from the new one: CreateMirror or
// StartMirrorTopics on it), with cross-cluster link cuts, drops and delays
// and flips of mirror.support.unclean.leader.election.
//
// __mirror_state is each cluster's real internal topic, read, written and
// answered from with the shipped mirror/state.Store (statehost.go); the
// checkers read its committed records.
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
	// StateRevivals counts the operator's unclean elections of a
	// __mirror_state partition left without a leader (reviveState).
	StateRevivals int
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
	return fmt.Sprintf("mirror: failovers %d (planned %d), failbacks %d, truncations %s (lmle no-ops %d), bumps %d, lmle queries %d, mirrored records %d, transferred acks %d, uncopied acks %d, caught up %t, stale leaders %d, HW caps %d, exempt %d, state revivals %d\n  transitions %s\n  cross faults %s\n  mirror checks %s",
		m.Failovers, m.PlannedFailovers, m.Failbacks, kinds(m.Truncations), m.LMLENoOps, m.Bumps, m.LMLEQueries, m.MirroredRecords,
		m.TransferredAcks, m.UncopiedAcks, m.CaughtUp, m.StaleLeaders, m.HWCaps, m.Exempt, m.StateRevivals, kinds(m.Transitions), kinds(m.CrossFaults), kinds(m.Checks))
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
	// appended names the cluster whose leader accepted a value in an
	// epoch (Config.Idempotent only: originOf).
	appended map[valueEpoch]string
	phase    phase
	since    int64 // phase start
	drainEnd int64
	faultsOn bool

	xq       []*xmsg
	xseq     uint64
	cutUntil int64 // cross-cluster link cut until (0: none)

	runners  []*mirrorRunner
	byPart   map[*simPart]*mirrorRunner
	writable map[*simPart]bool // the shell's mirrorWritable
	// writableLE: the LE of the last SetWritable (mirrorWritableLE).
	writableLE map[*simPart]twinlog.Epoch
	// stateHW, stateViews: the committed __mirror_state the checkers
	// read (statehost.go).
	stateHW        map[*Sim]twinlog.Offset
	stateViews     map[*Sim]*stateViewCache
	stateAckedView map[*Sim]*state.View
	confirmQ       []confirmReq
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
	// groupsOn is the cluster the groups' members use (offsetsync.go);
	// pending a failover waiting for its last offset sync; nextSync the
	// destination's next periodic sync.
	groupsOn *Sim
	pending  *pendingFailover
	nextSync int64
	// truncPoints are the truncation points recorded per cluster and
	// partition (offsetsync.go's checkTruncationMove).
	truncPoints map[*Sim]map[string][]truncPoint
	// truncatedAt is when a cluster's latest truncation point was
	// recorded; syncedFrom when its latest complete offset sync started
	// (offsetsSettled).
	truncatedAt, syncedFrom map[*Sim]int64
	// lastPass is a cluster's latest offset sync in which the truncation
	// pass ran, whatever the rest of the sync did (checkLeftInTruncated).
	lastPass map[*Sim]*syncRun
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
		byPart: map[*simPart]*mirrorRunner{}, appended: map[valueEpoch]string{}, writable: map[*simPart]bool{}, writableLE: map[*simPart]twinlog.Epoch{},
		stateHW: map[*Sim]twinlog.Offset{}, stateViews: map[*Sim]*stateViewCache{}, stateAckedView: map[*Sim]*state.View{},
		copies: map[*Sim]map[string]map[int64]copyRec{}, exempt: map[string]bool{},
		leaderSeen: map[*simPart]int32{}, staleLE: map[*simPart]bool{}, staleUntilTrunc: map[*Sim]map[string]bool{},
		rep: &MirrorReport{Truncations: map[string]int{}, Transitions: map[string]int{}, CrossFaults: map[string]int{}, Checks: map[string]int{}}}
	w.a = newSim(cfg, "a", cfg.Seed)
	w.b = newSim(cfg, "b", cfg.Seed+0xb)
	w.b.producerBase = 10
	w.b.pidsGiven = w.a.pidsGiven
	w.a.tracePrefix, w.b.tracePrefix = "[a] ", "[b] "
	w.b.traceSink = w.a
	for _, s := range []*Sim{w.a, w.b} {
		s.w = w
		w.copies[s] = map[string]map[int64]copyRec{}
		w.staleUntilTrunc[s] = map[string]bool{}
	}
	w.truncPoints = map[*Sim]map[string][]truncPoint{w.a: {}, w.b: {}}
	w.truncatedAt, w.syncedFrom, w.lastPass = map[*Sim]int64{}, map[*Sim]int64{}, map[*Sim]*syncRun{}
	w.src, w.dst = w.a, w.b
	defer func() {
		if r := recover(); r != nil {
			w.a.fail("panic", "%v\n%s", r, debug.Stack())
		}
		for _, s := range []*Sim{w.a, w.b} {
			if s.ctl == nil {
				continue
			}
			if run := s.ctl.sync; run != nil {
				// A sync still suspended: its coroutine ends with the run.
				s.ctl.sync = nil
				run.abandoned = nil
				run.abandon()
			}
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
	// Each operator grants the other cluster's brokers what mirroring
	// from it needs (b mirrors a now; a mirrors b after a failback).
	w.grantMirroring(a, b)
	w.grantMirroring(b, a)
	topicID := a.ctl.image.Topic("t").GetTopicId()
	aSource := metastate.SourceCluster{ID: "a", ProducerIDSpace: a.ctl.image.ProducerIDSpace()}
	b.setupTopic(func(rf int) {
		b.ctl.do("create-mirror", func(st *metastate.State) *pb.MetadataDelta {
			d, resp := st.CreateMirror(&pb.CreateMirrorRequest{Name: mirrorName, SourceBootstrap: []string{"a"}, Topics: []string{"t"}}, aSource,
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
	if w.cfg.Groups > 0 {
		// The same groups on both: their members consume from the
		// writable cluster (offsetsync.go).
		a.setupGroups()
		b.setupGroups()
	}
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
	w.stepGroups()
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
	// A taint counts once its write is acknowledged (§6.4), even when no
	// live replica of __mirror_state holds it at the election and the
	// committed view is a stale one (seed 9505571: the taint's record was
	// on the crashed and stopped replicas only).
	tainted := slices.Contains(taintsOf(w.committedState(s), topicID, tp.Partition), broker) ||
		slices.Contains(taintsOf(w.ackedState(s), topicID, tp.Partition), broker)
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
	w.truncPoints[s][key] = append(w.truncPoints[s][key], truncPoint{le: le, offset: o, seq: s.hist.Seq()})
	w.truncatedAt[s] = s.now
	s.noteUnclean(key, le)
	s.tracef("mirror: truncation point %s (LE %d, offset %d)", key, le, o)
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
			if w.exempt[p.key] && !w.isrHolds(d, p, o, a.Value) {
				// The §6.8 exemption on the destination: a tainted replica
				// elected uncleanly left replicas that disagree below the
				// HW (§6.10 case 2), so an ack the leader holds and an ISR
				// member lacks is not the destination's to keep (seed
				// 4238303).
				w.rep.Checks["failover ack not handed over (exempt destination, ISR disagrees)"]++
				continue
			}
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

// isrHolds reports whether every member of leader p's ISR in cluster d
// hosts the partition with value at offset o (a member down or without the
// partition does not).
func (w *world) isrHolds(d *Sim, p *simPart, o int64, value string) bool {
	for _, id := range p.r.ISR() {
		b := d.brokers[id-1]
		q := b.parts[p.tp]
		if !b.up || q == nil {
			return false
		}
		if v, ok := q.shadow.at(o); !ok || v.value != value {
			return false
		}
	}
	return true
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
		if w.pending != nil {
			return // a disaster failover waits for its last offset sync
		}
		if w.faultsOn && now-w.since > 800 && w.rng.Float64() < 0.003 {
			if w.rng.IntN(2) == 0 {
				w.phase, w.since, w.drainEnd = phaseDraining, now, now+2500
				w.src.producing = false
				w.a.tracef("mirror: planned failover of %s: draining %s", w.dst.clusterID, w.src.clusterID)
				return
			}
			w.beginFailover(false)
		}
	case phaseDraining:
		if w.pending == nil && (w.caughtUp() || now >= w.drainEnd) {
			w.beginFailover(w.caughtUp())
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
	if w.cfg.Idempotent && w.faultsOn {
		w.moveProducers(w.src, d)
	}
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
	src := metastate.SourceCluster{ID: ns.clusterID, ProducerIDSpace: ns.ctl.image.ProducerIDSpace()}
	ok := true
	nd.ctl.do("start-mirror", func(st *metastate.State) *pb.MetadataDelta {
		var d *pb.MetadataDelta
		var res []*pb.MirrorTopicResult
		if st.Mirror(mirrorName) == nil {
			var resp *pb.CreateMirrorResponse
			d, resp = st.CreateMirror(&pb.CreateMirrorRequest{Name: mirrorName, SourceBootstrap: []string{ns.clusterID}, Topics: []string{"t"}}, src, sources)
			if resp.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
				ok = false
				nd.tracef("mirror: create mirror: %s", errText(resp))
			}
			res = resp.GetTopics()
		} else {
			d, res = st.StartMirrorTopics(mirrorName, []string{"t"}, []string{ns.clusterID}, src, sources)
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
	p := s.leadingPart(tp)
	if p == nil || p.r.LeaderEpoch() != twinlog.Epoch(s.ctl.image.Partition(tp.Topic, tp.Partition).GetLeaderEpoch()) {
		return nil
	}
	return p
}

// leadingPart is the replica of tp on the broker the controller names its
// leader, if that broker runs and leads it in any LE (nil otherwise).
func (s *Sim) leadingPart(tp twinlog.TopicPartition) *simPart {
	pr := s.ctl.image.Partition(tp.Topic, tp.Partition)
	if pr.GetLeader() < 1 {
		return nil
	}
	b := s.brokers[pr.GetLeader()-1]
	if p := b.parts[tp]; b.up && p != nil && p.r.Role() == replica.RoleLeader {
		return p
	}
	return nil
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
		if r == nil || r.core().M == nil || !r.core().Leadership.Leading || !r.core().M.CaughtUp() || !r.rn.Fetching() {
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
	w.pending = nil // a failover waiting for its last sync is called off
	if w.phase == phaseDraining {
		w.phase = phaseMirroring
	}
	end := a.now + w.cfg.HealMs
	quiet := 0
	for !w.failed() && a.now < end {
		if w.phase == phaseFailedOver {
			w.failback()
		}
		if a.now%500 == 0 {
			w.reviveState(a)
			w.reviveState(b)
		}
		w.tick()
		if w.phase == phaseMirroring && a.quiescent() && b.quiescent() && w.caughtUp() && w.offsetsSettled() {
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
	if !w.rep.CaughtUp && w.rep.StateRevivals > 0 {
		// A runner keeps the state it holds in memory and does not write
		// it again when the operator's unclean election lost its records:
		// a source whose run record fell back to STOPPING answers
		// INVALID_MIRROR_SOURCE until its leadership changes (seed
		// 7100094). Outside the guarantees, like the lost records.
		w.dst.tracef("mirror not caught up after the operator's unclean election of __mirror_state: liveness not checked")
		w.rep.Checks["liveness suspended: __mirror_state lost records"]++
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
		if r.s == s && r.core().Leadership.Leading && r.core().M != nil {
			st := r.core().M.Status()
			fmt.Fprintf(&b, "  mirror %s broker %d: %s lmle %d srcHW %d LEO %d HW %d fetching %t lastError %q retries %d taints %v\n", r.p.key, r.p.b.id,
				shortState(st.GetState()), st.GetLmle(), st.GetSourceHighWatermark(), st.GetLogEndOffset(), st.GetHighWatermark(), r.rn.Fetching(), st.GetLastError(), st.GetRetryCount(), st.GetTaints())
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
				if r == nil || !r.core().Leadership.Leading || r.core().M == nil || r.core().M.State() != plan.Mirroring || p.r.Role() != replica.RoleLeader {
					continue
				}
				if !r.rn.Fetching() {
					// A new leader resuming MIRRORING may arrive with its own
					// record-less entry (a tainted replica elected uncleanly,
					// §6.8, that once led writable); the machine drops it (bump,
					// cut at the LEO, §6.2f) before its fetcher starts, so the
					// cache is checked while it fetches (seed 177,
					// TestKnownBugResumeMirroringKeepsOwnEmptyEpoch).
					continue
				}
				lmle := r.core().M.Status().GetLmle()
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

// originOf is the cluster whose leader appended value in epoch: the one
// whose leader accepted its produce (appended), else the one whose producer
// wrote it (origin). They differ only for a producer carried to the other
// cluster (moveProducers), whose earlier values the new cluster may
// append. "ab" when the leaders of both accepted it in an epoch of that
// number (a split brain's tail that a failback cuts and the other's
// copy): either may be the record a log holds.
func (w *world) originOf(value string, epoch int32) string {
	if o, ok := w.appended[valueEpoch{value, epoch}]; ok {
		return o
	}
	return origin(value)
}

// noteAppended records that cluster's leader accepted value in epoch.
func (w *world) noteAppended(value string, epoch int32, cluster string) {
	k := valueEpoch{value, epoch}
	if o, ok := w.appended[k]; ok && o != cluster {
		cluster = "ab"
	}
	w.appended[k] = cluster
}

// commonOrigin is the clusters two records' origins (originOf) have in
// common: "" when none, and then one epoch holds records of both.
func commonOrigin(x, y string) string {
	var out []byte
	for _, c := range []byte("ab") {
		if strings.IndexByte(x, c) >= 0 && strings.IndexByte(y, c) >= 0 {
			out = append(out, c)
		}
	}
	return string(out)
}

type valueEpoch struct {
	value string
	epoch int32
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
		for _, id := range taintsOf(w.committedState(s), t.GetTopicId(), tp.Partition) {
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
		if r := w.byPart[dp]; r == nil || !r.core().Leadership.Leading || r.core().M == nil || r.core().M.State() != plan.Mirroring {
			continue
		}
		w.rep.Checks["§8.20 one cluster per epoch"]++
		owner := map[int32]string{}
		where := map[int32]string{}
		for _, p := range w.untainted(tp) {
			for i, rec := range p.shadow.recs {
				o := w.originOf(rec.value, rec.epoch)
				cur, ok := owner[rec.epoch]
				if ok && commonOrigin(cur, o) == "" {
					w.dst.fail("§8.20 epoch with records of both clusters", "%s epoch %d: %s has %q (cluster %s) at %d; %s\n%s\n%s", key, rec.epoch, p.b.s.clusterID+strconv.Itoa(int(p.b.id)), rec.value, o, p.shadow.start+int64(i), where[rec.epoch],
						w.logs(tp), w.describe(w.dst))
					return
				}
				if !ok {
					owner[rec.epoch] = o
					where[rec.epoch] = fmt.Sprintf("%s%d has %q (cluster %s) at %d", p.b.s.clusterID, p.b.id, rec.value, o, p.shadow.start+int64(i))
				} else {
					owner[rec.epoch] = commonOrigin(cur, o)
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
				for j+1 < len(p.shadow.recs) && p.shadow.recs[j+1].epoch == p.shadow.recs[i].epoch && w.originOf(p.shadow.recs[j+1].value, p.shadow.recs[j+1].epoch) == w.originOf(p.shadow.recs[i].value, p.shadow.recs[i].epoch) {
					j++
				}
				fmt.Fprintf(&b, " %d-%d@%d%s", p.shadow.start+int64(i), p.shadow.start+int64(j), p.shadow.recs[i].epoch, w.originOf(p.shadow.recs[i].value, p.shadow.recs[i].epoch))
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
