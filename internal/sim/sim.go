package sim

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastate"
	"github.com/twinlog/twinlog/internal/history"
	"github.com/twinlog/twinlog/metadata"
)

// Config shapes one simulated run. Zero values take defaults (withDefaults);
// probabilities are per step (StepMs of simulated time).
type Config struct {
	Seed uint64
	// Brokers (3–5) and Partitions (1–3) of the topic; 0 draws from the seed.
	Brokers, Partitions int
	// StepMs is the simulated time per step; FaultMs the length of the fault
	// phase; HealMs the bound on the healing phase that follows.
	StepMs, FaultMs, HealMs int64

	DropProb, SlowProb      float64
	MaxDelayMs, SlowDelayMs int64
	CrashProb               float64 // kill -9 of a broker
	CleanRestartProb        float64
	CutProb, IsolateProb    float64 // one link; all links of one broker
	ControllerRestartProb   float64
	ControllerCompactProb   float64 // the controller snapshots its log and drops older deltas
	ConfigFlipProb          float64 // min.insync.replicas, unclean.leader.election.enable
	PreferredElectionProb   float64

	HeartbeatMs, SessionTimeoutMs, MetadataPollMs, ControllerTickMs    int64
	ReplicaTickMs, ReplicaLagMs, FetchTimeoutMs, ProduceTimeoutMs      int64
	FlushEveryMs, CheckpointMs, UncleanRecoveryTimeoutMs, RPCTimeoutMs int64
	ProduceProb, ConsumeProb                                           float64
	SegmentMaxBytes                                                    int64

	// Strict87 never suspends §8.7: not after a leader advanced the HW under
	// a stale min.insync.replicas (TestMinISRRaceELRBelowHW), nor after the
	// known rollback bug (TestKnownBugRollbackAfterCommit).
	Strict87 bool

	// FailOnKnownBugs turns a known bug (see knownBug) into a failure
	// instead of a count in Report.KnownBugs.
	FailOnKnownBugs bool

	// mutation breaks the shell on purpose so tests can show the checks
	// bite: "acks1-as-all" (acks=1 acks recorded as acks=all),
	// "ignore-divergence" (followers drop DivergingEpoch answers).
	mutation string

	// Clusters is 1 (default) or 2. With 2 (or Mirror) the run has a
	// second cluster B whose topic mirrors A's through mirror/plan, with
	// failovers and failbacks at random moments (mirror.go).
	Clusters int
	// Mirror is Clusters: 2.
	Mirror bool
	// PauseProb is the per-step probability that the operator pauses the
	// destination's mirror topic while it mirrors (two clusters only,
	// ops.go; resumed 0.1–3.1 s later). Negative disables.
	PauseProb float64
	// ReassignProb is the per-step probability of a reassignment of one
	// partition of topic t (or the cancellation of one in progress) in
	// one of the two clusters (two clusters only, ops.go). Negative
	// disables.
	ReassignProb float64

	// Groups is the number of consumer groups of topic t whose members
	// commit through the brokers' shipped group coordinators (groups.go);
	// 0, the default, runs none (and draws nothing for them from the
	// seed, so a seed's run without groups stays what it was).
	Groups int
	// OffsetSyncExclude is mirror.offset.sync.groups.exclude on both
	// clusters (two clusters with Groups): the groups it names are never
	// copied from the source, so each cluster keeps its own offsets for
	// them, and after a failback only the offset sync's truncation pass
	// (controller fixTruncated) moves those left in truncated history.
	OffsetSyncExclude string
	// Idempotent makes the producers idempotent (idempotent.go): producer
	// ids from the brokers, sequences, retries of the same batch until
	// acknowledged. Off by default, so other tests' seeds keep their runs.
	Idempotent bool

	// TraceLines is how many trace lines a failure shows (default 50).
	TraceLines int
	// Trace, if set, receives every trace line.
	Trace io.Writer
}

