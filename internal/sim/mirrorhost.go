package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/runner"
	"github.com/twinlog/twinlog/mirror/source"
	"github.com/twinlog/twinlog/mirror/state"
	"github.com/twinlog/twinlog/storage"
)

// The simulator hosts the shipped mirror runner (mirror/runner.Runner) as
// broker/mirror.go does, with the world behind its Env: the other
// cluster's brokers over the cross-cluster network, the cluster's
// controller and __mirror_state over its own network, timers on the
// simulated clock. The world turns every live runner once per step. The
// runner's Observer hooks carry the checks that watch it (§8.15, §8.19,
// §6.2f, §6.4, the stale leadership) and the trace.

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
					w.byPart[p] = w.newRunner(s, p)
					w.runners = append(w.runners, w.byPart[p])
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

// mirrorRunner hosts one partition's runner.Runner.
type mirrorRunner struct {
	w   *world
	s   *Sim
	p   *simPart
	rn  *runner.Runner
	src *source.Client

	// owedLE: BecameLeader was stepped in this LE, which carries a
	// truncation point (a bump whose answer was lost); the machine must
	// truncate before anything else (checkOwed). −1 none.
	owedLE twinlog.Epoch
	// served: what the source served for the answers the runner may yet
	// append (the §8.15 checks of AppendMirrored), the latest
	// maxServed of them (answers of ended sessions are never appended).
	served     map[any]servedBy // by *pb.FetchPartitionResponse, then *runner.Answer
	servedFIFO []any
}

type servedBy struct {
	recs map[int64]shadowRec
	hw   twinlog.Offset
	src  *Sim
}

func (w *world) newRunner(s *Sim, p *simPart) *mirrorRunner {
	r := &mirrorRunner{w: w, s: s, p: p, owedLE: twinlog.NoEpoch, served: map[any]servedBy{}}
	r.rn = runner.New(runner.Config{
		Self: twinlog.BrokerID(p.b.id), TopicPartition: p.tp, TopicID: p.topicID, Tick: 50 * time.Millisecond,
		Pace: r.pace, Stop: func() bool { return s.failed },
	}, simEnv{r}, simMirrorPart{r}, simObserver{r})
	r.src = source.New(simSource{r}, nil, time.Duration(s.cfg.RPCTimeoutMs)*time.Millisecond)
	return r
}

func (r *mirrorRunner) core() *runner.Core { return r.rn.Core() }

func (r *mirrorRunner) live() bool {
	return r.w.byPart[r.p] == r && r.p.b.up && r.p.b.parts[r.p.tp] == r.p
}

// post hands the runner an event (broker/mirror.go post).
func (r *mirrorRunner) post(ev plan.Event) {
	if r.live() {
		r.rn.Post(ev)
	}
}

// run is one turn of the runner, then the check of an owed truncation.
func (r *mirrorRunner) run() {
	r.rn.Turn()
	r.checkOwed()
}

// checkOwed runs after a turn in which BecameLeader was stepped in an LE
// with a truncation point (the runner truncates synchronously): the machine
// must have truncated in that LE, else the replica answers every follower
// fetch UNKNOWN_LEADER_EPOCH for the whole LE (SPEC §6.2f).
func (r *mirrorRunner) checkOwed() {
	s, p := r.s, r.p
	if r.owedLE < 0 {
		return
	}
	le := r.owedLE
	r.owedLE = twinlog.NoEpoch
	c := r.core()
	if !r.live() || !c.Leadership.Leading || c.M == nil || !c.M.Leading() || p.r.Role() != replica.RoleLeader || p.r.LeaderEpoch() != le {
		return
	}
	s.fail("§6.2f truncation point not executed", "broker %d %s: BecameLeader in LE %d, which carries a truncation point (%v), left it undone: follower fetches get UNKNOWN_LEADER_EPOCH for the whole LE",
		p.b.id, p.key, le, p.b.image.Partition(p.tp.Topic, p.tp.Partition).GetTruncationPoints())
}

