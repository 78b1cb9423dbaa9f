// Package runner is a mirror partition's runner (SPEC §6), the one copy
// every host runs: the broker in production, the deterministic simulator
// in tests. It decides; its host does the I/O.
//
// A Runner (runner.go) is the loop around a partition's plan.Machine: it
// observes leadership and metadata, loads the __mirror_state records of a
// new leadership, performs the machine's actions and runs its fetch
// sessions, all through an Env its host implements.
//
// A FetchSession is one session of the Fetch{MIRROR} loop that
// plan.StartFetcher starts (SPEC §6.3): it resolves the source leader,
// refuses stale ones, builds the request from the leader's log, reads the
// answer, decides and makes the append, and reports outcomes to the
// machine. It starts no goroutine and keeps no clock: each call returns the
// Step the host performs next and reports its result back with the
// matching method, the shape of etcd raft's Ready. A Runner performs the
// steps through its Env: RPCs on goroutines in the broker, messages on
// the simulated network and timers on its clock in the simulator.
package runner

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/storage"
)

// Backoff bounds of the session's retries: the first waits MinBackoff,
// each next one twice as long up to MaxBackoff; an answer with records or
// none resets it.
const (
	MinBackoff = 50 * time.Millisecond
	MaxBackoff = 2 * time.Second
)

// Step is what a session asks its host to do next: LookupLeader, SendFetch,
// Wait or Done.
type Step interface{ isStep() }

// LookupLeader: resolve the source partition's leader (through the
// source's Metadata; Refresh asks again rather than using what is known)
// and report it with FetchSession.Leader.
type LookupLeader struct{ Refresh bool }

// SendFetch: send Request to Leader and report the answer with
// FetchSession.Answer.
type SendFetch struct {
	Leader  SourceLeader
	Request plan.FetchRequest
}

// Wait: call FetchSession.Resume after D.
type Wait struct{ D time.Duration }

// Done: the session is over; the machine starts the next one when it is
// ready.
type Done struct{}

func (LookupLeader) isStep() {}
func (SendFetch) isStep()    {}
func (Wait) isStep()         {}
func (Done) isStep()         {}

// SourceLeader is the source partition's leader as the source's metadata
// names it.
type SourceLeader struct {
	TopicID     string
	Leader      int32
	LeaderEpoch twinlog.Epoch
	Addr        string // the host's address of Leader (opaque here)
}

// Answer is the source's answer to one partition's Fetch{MIRROR}.
type Answer struct {
	plan.FetchAnswer
	ErrorMessage  string
	HighWatermark twinlog.Offset
	LogEndOffset  twinlog.Offset
	Records       []byte
}

// AnswerOf reads the source's answer to one Fetch{MIRROR} partition.
func AnswerOf(pr *pb.FetchPartitionResponse) *Answer {
	a := &Answer{
		FetchAnswer:  plan.FetchAnswer{Error: pr.GetError(), LogStartOffset: twinlog.Offset(pr.GetLogStartOffset())},
		ErrorMessage: pr.GetErrorMessage(), HighWatermark: twinlog.Offset(pr.GetHighWatermark()),
		LogEndOffset: twinlog.Offset(pr.GetLogEndOffset()), Records: pr.GetRecords(),
	}
	if d := pr.GetDivergingEpoch(); d != nil {
		a.Diverging = &plan.Diverging{Epoch: twinlog.Epoch(d.GetEpoch()), EndOffset: twinlog.Offset(d.GetEndOffset())}
	}
	return a
}

// Log is the mirror leader's partition as a session uses it.
type Log interface {
	// Locked runs f with the partition's replica locked against every
	// other use (the broker's partition mutex; the simulator runs one
	// thing at a time and calls f as is).
	Locked(f func(LockedLog))
}

// LockedLog is the partition inside Log.Locked.
type LockedLog interface {
	// Leading reports that this broker leads the partition and may
	// append to it; when it does not, the session ends.
	Leading() bool
	// Position is the leader's log now.
	Position() plan.LeaderLog
	// AppendMirrored appends the batches (metas describe them) as the
	// mirror leader and persists them as the host's policy says. An error
	// (the replica refused them) ends the session.
	AppendMirrored(metas []replica.BatchMeta, batches storage.Validated) error
}