func (c Config) withDefaults() Config {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	deff := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.StepMs, 5)
	def(&c.FaultMs, 20_000)
	def(&c.HealMs, 30_000)
	deff(&c.DropProb, 0.02)
	deff(&c.SlowProb, 0.02)
	def(&c.MaxDelayMs, 8)
	def(&c.SlowDelayMs, 400)
	deff(&c.CrashProb, 0.0012)
	deff(&c.CleanRestartProb, 0.0006)
	deff(&c.CutProb, 0.0015)
	deff(&c.IsolateProb, 0.0006)
	deff(&c.ControllerRestartProb, 0.0003)
	deff(&c.ControllerCompactProb, 0.0005)
	deff(&c.ConfigFlipProb, 0.0008)
	deff(&c.PreferredElectionProb, 0.0005)
	deff(&c.PauseProb, 0.001)
	deff(&c.ReassignProb, 0.0005)
	def(&c.HeartbeatMs, 100)
	def(&c.SessionTimeoutMs, 600)
	def(&c.MetadataPollMs, 40)
	def(&c.ControllerTickMs, 50)
	def(&c.ReplicaTickMs, 50)
	def(&c.ReplicaLagMs, 400)
	def(&c.FetchTimeoutMs, 300)
	def(&c.ProduceTimeoutMs, 1000)
	def(&c.FlushEveryMs, 300)
	def(&c.CheckpointMs, 500)
	def(&c.UncleanRecoveryTimeoutMs, 1500)
	def(&c.RPCTimeoutMs, 500)
	deff(&c.ProduceProb, 0.08)
	deff(&c.ConsumeProb, 0.1)
	def(&c.SegmentMaxBytes, 4096)
	if c.TraceLines == 0 {
		c.TraceLines = 50
	}
	return c
}

// Report is what one run did, so tests can assert the simulator exercises
// what it claims.
type Report struct {
	Seed             uint64
	Brokers          int
	Partitions       int
	Steps            int
	SimMs            int64
	Faults           map[string]int // by kind
	Messages         int
	Elections        int // clean leader elections
	UncleanElections int
	Fences           int
	// StaleMinISRAdvances counts leader epochs in which a leader moved the
	// HW under an m older than the controller's (SPEC §3.8 race).
	StaleMinISRAdvances int
	RecoveryRounds      int
	// OffsetSyncs counts the mirror offset syncs this cluster's
	// controller ran, OffsetSyncsComplete those without an error.
	OffsetSyncs, OffsetSyncsComplete int
	Truncations                      int // replica log truncations (divergence, out of range)
	LossyCrashes                     int // crashes that lost unsynced records of a partition
	AckedAll, AckedOne               int // records
	ProduceErrors                    int
	Consumed                         int
	Checks                           map[string]int // invariant checks executed, by kind
	Healed                           bool
	// KnownBugs counts replicas stalled by known, reported bugs (by name).
	KnownBugs map[string]int
	TraceHash uint64
	History   string

	// Cluster is the cluster id ("a", or "b" for Peer).
	Cluster string
	// Peer is cluster B's report and Mirror the mirror's, in two-cluster
	// runs (nil otherwise).
	Peer   *Report
	Mirror *MirrorReport
	// Groups is what the consumer groups did (Config.Groups).
	Groups GroupReport
	// Idempotent is what the idempotent producers did (Config.Idempotent).
	Idempotent IdempotentReport
}

// FaultCount is the total of injected faults.
func (r *Report) FaultCount() int {
	n := 0
	for _, v := range r.Faults {
		n += v
	}
	return n
}

// CheckCount is the total of invariant checks executed.
func (r *Report) CheckCount() int {
	n := 0
	for _, v := range r.Checks {
		n += v
	}
	return n
}

func (r *Report) String() string {
	kinds := func(m map[string]int) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		for i, k := range keys {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s=%d", k, m[k])
		}
		return b.String()
	}
	return fmt.Sprintf("seed %d: %d brokers, %d partitions, %d steps (%d ms simulated), healed %t\n"+
		"  faults %d: %s\n  elections clean %d unclean %d, fences %d, recovery rounds %d, truncations %d, lossy crashes %d, stale-m HW advances %d\n"+
		"  acked records acks=all %d acks=1 %d, produce errors %d, consumed %d, messages %d\n"+
		"  checks %d: %s\n  known bugs: %s\n  history: %s\n  trace hash %016x",
		r.Seed, r.Brokers, r.Partitions, r.Steps, r.SimMs, r.Healed,
		r.FaultCount(), kinds(r.Faults), r.Elections, r.UncleanElections, r.Fences, r.RecoveryRounds, r.Truncations, r.LossyCrashes, r.StaleMinISRAdvances,
		r.AckedAll, r.AckedOne, r.ProduceErrors, r.Consumed, r.Messages,
		r.CheckCount(), kinds(r.Checks), kinds(r.KnownBugs), r.History, r.TraceHash) + r.mirrorString()
}