// pace is the wait after an answer: the simulated source answers at once
// (no long-poll), so an empty answer waits a while before the next fetch.
func (r *mirrorRunner) pace(empty bool) time.Duration {
	if !empty {
		return time.Millisecond
	}
	return time.Duration(10+r.w.rng.IntN(40)) * time.Millisecond
}

// errNoAnswer is an RPC whose answer did not come in time.
var errNoAnswer = errors.New("no answer")

// errSimFailed ends a fetch session once a check has failed the run.
var errSimFailed = errors.New("sim: run failed")

// simEnv is the runner's world (runner.Env).
type simEnv struct{ r *mirrorRunner }

func (e simEnv) NowMs() int64    { return e.r.s.now }
func (e simEnv) Rand() plan.Rand { return e.r.s.rng }
func (e simEnv) Wake()           {} // the world turns every runner each step
func (e simEnv) After(d time.Duration, f func()) {
	e.r.s.after(d.Milliseconds(), f)
}

func (e simEnv) Observe() runner.Observation {
	b, tp := e.r.p.b, e.r.p.tp
	view := runner.ViewOf(b.image, tp.Topic)
	view.Desired.SourceClusterID = e.r.src.Track(view.Bootstrap, view.Desired.SourceClusterID)
	return runner.Observation{View: view, Record: b.image.Partition(tp.Topic, tp.Partition)}
}

func (e simEnv) MachineConfig() plan.Config {
	return plan.Config{PendingTimeoutMs: 4000, RetryInitialBackoffMs: 100, RetryMaxBackoffMs: 2000, RetryMaxAttempts: 1 << 30}
}

// LoadState reads the partition's records with the broker's state.Store
// (mirrorEnv.LoadState).
func (e simEnv) LoadState(mirror string, done func(*pb.MirrorRunRecord, *pb.MirrorLmleRecord, error)) {
	p := e.r.p
	p.b.mstate.Load(p.tp.Topic, mirror, p.topicID, p.tp.Partition, done)
}

// WriteState appends the record through the state partition's leader
// (mirrorEnv.WriteState).
func (e simEnv) WriteState(ws runner.StateWrite, done func(error)) {
	p := e.r.p
	p.b.s.tracef("mirror %s broker %d: write %s", p.key, p.b.id, describeWrite(ws))
	key, value := state.Entry(ws.Mirror, p.topicID, p.tp.Partition, ws.Run, ws.Lmle)
	sp, batch, err := p.b.mstate.Record(p.tp.Topic, key, value)
	if err != nil {
		done(err)
		return
	}
	p.b.writeState(batch, sp, done)
}

// QueryLMLE asks the other cluster for the partition's LMLE with the
// runner's mirror/source.Client (mirrorEnv.QueryLMLE), over simSource.
func (e simEnv) QueryLMLE(done func(twinlog.Epoch, pb.ErrorCode)) {
	r := e.r
	s, p := r.s, r.p
	r.w.rep.LMLEQueries++
	r.src.LastMirroredEpoch(context.Background(), s.clusterID, p.topicID, p.tp, func(lmle twinlog.Epoch, code pb.ErrorCode, err error) {
		if err != nil {
			lmle, code = twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
		}
		s.tracef("mirror %s broker %d: lmle from %s: %d %s (%v)", p.key, p.b.id, r.w.other(s).clusterID, lmle, shortCode(code), err)
		done(lmle, code)
	})
}

