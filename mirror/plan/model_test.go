package plan_test

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/storage/epoch"
)

// This file is a small pure two-cluster model: each cluster is one partition
// leader log (one record per batch) with an epoch cache, a leader epoch, a
// __mirror_state table and, when it is a mirror destination, a plan.Machine
// whose actions the model performs synchronously (the "shell").

const topicID = "tid-1"

type rec struct {
	off    twinlog.Offset
	ep     twinlog.Epoch
	origin byte
}

func (r rec) String() string { return fmt.Sprintf("%d@%d%c", r.off, r.ep, r.origin) }

// plog implements plan.Log.
type plog struct {
	recs    []rec
	cache   *epoch.Cache
	start   twinlog.Offset
	hwLag   int64 // HW = LEO − hwLag (a slow ISR)
	aligned twinlog.Epoch
}

func newLog() *plog {
	c, _ := epoch.NewCache(nil)
	return &plog{cache: c, aligned: twinlog.NoEpoch}
}

func (l *plog) EpochCache() *epoch.Cache       { return l.cache }
func (l *plog) LogStartOffset() twinlog.Offset { return l.start }
func (l *plog) AlignedEpoch() twinlog.Epoch    { return l.aligned }
func (l *plog) HighWatermark() twinlog.Offset {
	return max(l.start, l.LogEndOffset()-twinlog.Offset(l.hwLag))
}
func (l *plog) LogEndOffset() twinlog.Offset {
	if len(l.recs) == 0 {
		return l.start
	}
	return l.recs[len(l.recs)-1].off + 1
}

func (l *plog) String() string {
	parts := make([]string, len(l.recs))
	for i, r := range l.recs {
		parts[i] = r.String()
	}
	return strings.Join(parts, " ")
}

func (l *plog) append(r rec) {
	if r.off != l.LogEndOffset() {
		panic(fmt.Sprintf("append %v at LEO %d", r, l.LogEndOffset()))
	}
	l.recs = append(l.recs, r)
	l.cache.Assign(r.ep, r.off)
}

func (l *plog) truncateTo(o twinlog.Offset) {
	for len(l.recs) > 0 && l.recs[len(l.recs)-1].off >= o {
		l.recs = l.recs[:len(l.recs)-1]
	}
	l.cache.TruncateFromEnd(o)
}

type maxRand struct{}

func (maxRand) IntN(n int) int { return n - 1 }

// fataler is *testing.T or *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

type cluster struct {
	t        fataler
	name     byte
	id       string
	self     twinlog.BrokerID
	log      *plog
	le       twinlog.Epoch
	up       bool // reachable from the other cluster
	writable bool
	peer     *cluster
	m        *plan.Machine
	desired  plan.Desired
	status   plan.ReplicaStatus
	nowMs    int64

	runs  plan.StateTable[plan.RunKey, *twinlogv1.MirrorRunRecord]
	lmles plan.StateTable[plan.LmleKey, *twinlogv1.MirrorLmleRecord]

	// observations
	bumps       []twinlog.Epoch
	truncations []plan.TruncateReason
	answers     []twinlog.Epoch
	actions     []plan.Action
	taints      map[twinlog.BrokerID]plan.Taint
	failed      int
	stopResults []twinlogv1.ErrorCode

	// truncPts are the controller's truncation points (SPEC §6.2f), passed
	// to BecameLeader; loseBumps answers that many committed bumps with
	// REQUEST_TIMED_OUT (the answer was lost).
	truncPts  []plan.TruncationPoint
	loseBumps int

	// maximalISR is the replica's maximal ISR as of now, which the last
	// status the machine got may not show yet (nil: the status's).
	maximalISR []twinlog.BrokerID

	// holdWrites keeps __mirror_state writes unacknowledged in held.
	holdWrites bool
	held       []plan.Event
	session    uint64
	minSrcLE   twinlog.Epoch // the session's StartFetcher.MinSourceLeaderEpoch
	fetching   bool
}

func newCluster(t fataler, name byte) *cluster {
	return &cluster{t: t, name: name, id: strings.ToUpper(string(name)), self: 1, log: newLog(), up: true,
		writable: true, taints: map[twinlog.BrokerID]plan.Taint{},
		status: plan.ReplicaStatus{Replicas: []twinlog.BrokerID{1}, ISR: []twinlog.BrokerID{1}, MinInsyncReplicas: 1}}
}

func link(a, b *cluster) { a.peer, b.peer = b, a }