// Failure is an invariant violation: the seed replays it.
type Failure struct {
	Seed      uint64
	Step      int
	NowMs     int64
	Invariant string
	Detail    string
	Trace     []string // the last TraceLines lines
	// Replay is the test that replays it (default TestSimSeeds).
	Replay string
}

func (f *Failure) Error() string {
	replay := f.Replay
	if replay == "" {
		replay = "TestSimSeeds"
	}
	return fmt.Sprintf("sim: seed %d step %d (t=%d ms): invariant %s violated: %s\nreplay: go test ./internal/sim -run %s -sim.seed=%d -v\nlast %d trace lines:\n  %s",
		f.Seed, f.Step, f.NowMs, f.Invariant, f.Detail, replay, f.Seed, len(f.Trace), strings.Join(f.Trace, "\n  "))
}

// Sim is one seeded run of one cluster. Everything happens on the calling
// goroutine; the seed decides every choice, so a seed replays exactly.
type Sim struct {
	cfg     Config
	rng     *rand.Rand
	now     int64
	step    int
	ctl     *controller
	brokers []*simBroker
	net     *network
	hist    *history.History
	report  Report

	topics    []twinlog.TopicPartition
	topicKeys []string // topics[i].String(), for the per-step checks
	producers []*producer
	consumers []*consumer
	groups    []*simGroup
	// groupEvents numbers the groups' commit acknowledgements and the
	// offset sync's resets (offsetsync.go).
	groupEvents uint64
	timers      []simTimer
	timerSeq    uint64

	faultsOn    bool
	producing   bool
	failed      bool
	failure     *Failure
	lastUnclean map[string]int32 // partition -> LE of its latest unclean election
	trueHW      map[string]int64 // SPEC §8 trueHW since the last recorded truncation
	// lastMinISRChange is the metadata offset of the last min.insync.replicas
	// change. suspend87 holds, per partition, an LE in which §8.7 cannot
	// hold for a reason already reported (a leader that had not applied a
	// min.insync.replicas raise moved the HW; a known bug).
	lastMinISRChange int64
	suspend87        map[string]int32
	// behind87 holds, per partition, the ISR ∪ ELR members a stale-m HW
	// advance passed: the flaw outlives its leader epoch (the next leader
	// may come from the ISR while they stay in ELR below the HW), so §8.7
	// skips them until they catch up or leave ISR ∪ ELR (seed 11701477).
	behind87 map[string]map[int32]bool
	verified map[[2]*simPart]verifiedPrefix

	trace                      []string
	traceHash                  uint64
	nextCtlTick, nextFullCheck int64

	// Two-cluster runs (mirror.go): the cluster id, the world that owns
	// both clusters (nil in a one-cluster run), where trace lines go (the
	// other cluster's Sim shares one trace and hash) and the first
	// producer id (values name their cluster).
	clusterID    string
	w            *world
	traceSink    *Sim
	tracePrefix  string
	producerBase int
	// pidsGiven names the producer each producer id went to (both
	// clusters of a run share it).
	pidsGiven map[int64]string
	// dupSeqs holds the producer ids and base sequences of the batches
	// this cluster's leaders answered as duplicates.
	dupSeqs map[[2]int64]bool
}

type simTimer struct {
	at  int64
	seq uint64
	fn  func()
}

// Run executes one seed and returns its report, with a *Failure error on the
// first invariant violation.
func Run(cfg Config) (rep *Report, err error) {
	cfg = cfg.withDefaults()
	if cfg.Clusters == 2 || cfg.Mirror {
		return runTwo(cfg)
	}
	s := newSim(cfg, "a", cfg.Seed)
	defer func() {
		if r := recover(); r != nil {
			s.fail("panic", "%v\n%s", r, debug.Stack())
		}
		s.report.Steps, s.report.SimMs, s.report.TraceHash = s.step, s.now, s.traceHash
		s.report.History = s.hist.Summary()
		// A copy: &s.report would keep the whole Sim (brokers, logs,
		// controller) reachable for as long as the caller holds the report.
		r := s.report
		rep = &r
		if s.failure != nil {
			err = s.failure
		}
	}()
	s.run()
	return
}