// Bump sends BumpLeaderEpoch to the cluster's controller shell.
func (e simEnv) Bump(a plan.BumpLeaderEpoch, done func(twinlog.Epoch, pb.ErrorCode)) {
	r := e.r
	s, p, b, w := r.s, r.p, r.p.b, r.w
	w.rep.Bumps++
	if cur := r.core().M.LeaderEpoch(); a.LeaderEpoch < cur {
		// plan.Machine re-emitted a failed bump as first requested, with
		// the LE it had then, after a late BumpDone raised its LE: the
		// controller answers FENCED_LEADER_EPOCH forever (fixed).
		s.knownBug(p, "plan-bump-retry-stale-le", "broker %d %s: bump retried with LE %d, the machine knows LE %d (min %d, truncation %d)",
			b.id, p.key, a.LeaderEpoch, cur, a.MinLeaderEpoch, a.TruncationOffset)
		if !s.cfg.FailOnKnownBugs {
			a.LeaderEpoch = cur
		}
	}
	req := &pb.BumpLeaderEpochRequest{BrokerId: b.id, BrokerEpoch: b.epoch, Topic: p.tp.Topic, Partition: p.tp.Partition,
		LeaderEpoch: int32(a.LeaderEpoch), MinLeaderEpoch: int32(a.MinLeaderEpoch), TruncationOffset: int64(a.TruncationOffset)}
	reply := s.once(s.cfg.RPCTimeoutMs, func() { done(twinlog.NoEpoch, pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT) })
	s.tracef("mirror %s broker %d: bump LE %d min %d truncation %d", p.key, b.id, a.LeaderEpoch, a.MinLeaderEpoch, a.TruncationOffset)
	s.net.send(b.node(), controllerNode, "bump-leader-epoch", func() {
		c := s.ctl
		resp := rpc(c, fmt.Sprintf("bump %d", b.id), true, brokerCaller(b.s, int32(b.id), pb.ControllerService_BumpLeaderEpoch_FullMethodName), c.svc.BumpLeaderEpoch, req)
		if resp.GetError() == pb.ErrorCode_ERROR_CODE_NONE && req.GetTruncationOffset() >= 0 {
			w.recordTruncationPoint(s, p.key, resp.GetLeaderEpoch(), req.GetTruncationOffset())
		}
		s.net.send(controllerNode, b.node(), "bump-leader-epoch-resp", func() {
			reply(func() { done(twinlog.Epoch(resp.GetLeaderEpoch()), resp.GetError()) })
		})
	})
}

// SourceLeader resolves the source leader with the runner's
// mirror/source.Client (mirrorEnv.SourceLeader).
func (e simEnv) SourceLeader(refresh bool, done func(runner.SourceLeader, pb.ErrorCode, error)) {
	r := e.r
	r.src.Leader(context.Background(), r.p.tp, refresh, func(pl source.PartitionLeader, code pb.ErrorCode, err error) {
		done(runner.SourceLeader{TopicID: pl.TopicID, Leader: pl.Leader, LeaderEpoch: pl.LeaderEpoch, Addr: pl.Addr}, code, err)
	})
}

// Fetch sends the session's Fetch{MIRROR} with the runner's
// mirror/source.Client (mirrorEnv.Fetch); what the source served is kept
// for the §8.15 checks of AppendMirrored.
func (e simEnv) Fetch(step runner.SendFetch, done func(*runner.Answer, error)) {
	r := e.r
	s, p := r.s, r.p
	req := source.FetchRequest{
		RequesterClusterID: s.clusterID, TopicPartition: p.tp, TopicID: p.topicID,
		FetchOffset: step.Request.FetchOffset, CurrentLeaderEpoch: step.Request.CurrentLeaderEpoch, LastFetchedEpoch: step.Request.LastFetchedEpoch,
		MaxBytes: int32(1 + r.w.rng.IntN(2400)),
	}
	r.src.Fetch(context.Background(), step.Leader.Addr, req, func(pr *pb.FetchPartitionResponse, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		a := runner.AnswerOf(pr)
		r.answered(pr, a)
		done(a, nil)
	})
}