// mirroredPair is A at LE le holding n records and B, linked to it, that
// has mirrored them all in generation 1 and is idle.
func mirroredPair(t fataler, le twinlog.Epoch, n int) (a, b *cluster) {
	a, b = newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.le = le
	a.mustProduce(n)
	b.mirrorFrom(1, plan.Config{})
	b.fetchUntilIdle()
	return a, b
}

func (c *cluster) runKey() plan.RunKey {
	return plan.RunKey{Mirror: "m", TopicID: topicID, Partition: 0}
}
func (c *cluster) lmleKey() plan.LmleKey { return plan.LmleKey{TopicID: topicID, Partition: 0} }

func (c *cluster) runRecord() *twinlogv1.MirrorRunRecord {
	r, _ := c.runs.Get(c.runKey())
	return r
}

func (c *cluster) lmleRecord() *twinlogv1.MirrorLmleRecord {
	r, _ := c.lmles.Get(c.lmleKey())
	return r
}

// produce appends one record at the current LE if the partition is writable.
func (c *cluster) produce() twinlogv1.ErrorCode {
	if !c.writable {
		return twinlogv1.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC
	}
	c.log.append(rec{off: c.log.LogEndOffset(), ep: c.le, origin: c.name})
	return twinlogv1.ErrorCode_ERROR_CODE_NONE
}

func (c *cluster) mustProduce(n int) {
	c.t.Helper()
	for range n {
		if e := c.produce(); e != twinlogv1.ErrorCode_ERROR_CODE_NONE {
			c.t.Fatalf("%s: produce: %v", c.id, e)
		}
	}
}

// leaderChange moves leadership to a new LE (same log in this model).
func (c *cluster) leaderChange() {
	c.le++
	if c.m != nil {
		c.step(plan.LostLeadership{})
		c.becomeLeader()
	} else if c.writable {
		c.log.cache.Assign(c.le, c.log.LogEndOffset())
	}
}

func (c *cluster) ensureMachine(cfg plan.Config) {
	if c.m != nil {
		return
	}
	cfg.BrokerID, cfg.Mirror, cfg.TopicID = c.self, "m", topicID
	cfg.TopicPartition = twinlog.TopicPartition{Topic: "t", Partition: 0}
	m, err := plan.New(cfg, plan.Deps{Log: c.log, Rand: maxRand{}})
	if err != nil {
		c.t.Fatalf("%v", err)
	}
	c.m = m
}

func (c *cluster) becomeLeader() {
	c.step(plan.ReplicaStatusChanged{Status: c.status})
	c.step(plan.BecameLeader{LeaderEpoch: c.le, Run: c.runRecord(), Lmle: c.lmleRecord(), Desired: c.desired, TruncationPoints: c.truncPts})
}

// mirrorFrom makes c a mirror of its peer (creating the machine as a new
// leader if needed, else through Start).
func (c *cluster) mirrorFrom(gen int64, cfg plan.Config) {
	c.t.Helper()
	c.desired = plan.Desired{State: plan.Mirroring, Generation: gen, SourceClusterID: c.peer.id}
	if c.m == nil {
		c.ensureMachine(cfg)
		c.becomeLeader()
		return
	}
	if err := c.m.Step(plan.Start{Generation: gen, SourceClusterID: c.peer.id}); err != nil {
		c.t.Fatalf("%s: start: %v", c.id, err)
	}
	c.drive()
}

func (c *cluster) stop() {
	c.t.Helper()
	c.desired.State = plan.Stopped
	if err := c.m.Step(plan.Stop{}); err != nil {
		c.t.Fatalf("%s: stop: %v", c.id, err)
	}
	c.drive()
}

func (c *cluster) step(ev plan.Event) {
	c.t.Helper()
	if err := c.m.Step(ev); err != nil {
		c.t.Fatalf("%s: step %T: %v", c.id, ev, err)
	}
	c.drive()
}

func (c *cluster) tick(now int64) {
	c.nowMs = now
	c.step(plan.Tick{NowMs: now})
}

// releaseWrites acknowledges held writes.
func (c *cluster) releaseWrites() {
	held := c.held
	c.held = nil
	for _, ev := range held {
		c.step(ev)
	}
}

// drive performs every ready action and feeds the results back.
func (c *cluster) drive() {
	for c.m.HasReady() {
		rd := c.m.Ready()
		c.m.Advance()
		var evs []plan.Event
		for _, a := range rd.Actions {
			c.actions = append(c.actions, a)
			if ev := c.perform(a); ev != nil {
				evs = append(evs, ev)
			}
		}
		for _, ev := range evs {
			if err := c.m.Step(ev); err != nil {
				c.t.Fatalf("%s: step %T: %v", c.id, ev, err)
			}
		}
	}
}