// FetchConfig configures a session.
type FetchConfig struct {
	// Session is plan.StartFetcher's session; every event carries it.
	Session uint64
	// MinSourceLeaderEpoch is plan.StartFetcher's floor.
	MinSourceLeaderEpoch twinlog.Epoch
	// TopicID is the mirror topic's id; a source leader of another topic
	// id is INCONSISTENT_TOPIC_ID, fatal to the run.
	TopicID string
	// Seen is the highest source leader epoch any session of this
	// partition's runner has fetched in (plan.SourceLeaderEpochUsable);
	// shared by successive sessions, which may overlap briefly.
	Seen *atomic.Int32
	// Log is the partition.
	Log Log
	// Post hands an event to the machine.
	Post func(plan.Event)
	// NowMs is the host's clock for Fetched.NowMs.
	NowMs func() int64
	// Pace is how long to wait after an answer (empty: it held no
	// records) before the next fetch; nil, no wait (the broker's fetches
	// long-poll at the source instead).
	Pace func(empty bool) time.Duration
}

// FetchSession is one Fetch{MIRROR} session. Its methods are called by one
// goroutine at a time.
type FetchSession struct {
	cfg     FetchConfig
	backoff time.Duration
	refresh bool
	done    bool
	sent    plan.FetchRequest
}

// NewFetchSession returns a session; Start gives its first step.
func NewFetchSession(cfg FetchConfig) *FetchSession {
	return &FetchSession{cfg: cfg, backoff: MinBackoff}
}

// Start is the session's first step.
func (s *FetchSession) Start() Step { return s.lookup() }

// Resume continues after a Wait.
func (s *FetchSession) Resume() Step { return s.lookup() }

func (s *FetchSession) lookup() Step {
	if s.done {
		return Done{}
	}
	refresh := s.refresh
	s.refresh = false
	return LookupLeader{Refresh: refresh}
}

func (s *FetchSession) end(ev plan.Event) Step {
	s.done = true
	if ev != nil {
		s.cfg.Post(ev)
	}
	return Done{}
}

// retry reports a retriable error to the machine (which counts it and
// shows it in the run's lastError) and waits before asking the source's
// metadata again.
func (s *FetchSession) retry(code pb.ErrorCode, msg string) Step {
	s.cfg.Post(plan.FetchError{Session: s.cfg.Session, Error: code, Message: msg})
	s.refresh = true
	d := s.backoff
	s.backoff = min(2*s.backoff, MaxBackoff)
	return Wait{D: d}
}

// Leader reports LookupLeader's result: the leader, or a protocol error
// code (UNKNOWN_TOPIC_OR_PARTITION: the source does not have the topic;
// NOT_LEADER_OR_FOLLOWER: no live leader), or err when the source did not
// answer.
func (s *FetchSession) Leader(l SourceLeader, code pb.ErrorCode, err error) Step {
	if s.done {
		return Done{}
	}
	if err != nil {
		return s.retry(pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT, err.Error())
	}
	if code == pb.ErrorCode_ERROR_CODE_NONE && l.TopicID != s.cfg.TopicID {
		code = pb.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID
	}
	switch {
	case code == pb.ErrorCode_ERROR_CODE_NONE:
	case plan.Fatal(code):
		return s.end(plan.FetchError{Session: s.cfg.Session, Error: code, Message: "source metadata"})
	default:
		return s.retry(code, "source metadata")
	}
	if seen := twinlog.Epoch(s.cfg.Seen.Load()); !plan.SourceLeaderEpochUsable(seen, s.cfg.MinSourceLeaderEpoch, l.LeaderEpoch) {
		// Stale source metadata (a zombie's own view): ask again rather
		// than fetch from a leader of an older epoch.
		return s.retry(pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER,
			fmt.Sprintf("source metadata names leader %d in LE %d; this run fetches in LE %d or later", l.Leader, l.LeaderEpoch, max(seen, s.cfg.MinSourceLeaderEpoch)))
	}
	var pos plan.LeaderLog
	leading := false
	s.cfg.Log.Locked(func(ll LockedLog) {
		if leading = ll.Leading(); leading {
			pos = ll.Position()
		}
	})
	if !leading {
		return s.end(nil)
	}
	for {
		if cur := s.cfg.Seen.Load(); int32(l.LeaderEpoch) <= cur || s.cfg.Seen.CompareAndSwap(cur, int32(l.LeaderEpoch)) {
			break
		}
	}
	s.sent = plan.MirrorFetchRequest(l.LeaderEpoch, pos.LatestEpoch, pos.LogEndOffset)
	return SendFetch{Leader: l, Request: s.sent}
}