// simSource is a runner's source.Transport: the other cluster's brokers
// over the cross-cluster network. An address names a broker as it
// registered ("<cluster>:<9092+id>"), or the source cluster by its id (a
// mirror's bootstrap in the simulator): any running broker of it, as a
// load balancer would pick. A broker answers if it is running (registered
// or not, as a broker's listener does); a request or answer lost, or a
// broker down, is no answer by the deadline.
type simSource struct{ r *mirrorRunner }

// target is the broker addr names, nil if none.
func (t simSource) target(addr string) *simBroker {
	src := t.r.w.other(t.r.s)
	if addr == src.clusterID {
		return src.pickBrokerW(t.r.w)
	}
	if c, b := t.r.w.addressed(addr); c == src {
		return b
	}
	return nil
}

// xcall carries one request (RPC method with req) to the broker at addr
// and its answer back: that broker's authorizer admits it (as the
// destination broker's principal) and answer runs there and hands its
// answer, or its refusal, to reply; done gets it, or errNoAnswer once
// timeout passes first.
func xcall[Resp any](t simSource, addr string, timeout time.Duration, kind, method string, req any, answer func(src *Sim, sb *simBroker, reply func(Resp, error)), done func(Resp, error)) {
	r := t.r
	s, w := r.s, r.w
	reply := s.once(timeout.Milliseconds(), func() {
		var none Resp
		done(none, errNoAnswer)
	})
	sb := t.target(addr)
	if sb == nil {
		return
	}
	src := w.other(s)
	principal := s.brokerPrincipal(r.p.b.id)
	w.xsend(src, sb.node(), kind, func() {
		back := func(resp Resp, err error) {
			w.xsend(s, r.p.b.node(), kind+"-resp", func() { reply(func() { done(resp, err) }) })
		}
		if err := sb.admit(principal, method, req); err != nil {
			var none Resp
			back(none, err)
			return
		}
		answer(src, sb, back)
	})
}

// Metadata is answered from the broker's image (broker.Metadata); a
// broker that has not loaded it answers Unavailable.
func (t simSource) Metadata(_ context.Context, addr string, timeout time.Duration, req *pb.MetadataRequest, done func(*pb.MetadataResponse, error)) {
	xcall(t, addr, timeout, "source-metadata", pb.FetchService_Metadata_FullMethodName, req, func(src *Sim, sb *simBroker, reply func(*pb.MetadataResponse, error)) {
		resp, err := sb.image.Metadata(req)
		t.r.s.tracef("mirror %s broker %d: source %s broker %d answers metadata at offset %d: %v",
			t.r.p.key, t.r.p.b.id, src.clusterID, sb.id, sb.image.Offset(), err)
		if err == nil {
			resp.ClusterId = src.clusterID
		}
		reply(resp, err)
	}, done)
}

// Fetch is answered by the broker's fetch evaluation; the records served
// are checked (§8.17, §8.15) and kept for AppendMirrored's checks.
func (t simSource) Fetch(_ context.Context, addr string, timeout time.Duration, req *pb.FetchRequest, done func(*pb.FetchResponse, error)) {
	r := t.r
	xcall(t, addr, timeout, "mirror-fetch", pb.FetchService_Fetch_FullMethodName, req, func(src *Sim, sb *simBroker, reply func(*pb.FetchResponse, error)) {
		resp := sb.serveFetch(req, int(req.GetMaxBytes()))
		pr := resp.GetPartitions()[0]
		served := r.w.checkServed(src, sb, r.p.tp, req, pr)
		r.keepServed(pr, servedBy{recs: served, hw: twinlog.Offset(pr.GetHighWatermark()), src: src})
		reply(resp, nil)
	}, done)
}