func newSim(cfg Config, clusterID string, stream uint64) *Sim {
	s := &Sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, stream)), hist: history.NewHistory(), clusterID: clusterID,
		pidsGiven: map[int64]string{}, dupSeqs: map[[2]int64]bool{}, lastUnclean: map[string]int32{}, trueHW: map[string]int64{}, suspend87: map[string]int32{}, behind87: map[string]map[int32]bool{}, verified: map[[2]*simPart]verifiedPrefix{}}
	h := fnv.New64a()
	s.traceHash = h.Sum64()
	s.report = Report{Seed: cfg.Seed, Cluster: clusterID, Faults: map[string]int{}, Checks: map[string]int{}, KnownBugs: map[string]int{}}
	s.net = newNetwork(s)
	s.hist.Reappends = cfg.Idempotent // a retry may come back after a truncation
	return s
}

func (s *Sim) run() {
	s.setupStart()
	// Wait for every broker to be registered and unfenced.
	for !s.failed && s.now < 5000 {
		s.tick()
		if s.registeredAll() {
			break
		}
	}
	s.setupTopic(nil)
	s.setupGroups()
	s.startClients()
	end := s.now + s.cfg.FaultMs
	for !s.failed && s.now < end {
		s.tick()
	}
	s.heal()
}

// setupStart draws the cluster's shape, sets the cluster configs and starts
// the brokers.
func (s *Sim) setupStart() {
	cfg := s.cfg
	n := cfg.Brokers
	if n == 0 {
		n = 3 + s.rng.IntN(3)
	}
	parts := cfg.Partitions
	if parts == 0 {
		parts = 1 + s.rng.IntN(3)
	}
	s.report.Brokers, s.report.Partitions = n, parts
	s.ctl = newController(s)
	minISR := 1 + s.rng.IntN(2)
	unclean := s.chance(0.25)
	s.tracef("setup: %d brokers, %d partitions, min.insync.replicas %d, unclean.leader.election.enable %t", n, parts, minISR, unclean)
	// The record is written as it stands, not through AlterConfigs: the
	// simulator compresses time, and its session (600 ms by default) lies
	// below the floor an operator may set (internal/configdef). The record
	// is the one AlterConfigs wrote here before that floor existed, so
	// every seed runs as it did.
	s.ctl.do("configs", func(st *metastate.State) *pb.MetadataDelta {
		cc := st.ClusterConfigs()
		if cc == nil {
			cc = map[string]string{}
		}
		maps.Copy(cc, map[string]string{
			metadata.KeyBrokerSessionTimeoutMs:    strconv.FormatInt(cfg.SessionTimeoutMs, 10),
			metadata.KeyBrokerHeartbeatIntervalMs: strconv.FormatInt(cfg.HeartbeatMs, 10),
			metadata.KeyUncleanRecoveryTimeoutMs:  strconv.FormatInt(cfg.UncleanRecoveryTimeoutMs, 10),
			metadata.KeyMinInsyncReplicas:         strconv.Itoa(minISR),
			metadata.KeyUncleanLeaderElection:     strconv.FormatBool(unclean),
		})
		if cfg.Groups > 0 {
			cc[metadata.KeyOffsetsTopicNumPartitions] = strconv.Itoa(1 + s.rng.IntN(3))
		}
		if cfg.OffsetSyncExclude != "" {
			cc[metadata.KeyMirrorOffsetSyncExclude] = cfg.OffsetSyncExclude
		}
		return &pb.MetadataDelta{Offset: st.Offset() + 1, ClusterConfig: &pb.ClusterConfigRecord{Configs: cc}}
	})
	for i := 1; i <= n; i++ {
		b := newBroker(s, int32(i))
		s.brokers = append(s.brokers, b)
		b.start()
	}
}

// registeredAll: every broker is registered and unfenced.
func (s *Sim) registeredAll() bool {
	for _, b := range s.brokers {
		if br := s.ctl.image.Broker(b.id); br == nil || br.GetFenced() {
			return false
		}
	}
	return true
}