// Answer reports SendFetch's result, or err when the source did not
// answer in time.
func (s *FetchSession) Answer(a *Answer, err error) Step {
	if s.done {
		return Done{}
	}
	if err != nil {
		return s.retry(pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT, err.Error())
	}
	end, again := plan.AnswerOutcome(s.cfg.Session, a.FetchAnswer)
	if again {
		return s.retry(a.Error, a.ErrorMessage)
	}
	if end != nil {
		return s.end(end)
	}
	s.backoff = MinBackoff
	next, stop, corrupt := s.append(a)
	switch {
	case stop:
		return s.end(nil)
	case corrupt != nil:
		// No Fetched for this answer: Fetched would reset the machine's
		// count of consecutive corrupt answers, and SPEC §6.3's "repeated
		// → FAILED" would never happen.
		return s.retry(pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE, corrupt.Error())
	case next != nil:
		// FetchNeedsBump, FetchStraddle or FetchForeignEpoch: the machine
		// fixes the log first.
		return s.end(next)
	}
	s.cfg.Post(plan.Fetched{Session: s.cfg.Session, SourceHighWatermark: a.HighWatermark, SourceLogEndOffset: a.LogEndOffset, NowMs: s.cfg.NowMs()})
	if s.cfg.Pace != nil {
		if d := s.cfg.Pace(len(a.Records) == 0); d > 0 {
			return Wait{D: d}
		}
	}
	return s.lookup()
}

// append checks the answer's batches and appends what plan.PlanAppend
// allows (SPEC §6.2b–d). next is the event the session ends with instead
// of Fetched (nil none); stop, that the session ends without one (the
// partition is no longer led here, or the replica refused the batches);
// corrupt, that the answer failed its checks (a CRC, or an epoch above
// the source LE the fetch was made in) and nothing was appended. A log
// that moved since the request appends nothing and fetches again.
func (s *FetchSession) append(a *Answer) (next plan.Event, stop bool, corrupt error) {
	if len(a.Records) == 0 {
		return nil, false, nil
	}
	v, err := storage.ValidateBatches(a.Records)
	if err != nil {
		return nil, false, err
	}
	bs := v.Batches()
	fetched := make([]plan.FetchedBatch, len(bs))
	for i, b := range bs {
		fetched[i] = plan.FetchedBatch{BaseOffset: b.BaseOffset(), LastOffset: b.LastOffset(), Epoch: b.LeaderEpoch()}
	}
	s.cfg.Log.Locked(func(ll LockedLog) {
		if !ll.Leading() {
			stop = true
			return
		}
		pos := ll.Position()
		if pos.LogEndOffset != s.sent.FetchOffset {
			return
		}
		var ap plan.AppendPlan
		if ap, corrupt = plan.PlanAppend(s.cfg.Session, fetched, pos, s.sent.CurrentLeaderEpoch, a.LogStartOffset); corrupt != nil {
			return
		}
		next = ap.End
		if ap.Append == 0 {
			return
		}
		metas := make([]replica.BatchMeta, ap.Append)
		for i, f := range fetched[ap.Skip : ap.Skip+ap.Append] {
			metas[i] = replica.BatchMeta{BaseOffset: f.BaseOffset, LastOffset: f.LastOffset, Epoch: f.Epoch}
		}
		if err := ll.AppendMirrored(metas, v.Slice(ap.Skip, ap.Skip+ap.Append)); err != nil {
			next, stop = nil, true
		}
	})
	return next, stop, corrupt
}