// LastMirroredEpochs is answered by the broker's state.Store
// (broker.GetLastMirroredEpochs); a broker whose metadata has not reached
// the request's offset answers Unavailable.
func (t simSource) LastMirroredEpochs(_ context.Context, addr string, timeout time.Duration, req *pb.GetLastMirroredEpochsRequest, done func(*pb.GetLastMirroredEpochsResponse, error)) {
	xcall(t, addr, timeout, "get-last-mirrored-epochs", pb.MirrorSourceService_GetLastMirroredEpochs_FullMethodName, req, func(_ *Sim, sb *simBroker, reply func(*pb.GetLastMirroredEpochsResponse, error)) {
		view, mirror, err := state.SourceViewOf(sb.image, req.GetTopic(), req.GetMinMetadataOffset())
		if err != nil {
			reply(nil, err)
			return
		}
		sb.mstate.Answer(req, view, mirror, func(resp *pb.GetLastMirroredEpochsResponse) { reply(resp, nil) })
	}, done)
}

// maxServed bounds the answers whose served records a runner keeps. An
// answer is appended on the runner's next turn or never, but answers of a
// stopped session and of its successor may arrive in either order before
// that turn (seed 4238020: keeping only the latest lost the current one).
const maxServed = 16

// keepServed keeps what the source served for answer pr (at the source,
// as it answers); answered re-keys it by the runner's Answer made of pr.
func (r *mirrorRunner) keepServed(pr *pb.FetchPartitionResponse, sv servedBy) {
	if len(r.servedFIFO) == maxServed {
		delete(r.served, r.servedFIFO[0])
		r.servedFIFO = r.servedFIFO[1:]
	}
	r.served[pr] = sv
	r.servedFIFO = append(r.servedFIFO, pr)
}

func (r *mirrorRunner) answered(pr *pb.FetchPartitionResponse, a *runner.Answer) {
	sv, ok := r.served[pr]
	if !ok {
		return
	}
	delete(r.served, pr)
	r.served[a] = sv
	r.servedFIFO[slices.Index(r.servedFIFO, any(pr))] = a
}

// simMirrorPart is the partition as the runner uses it (runner.Partition);
// the simulator runs one thing at a time, so its lock is nothing.
type simMirrorPart struct{ r *mirrorRunner }

func (simMirrorPart) Lock()                       {}
func (simMirrorPart) Unlock()                     {}
func (m simMirrorPart) Replica() *replica.Replica { return m.r.p.r }
func (m simMirrorPart) Usable() bool              { return m.r.live() }
func (m simMirrorPart) ProcessReady()             { m.r.p.processReady() }
func (m simMirrorPart) NoteWritable(wr bool, le twinlog.Epoch) {
	w, p := m.r.w, m.r.p
	w.writable[p], w.writableLE[p] = wr, le
}

// AppendMirrored appends as broker/mirror.go's mirrorPartition does, then
// checks §8.15: each copied record equals the one the source served at
// that offset, and D.LEO ≤ the source HW the answer carried.
func (m simMirrorPart) AppendMirrored(a *runner.Answer, metas []replica.BatchMeta, batches storage.Validated) error {
	r := m.r
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
	sv, ok := r.served[a]
	if !ok {
		s.fail("§8.15 mirrored record differs from the source", "broker %d %s: appended an answer the simulator did not serve", p.b.id, p.key)
		return errSimFailed
	}
	delete(r.served, a)
	copies := w.copies[s][p.key]
	if copies == nil {
		copies = map[int64]copyRec{}
		w.copies[s][p.key] = copies
	}
	for o := int64(metas[0].BaseOffset); o <= int64(metas[len(metas)-1].LastOffset); o++ {
		w.rep.Checks["§8.15 copy = source"]++
		got, ok := p.shadow.at(o)
		want, wok := sv.recs[o]
		if !ok || !wok || got != want {
			s.fail("§8.15 mirrored record differs from the source", "broker %d %s offset %d: copied %v (%t), source had %v (%t)", p.b.id, p.key, o, got, ok, want, wok)
			return errSimFailed
		}
		copies[o] = copyRec{value: got.value, srcSeq: sv.src.hist.Seq()}
		w.rep.MirroredRecords++
	}
	w.rep.Checks["§8.15 LEO ≤ source HW"]++
	if p.r.LogEndOffset() > sv.hw {
		s.fail("§8.15 D.LEO above the source HW", "broker %d %s: LEO %d after copying, source HW %d", p.b.id, p.key, p.r.LogEndOffset(), sv.hw)
		return errSimFailed
	}
	return nil
}