// setupTopic creates topic t (create, if set, does it instead: a mirror
// destination creates it through CreateMirror) and its clients' state.
func (s *Sim) setupTopic(create func(rf int)) {
	n, parts := s.report.Brokers, s.report.Partitions
	rf := min(3, n)
	if create != nil {
		create(rf)
	} else {
		s.ctl.do("create-topics", func(st *metastate.State) *pb.MetadataDelta {
			d, resp := st.CreateTopics(&pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "t", NumPartitions: int32(parts), ReplicationFactor: int32(rf)}}})
			for _, r := range resp.GetTopics() {
				if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
					s.fail("setup", "create topic: %v", r)
				}
			}
			return d
		})
	}
	for i := range parts {
		tp := twinlog.TopicPartition{Topic: "t", Partition: int32(i)}
		s.topics = append(s.topics, tp)
		s.topicKeys = append(s.topicKeys, tp.String())
		s.consumers = append(s.consumers, &consumer{s: s, id: i, name: fmt.Sprintf("c%d", i), tp: tp})
	}
	for i := range 2 {
		s.producers = append(s.producers, &producer{s: s, id: s.producerBase + i})
	}
}

// startClients turns faults and producers on.
func (s *Sim) startClients() { s.faultsOn, s.producing = true, true }

// heal stops the faults, repairs links and restarts every broker, then runs
// until every partition is fully replicated (or HealMs passes) and checks the
// final logs against the history.
func (s *Sim) heal() {
	if s.failed {
		return
	}
	s.healStart()
	end := s.now + s.cfg.HealMs
	quiet := 0
	for !s.failed && s.now < end {
		s.tick()
		if s.quiescent() {
			quiet++
			if quiet > 200 {
				break
			}
		} else {
			quiet = 0
		}
	}
	s.healFinish()
}

// healStart turns faults and producers off, heals every link and starts
// every stopped broker.
func (s *Sim) healStart() {
	s.faultsOn = false
	s.producing = false
	s.tracef("heal: faults and producers off")
	for _, l := range s.net.sortedCuts() {
		delete(s.net.cuts, l)
	}
	for _, b := range s.brokers {
		if !b.up {
			b.start()
		}
	}
}

// healFinish runs the final checks: storage against the shadows, every
// acked write in the final logs (History.Final), liveness.
func (s *Sim) healFinish() {
	if s.failed {
		return
	}
	s.report.Healed = s.quiescent()
	s.fullCheck()
	for _, tp := range s.topics {
		key := tp.String()
		pr := s.ctl.image.Partition(tp.Topic, tp.Partition)
		if pr.GetLeader() < 1 {
			continue
		}
		b := s.brokers[pr.GetLeader()-1]
		p := b.parts[tp]
		if !b.up || p == nil || p.r.LeaderEpoch() != twinlog.Epoch(pr.GetLeaderEpoch()) {
			continue
		}
		final := map[int64]string{}
		for o := p.shadow.start; o < int64(p.r.HighWatermark()); o++ {
			if r, ok := p.shadow.at(o); ok {
				final[o] = r.value
			}
		}
		s.hist.Final(key, final, pr.GetLeaderEpoch())
		s.report.Checks["final-history"]++
	}
	s.finalGroupCheck()
	if s.failed {
		return
	}
	for _, v := range s.hist.Violations() {
		s.fail(v.Invariant, "%s: %s", v.Partition, v.Detail)
		break
	}
	if !s.report.Healed && !s.failed {
		s.fail("liveness: not healed", "%s", s.describe())
	}
}

// quiescent: every partition has a leader that all replicas follow, the ISR
// holds every replica and every replica has the leader's LEO and HW.
//
// A partition with a replica stalled by a known bug is skipped: without that
// replica the ISR may never reach m again.
func (s *Sim) quiescent() bool {
topics:
	for _, tp := range s.topics {
		pr := s.ctl.image.Partition(tp.Topic, tp.Partition)
		for _, id := range pr.GetReplicas() {
			if p := s.brokers[id-1].parts[tp]; p != nil && p.stalled {
				continue topics
			}
		}
		if pr.GetLeader() < 1 {
			return false
		}
		for _, id := range pr.GetReplicas() {
			if !slices.Contains(pr.GetIsr(), id) {
				return false
			}
		}
		lb := s.brokers[pr.GetLeader()-1]
		lp := lb.parts[tp]
		if !lb.up || lp == nil || lp.r.LeaderEpoch() != twinlog.Epoch(pr.GetLeaderEpoch()) || lp.r.HighWatermark() != lp.r.LogEndOffset() {
			return false
		}
		for _, id := range pr.GetReplicas() {
			b := s.brokers[id-1]
			p := b.parts[tp]
			if !b.up || p == nil || p.r.LogEndOffset() != lp.r.LogEndOffset() || p.r.HighWatermark() != lp.r.HighWatermark() {
				return false
			}
		}
	}
	return true
}