func (c *cluster) perform(a plan.Action) plan.Event {
	switch a := a.(type) {
	case plan.QueryLMLE:
		if !c.peer.up {
			return plan.LMLEAnswer{Seq: a.Seq, Error: twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT}
		}
		l, code := plan.AnswerLastMirroredEpoch(c.id, topicID, c.peer.sourceView())
		if code == twinlogv1.ErrorCode_ERROR_CODE_NONE {
			c.answers = append(c.answers, l)
		}
		return plan.LMLEAnswer{Seq: a.Seq, LMLE: l, Error: code}
	case plan.BumpLeaderEpoch:
		if a.LeaderEpoch != c.le {
			return plan.BumpFailed{Seq: a.Seq, Error: twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH}
		}
		c.le = max(c.le+1, a.MinLeaderEpoch)
		c.bumps = append(c.bumps, c.le)
		if a.TruncationOffset >= 0 {
			c.truncPts = append(c.truncPts, plan.TruncationPoint{LeaderEpoch: c.le, Offset: a.TruncationOffset})
		}
		if c.loseBumps > 0 {
			c.loseBumps--
			return plan.BumpFailed{Seq: a.Seq, Error: twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT}
		}
		return plan.BumpDone{Seq: a.Seq, LeaderEpoch: c.le}
	case plan.TruncateTo:
		c.truncations = append(c.truncations, a.Reason)
		c.log.truncateTo(a.Offset)
		return plan.TruncationDone{Seq: a.Seq}
	case plan.TruncateFully:
		c.truncations = append(c.truncations, a.Reason)
		c.log.recs = nil
		c.log.cache.Clear()
		c.log.start = a.RestartAt
		return plan.TruncationDone{Seq: a.Seq}
	case plan.SetAlignedEpoch:
		c.log.aligned = a.Epoch
	case plan.WriteRunRecord:
		if a.Record.StateEpoch != int32(c.le) {
			c.t.Fatalf("%s: run record stateEpoch %d, LE %d", c.id, a.Record.StateEpoch, c.le)
		}
		c.runs.Apply(c.runKey(), a.Record)
		return c.ack(a.Seq)
	case plan.WriteLmleRecord:
		if a.Record.StateEpoch != int32(c.le) {
			c.t.Fatalf("%s: lmle record stateEpoch %d, LE %d", c.id, a.Record.StateEpoch, c.le)
		}
		c.lmles.Apply(c.lmleKey(), a.Record)
		return c.ack(a.Seq)
	case plan.StartFetcher:
		c.session, c.fetching, c.minSrcLE = a.Session, true, a.MinSourceLeaderEpoch
	case plan.StopFetcher:
		if a.Session == c.session {
			c.fetching = false
		}
	case plan.SetWritable:
		c.writable = a.Writable
		if a.Writable {
			c.log.cache.Assign(c.le, c.log.LogEndOffset()) // SPEC §6.7 step 5
		}
	case plan.FailPendingProduces:
		c.failed++
	case plan.AddTaints:
		// The replica refuses a run's taints (Seq > 0) of a member of its
		// maximal ISR, the status possibly not showing it yet.
		var refused []twinlog.BrokerID
		for _, t := range a.Taints {
			if a.Seq > 0 && (slices.Contains(c.maximalISR, t.Replica) || slices.Contains(c.status.ISR, t.Replica)) {
				refused = append(refused, t.Replica)
			}
		}
		if len(refused) == 0 {
			for _, t := range a.Taints {
				c.taints[t.Replica] = t
			}
		}
		if a.Seq > 0 {
			return plan.TaintsAdded{Seq: a.Seq, Refused: refused}
		}
	case plan.ClearTaint:
		delete(c.taints, a.Replica)
	case plan.StopResult:
		c.stopResults = append(c.stopResults, a.Error)
	case plan.Transition:
	default:
		c.t.Fatalf("unknown action %T", a)
	}
	return nil
}

func (c *cluster) ack(seq uint64) plan.Event {
	if c.holdWrites {
		c.held = append(c.held, plan.WriteAcked{Seq: seq})
		return nil
	}
	return plan.WriteAcked{Seq: seq}
}

func (c *cluster) sourceView() plan.SourceView {
	v := plan.SourceView{
		HasStateTopic: c.runs.Len() > 0 || c.lmles.Len() > 0,
		StateLeader:   true, CaughtUp: true, LocalTopicID: topicID, PartitionCount: 1,
		InMirror:     c.desired.State != plan.NotStarted,
		DesiredState: c.desired.State,
		Record:       c.lmleRecord(),
	}
	if r := c.runRecord(); r != nil {
		v.RunState = r.State
	}
	return v
}