// simObserver watches the runner: the trace, the report's counters, and
// the checks on what the runner's machine does.
type simObserver struct{ r *mirrorRunner }

// BecameLeader checks the new leadership before its actions run: a
// leadership loaded from records written in a later LE (a zombie leader on
// stale metadata, seeds 104, 296) must be refused by the machine: nothing
// that writes, bumps, queries, truncates, touches taints or fetches, not
// writable, not leading. Otherwise §8.19: no replica the loaded record
// taints is in the ISR (unless its own, or §6.8 exempts it); and an LE with
// a truncation point owes its truncation (checkOwed).
func (o simObserver) BecameLeader(ev plan.BecameLeader, m *plan.Machine) {
	r := o.r
	s, p, w := r.s, r.p, r.w
	le := ev.LeaderEpoch
	if se := max(ev.Run.GetStateEpoch(), ev.Run.GetTruncationEpoch(), ev.Lmle.GetStateEpoch()); se > int32(le) {
		s.tracef("mirror %s broker %d: stale leadership LE %d (run %v, lmle %v written later)", p.key, p.b.id, le, shortRun(ev.Run), shortLmle(ev.Lmle))
		w.rep.Checks["stale leadership refused by plan"]++
		for _, a := range m.Ready().Actions {
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
					p.b.id, p.key, le, shortRun(ev.Run), shortLmle(ev.Lmle), a)
				return
			}
		}
		if m.Writable() || m.Leading() {
			s.fail("mirror: plan acts on a stale leadership", "broker %d %s: after BecameLeader in LE %d with run %s, lmle %s: writable %t, leading %t",
				p.b.id, p.key, le, shortRun(ev.Run), shortLmle(ev.Lmle), m.Writable(), m.Leading())
		}
		return
	}
	s.tracef("mirror %s broker %d: became leader LE %d (run %v, lmle %v, desired %v gen %d)", p.key, p.b.id, le, shortRun(ev.Run), shortLmle(ev.Lmle), ev.Desired.State, ev.Desired.Generation)
	w.rep.Checks["§8.19 no durably tainted replica in ISR"]++
	for _, t := range ev.Lmle.GetTaints() {
		// (Its own taint, or any once a tainted replica was elected
		// uncleanly: the §6.8 exemption covers 19.)
		if t.GetReplica() != p.b.id && !w.exempt[p.key] && slices.Contains(p.r.ISR(), twinlog.BrokerID(t.GetReplica())) {
			s.fail("§8.19 tainted replica in ISR", "broker %d %s: new leader in LE %d loaded taint %v while replica %d is in the ISR %v (a leader served follower fetches before loading the taints?)",
				p.b.id, p.key, le, t, t.GetReplica(), p.r.ISR())
			return
		}
	}
	want := runner.TaintsOf(ev.Lmle)
	for id := range p.r.Taints() {
		if _, ok := want[id]; !ok {
			// An LE this broker leads again without having applied the
			// leadership in between (it dropped its taints otherwise).
			w.rep.Checks["§6.4 stale taints replaced at BecameLeader"]++
			break
		}
	}
	// With the LE's truncation points: a bump whose answer was lost left
	// its truncation to this leadership (§6.2f; seed 1149).
	if slices.ContainsFunc(ev.TruncationPoints, func(tp plan.TruncationPoint) bool { return tp.LeaderEpoch == le }) {
		r.owedLE = le
		w.rep.Checks["§6.2f owed truncation at BecameLeader"]++
	}
}