func (s *Sim) describe() string {
	var b strings.Builder
	for _, tp := range s.topics {
		pr := s.ctl.image.Partition(tp.Topic, tp.Partition)
		fmt.Fprintf(&b, "%s: L %d LE %d PE %d R %v ISR %v ELR %v LKE %v LKL %d %s\n", tp, pr.GetLeader(), pr.GetLeaderEpoch(), pr.GetPartitionEpoch(),
			pr.GetReplicas(), pr.GetIsr(), pr.GetElr(), pr.GetLastKnownElr(), pr.GetLastKnownLeader(), shortRecovery(pr.GetRecoveryState()))
		for _, id := range pr.GetReplicas() {
			br := s.brokers[id-1]
			if p := br.parts[tp]; br.up && p != nil {
				fmt.Fprintf(&b, "  broker %d: %v LE %d LEO %d HW %d epochs %v isr %v\n", id, p.r.Role(), p.r.LeaderEpoch(), p.r.LogEndOffset(), p.r.HighWatermark(), p.r.EpochEntries(), p.r.ISR())
			} else {
				fmt.Fprintf(&b, "  broker %d: up %t registered %t\n", id, br.up, br.registered)
			}
		}
	}
	for _, br := range s.ctl.image.Brokers() {
		sb := s.brokers[br.GetBrokerId()-1]
		applied := int64(-1)
		if sb.up {
			applied = sb.image.Offset()
		}
		fmt.Fprintf(&b, "broker record %d: epoch %d fenced %t shutdown %t; broker up %t metadata offset %d of %d\n", br.GetBrokerId(), br.GetBrokerEpoch(),
			br.GetFenced(), br.GetInControlledShutdown(), sb.up, applied, s.ctl.image.Offset())
	}
	return b.String()
}

// tick is one step: time moves, links heal, timers fire, due messages are
// delivered, the controller and brokers run their periodic work, clients act,
// faults strike, and the invariants are checked.
func (s *Sim) tick() {
	s.step++
	s.now += s.cfg.StepMs
	s.net.healExpired(s.now)
	s.fireTimers()
	for _, m := range s.net.due(s.now) {
		if s.failed {
			return
		}
		if s.net.cut(m.from, m.to) {
			s.report.Faults["drop-cut"]++
			continue
		}
		if !s.nodeUp(m.to) || s.incarnation(m.to) != m.toInc {
			continue
		}
		m.deliver()
	}
	if s.now >= s.nextCtlTick {
		s.nextCtlTick = s.now + s.cfg.ControllerTickMs
		s.ctl.tick()
	}
	for _, b := range s.brokers {
		b.timers()
	}
	if len(s.topics) > 0 {
		for _, pr := range s.producers {
			if s.producing && s.chance(s.cfg.ProduceProb) {
				pr.produce()
			}
		}
		for _, c := range s.consumers {
			if s.chance(s.cfg.ConsumeProb) {
				c.poll()
			}
		}
		s.groupClients()
	}
	if s.faultsOn {
		s.injectFaults()
	}
	if !s.failed {
		s.checkStep()
	}
	s.report.Checks["history"]++
	if vs := s.hist.Violations(); len(vs) > 0 && !s.failed {
		s.fail(vs[0].Invariant, "%s: %s", vs[0].Partition, vs[0].Detail)
	}
	if s.now >= s.nextFullCheck && !s.failed {
		s.nextFullCheck = s.now + 5000
		s.fullCheck()
	}
}

// fireTimers runs the due timers in (at, seq) order, those they arm for
// now included. s.timers is a binary min-heap on (at, seq).
func (s *Sim) fireTimers() {
	for len(s.timers) > 0 && s.timers[0].at <= s.now {
		t := s.timers[0]
		last := len(s.timers) - 1
		s.timers[0] = s.timers[last]
		s.timers[last] = simTimer{}
		s.timers = s.timers[:last]
		s.timerDown(0)
		t.fn()
	}
}

func (t simTimer) before(u simTimer) bool { return t.at < u.at || (t.at == u.at && t.seq < u.seq) }