// fetchOutcome is what one mirror fetch did.
type fetchOutcome struct {
	req plan.FetchRequest
	ev  plan.Event
}

// fetch runs one Fetch{MIRROR} from the peer (SPEC §4.3 for the serving
// side, §6.2/§6.3 for the destination) and feeds its outcome to the machine.
func (c *cluster) fetch() fetchOutcome {
	c.t.Helper()
	if !c.fetching {
		c.t.Fatalf("%s: fetch without a fetcher (state %v)", c.id, c.m.State())
	}
	s := c.peer
	// The model's source is never a zombie: a floor above its leader's LE
	// would stop a run that may fetch.
	if !plan.SourceLeaderEpochUsable(0, c.minSrcLE, s.le) {
		c.t.Fatalf("%s: source LE %d below the run's floor %d (lmleUsed %d)", c.id, s.le, c.minSrcLE, c.runRecord().GetLmleUsed())
	}
	req := plan.MirrorFetchRequest(s.le, c.log.cache.Latest(), c.log.LogEndOffset())
	out := fetchOutcome{req: req}
	out.ev = c.serve(s, req)
	c.step(out.ev)
	return out
}

func (c *cluster) serve(s *cluster, req plan.FetchRequest) plan.Event {
	sess := c.session
	switch {
	case !s.up:
		return plan.FetchError{Session: sess, Error: twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT}
	case !s.writable:
		return plan.FetchError{Session: sess, Error: twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_SOURCE}
	case req.CurrentLeaderEpoch >= 0 && req.CurrentLeaderEpoch < s.le:
		return plan.FetchError{Session: sess, Error: twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH}
	case req.FetchOffset < s.log.start:
		return plan.FetchOutOfRange{Session: sess, SourceLogStartOffset: s.log.start}
	}
	if req.LastFetchedEpoch >= 0 {
		e, o := s.log.cache.EndOffsetFor(req.LastFetchedEpoch, s.log.LogEndOffset())
		if e < req.LastFetchedEpoch || o < req.FetchOffset {
			return plan.FetchDiverging{Session: sess, Epoch: e, EndOffset: o}
		}
	}
	if req.FetchOffset > s.log.LogEndOffset() {
		return plan.FetchOutOfRange{Session: sess, SourceLogStartOffset: s.log.start}
	}
	hw := s.log.HighWatermark()
	var batch []rec
	for _, r := range s.log.recs {
		if r.off >= req.FetchOffset && r.off < hw {
			batch = append(batch, r)
		}
	}
	bs := make([]plan.FetchedBatch, len(batch)) // one record per batch
	for i, r := range batch {
		bs[i] = plan.FetchedBatch{BaseOffset: r.off, LastOffset: r.off, Epoch: r.ep}
	}
	ap, err := plan.PlanAppend(sess, bs, plan.LeaderLog{LogEndOffset: c.log.LogEndOffset(), LeaderEpoch: c.le, LatestEpoch: c.log.cache.Latest()},
		req.CurrentLeaderEpoch, s.log.start)
	if err != nil {
		return plan.FetchError{Session: sess, Error: twinlogv1.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE, Message: err.Error()}
	}
	for _, r := range batch[ap.Skip : ap.Skip+ap.Append] {
		c.log.append(r)
	}
	if ap.End != nil {
		return ap.End
	}
	return plan.Fetched{Session: sess, SourceHighWatermark: hw, SourceLogEndOffset: s.log.LogEndOffset(), NowMs: c.nowMs}
}

// fetchUntilIdle fetches until a fetch appends nothing and needs nothing.
func (c *cluster) fetchUntilIdle() {
	c.t.Helper()
	for range 20 {
		before := c.log.String()
		out := c.fetch()
		if _, ok := out.ev.(plan.Fetched); ok && c.log.String() == before {
			return
		}
	}
	c.t.Fatalf("%s: fetch did not settle", c.id)
}

func (c *cluster) checkLog(want string) {
	c.t.Helper()
	if got := c.log.String(); got != want {
		c.t.Fatalf("%s log = %q, want %q", c.id, got, want)
	}
}

func (c *cluster) checkLE(want twinlog.Epoch) {
	c.t.Helper()
	if c.le != want {
		c.t.Fatalf("%s LE = %d, want %d", c.id, c.le, want)
	}
}

func (c *cluster) checkState(want twinlogv1.MirrorState) {
	c.t.Helper()
	if got := c.m.State(); got != want {
		c.t.Fatalf("%s state = %v, want %v (lastError %q)", c.id, got, want, c.m.Status().LastError)
	}
}