// TaintsLoaded checks §6.4: once loaded the leader holds no taint the
// record lacks. A taint from an earlier leadership, durably cleared since,
// would cut an ISR member below the HW (§8.7), which §8.7's own check may
// not see: it is suspended in an LE whose leader has not fetched since a
// truncation point.
func (o simObserver) TaintsLoaded(lmle *pb.MirrorLmleRecord) {
	r := o.r
	s, p := r.s, r.p
	want := runner.TaintsOf(lmle)
	r.w.rep.Checks["§6.4 leader taints ⊆ loaded record"]++
	for id, t := range p.r.Taints() {
		if _, ok := want[id]; !ok {
			s.fail("§6.4 leader taints ⊆ loaded record", "broker %d %s: new leader in LE %d holds taint %v of replica %d; the loaded __mirror_state record has %v",
				p.b.id, p.key, p.r.LeaderEpoch(), t, id, lmle.GetTaints())
			return
		}
	}
}

func (o simObserver) LeadershipEnded() {
	p := o.r.p
	o.r.s.tracef("mirror %s broker %d: leadership ends (LE %d)", p.key, p.b.id, p.r.LeaderEpoch())
}

func (o simObserver) Transition(a plan.Transition) {
	r := o.r
	s, p, w := r.s, r.p, r.w
	w.rep.Transitions[shortState(a.To)]++
	s.tracef("mirror %s broker %d: %v -> %v (%s) LE %d LEO %d HW %d epochs %v", p.key, p.b.id, shortState(a.From), shortState(a.To), a.Reason,
		p.r.LeaderEpoch(), p.r.LogEndOffset(), p.r.HighWatermark(), p.r.EpochEntries())
	if a.To == plan.Stopped {
		w.checkFailoverAcks(s, p)
	}
}

// Truncating: §8.8's leader HW may drop now (§6.2f); the check restarts.
func (o simObserver) Truncating() { o.r.p.leaderLE = -1 }

func (o simObserver) Truncated(t runner.Truncation) {
	r := o.r
	s, p, w := r.s, r.p, r.w
	if t.Err != nil {
		s.tracef("mirror %s broker %d: truncation to %d failed: %v", p.key, p.b.id, t.Offset, t.Err)
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
	w.rep.Truncations[string(t.Reason)]++
	if t.Reason == plan.ReasonLMLE && t.After == t.Before {
		w.rep.LMLENoOps++
	}
	s.tracef("mirror %s broker %d: truncation %s to %d (full %t): LEO %d -> %d, HW %d, epochs %v", p.key, p.b.id, t.Reason, t.Offset, t.Full, t.Before, t.After, p.r.HighWatermark(), p.r.EpochEntries())
}

func (o simObserver) Taints(a plan.AddTaints, refused []twinlog.BrokerID) {
	r := o.r
	s, p := r.s, r.p
	if len(refused) > 0 {
		r.w.rep.Checks["§8.19 run taints refused for maximal-ISR members"]++
		s.tracef("mirror %s broker %d: taints %v refused (maximal ISR %v)", p.key, p.b.id, a.Taints, p.r.MaximalISR())
		return
	}
	s.tracef("mirror %s broker %d: taints %v", p.key, p.b.id, a.Taints)
}

func (o simObserver) Writable(wr bool, le twinlog.Epoch) {
	p := o.r.p
	o.r.s.tracef("mirror %s broker %d: writable %t LE %d", p.key, p.b.id, wr, le)
}

func (o simObserver) FetchEvent(ev plan.Event) {
	s, p := o.r.s, o.r.p
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
}

func (o simObserver) Status(*pb.MirrorPartitionStatus) {}

func (o simObserver) Rejected(ev plan.Event, err error) {
	p := o.r.p
	o.r.s.tracef("mirror %s broker %d: request rejected: %T: %v", p.key, p.b.id, ev, err)
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

func describeWrite(ws runner.StateWrite) string {
	if ws.Run != nil {
		return "run " + shortRun(ws.Run)
	}
	return "lmle " + shortLmle(ws.Lmle)
}