func (s *Sim) timerDown(i int) {
	h := s.timers
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].before(h[c]) {
			c++
		}
		if !h[c].before(h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// after runs fn once d ms of simulated time have passed.
func (s *Sim) after(d int64, fn func()) {
	s.timerSeq++
	s.timers = append(s.timers, simTimer{at: s.now + d, seq: s.timerSeq, fn: fn})
	h := s.timers
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (s *Sim) nodeUp(n nodeID) bool {
	if n >= 1 && int(n) <= len(s.brokers) {
		return s.brokers[n-1].up
	}
	return true
}

func (s *Sim) incarnation(n nodeID) int {
	switch {
	case n == controllerNode:
		return s.ctl.inc
	case int(n) <= len(s.brokers):
		return s.brokers[n-1].inc
	}
	return 0
}

func (s *Sim) chance(p float64) bool { return s.rng.Float64() < p }

// once returns reply, which calls f the first time it is called, and arms
// the timeout: after ms, reply(timeout).
func (s *Sim) once(ms int64, timeout func()) (reply func(f func())) {
	answered := false
	reply = func(f func()) {
		if !answered {
			answered = true
			f()
		}
	}
	s.after(ms, func() { reply(timeout) })
	return reply
}

func (s *Sim) clock() time.Time { return time.UnixMilli(1_700_000_000_000 + s.now) }

// leaderFor is a client's Metadata answer: the image of a random running
// broker (possibly stale), else the controller's.
func (s *Sim) leaderFor(tp twinlog.TopicPartition) (int32, int32) {
	b := s.brokers[s.rng.IntN(len(s.brokers))]
	img := s.ctl.image
	if b.up && b.registered && b.image.Offset() > 0 {
		img = b.image
	}
	pr := img.Partition(tp.Topic, tp.Partition)
	if pr == nil {
		return -1, -1
	}
	return pr.GetLeader(), pr.GetLeaderEpoch()
}

// minISRNow is m = min(min.insync.replicas, |R|) of the topic now.
func (s *Sim) minISRNow(topic string) int {
	pr := s.ctl.image.Partition(topic, 0)
	return s.ctl.image.MinISR(topic, len(pr.GetReplicas()))
}

func (s *Sim) noteUnclean(tp string, le int32) {
	s.lastUnclean[tp] = max(s.lastUnclean[tp], le)
	s.trueHW[tp] = 0
}

// tracef appends one line to the trace: it feeds the run's hash (same seed,
// same hash) and the tail a failure prints.
func (s *Sim) tracef(format string, args ...any) {
	sink := s
	if s.traceSink != nil {
		sink = s.traceSink
	}
	sink.traceLine("t=" + strconv.FormatInt(s.now, 10) + " " + s.tracePrefix + fmt.Sprintf(format, args...))
}

func (s *Sim) traceLine(line string) {
	// FNV-1a (hash/fnv's New64a) of the previous hash's 8 bytes, little
	// endian, then the line; inline, without the hasher and []byte copy.
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for i := range 8 {
		h ^= uint64(byte(s.traceHash >> (8 * i)))
		h *= prime64
	}
	for i := 0; i < len(line); i++ {
		h ^= uint64(line[i])
		h *= prime64
	}
	s.traceHash = h
	s.trace = append(s.trace, line)
	if len(s.trace) > 2*s.cfg.TraceLines {
		s.trace = slices.Clone(s.trace[len(s.trace)-s.cfg.TraceLines:])
	}
	if s.cfg.Trace != nil {
		fmt.Fprintln(s.cfg.Trace, line)
	}
}

// fail records the first violation and stops the run.
func (s *Sim) fail(invariant, format string, args ...any) {
	if s.failed {
		return
	}
	s.failed = true
	detail := fmt.Sprintf(format, args...)
	s.tracef("VIOLATION %s: %s", invariant, firstLine(detail))
	tail := s.trace
	if s.traceSink != nil {
		tail = s.traceSink.trace
	}
	if len(tail) > s.cfg.TraceLines {
		tail = tail[len(tail)-s.cfg.TraceLines:]
	}
	s.failure = &Failure{Seed: s.cfg.Seed, Step: s.step, NowMs: s.now, Invariant: invariant, Detail: detail, Trace: slices.Clone(tail)}
	if s.w != nil {
		s.failure.Invariant = "[" + s.clusterID + "] " + invariant
		s.failure.Replay = "TestTwoClusterSeeds"
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// knownBug reports a known bug in another package (a skipped test in
// known_bugs_test.go replays it). Unless FailOnKnownBugs it is counted in
// Report.KnownBugs and the run goes on.
func (s *Sim) knownBug(p *simPart, name, format string, args ...any) {
	if s.cfg.FailOnKnownBugs {
		s.fail("known bug "+name, format, args...)
		return
	}
	if !p.knownBugs[name] {
		if p.knownBugs == nil {
			p.knownBugs = map[string]bool{}
		}
		p.knownBugs[name] = true
		s.report.KnownBugs[name]++
		s.tracef("known bug %s: %s", name, fmt.Sprintf(format, args...))
	}
}

// injectFaults draws this step's faults.
func (s *Sim) injectFaults() {
	cfg := s.cfg
	if s.chance(cfg.CrashProb) {
		if b := s.pickBroker(true); b != nil {
			s.report.Faults["crash"]++
			b.crash()
			s.after(int64(100+s.rng.IntN(3000)), func() {
				if !b.up {
					b.start()
				}
			})
		}
	}
	if s.chance(cfg.CleanRestartProb) {
		if b := s.pickBroker(true); b != nil && b.registered {
			s.report.Faults["clean-restart"]++
			b.stopClean()
			s.after(int64(50+s.rng.IntN(1500)), func() {
				if !b.up {
					b.start()
				}
			})
		}
	}
	if s.chance(cfg.CutProb) {
		a := nodeID(s.rng.IntN(len(s.brokers) + 1))
		c := nodeID(s.rng.IntN(len(s.brokers) + 1))
		if a != c {
			s.report.Faults["link-cut"]++
			heal := s.now + int64(100+s.rng.IntN(4000))
			s.net.cuts[link(a, c)] = heal
			s.tracef("cut link %d-%d until %d", a, c, heal)
		}
	}
	if s.chance(cfg.IsolateProb) {
		a := nodeID(1 + s.rng.IntN(len(s.brokers)))
		s.report.Faults["isolate"]++
		heal := s.now + int64(200+s.rng.IntN(3000))
		for c := nodeID(0); int(c) <= len(s.brokers); c++ {
			if c != a {
				s.net.cuts[link(a, c)] = heal
			}
		}
		for _, pr := range s.producers {
			s.net.cuts[link(a, pr.node())] = heal
		}
		for _, c := range s.consumers {
			s.net.cuts[link(a, c.node())] = heal
		}
		s.tracef("isolate broker %d until %d", a, heal)
	}
	if s.chance(cfg.ControllerRestartProb) {
		s.ctl.restart()
	}
	if s.chance(cfg.ControllerCompactProb) {
		s.ctl.compact()
	}
	if s.chance(cfg.ConfigFlipProb) {
		s.report.Faults["config-flip"]++
		key, val := metadata.KeyMinInsyncReplicas, strconv.Itoa(1+s.rng.IntN(3))
		if s.chance(0.5) {
			key, val = metadata.KeyUncleanLeaderElection, strconv.FormatBool(s.chance(0.3))
		}
		s.tracef("config %s=%s", key, val)
		s.ctl.do("config "+key, func(st *metastate.State) *pb.MetadataDelta {
			d, _ := st.AlterConfigs(&pb.AlterConfigsRequest{Resources: []*pb.AlterConfigsResource{{
				Resource: &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_CLUSTER},
				Set:      map[string]string{key: val}}}})
			return d
		})
		if key == metadata.KeyMinInsyncReplicas {
			s.lastMinISRChange = s.ctl.image.Offset()
		}
	}
	if s.chance(cfg.PreferredElectionProb) {
		s.report.Faults["preferred-election"]++
		s.ctl.do("elect-preferred", func(st *metastate.State) *pb.MetadataDelta {
			d, _ := st.ElectLeaders(&pb.ElectLeadersRequest{Type: pb.ElectionType_ELECTION_TYPE_PREFERRED}, s.now)
			return d
		})
	}
}

func (s *Sim) pickBroker(up bool) *simBroker {
	var c []*simBroker
	for _, b := range s.brokers {
		if b.up == up {
			c = append(c, b)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[s.rng.IntN(len(c))]
}

// errText is a response's error for traces. Not the message's %v: the
// protobuf text format varies its spacing from binary to binary on
// purpose, which would make a seed's trace hash differ between builds of
// the same logic.
func errText(m interface {
	GetError() pb.ErrorCode
	GetErrorMessage() string
}) string {
	return fmt.Sprintf("%s %q", shortCode(m.GetError()), m.GetErrorMessage())
}
