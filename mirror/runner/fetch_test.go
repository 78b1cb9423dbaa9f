package runner_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/runner"
	"github.com/twinlog/twinlog/storage"
)

// fakeLog is a mirror leader's log: offsets and epochs of the appended
// batches, no storage.
type fakeLog struct {
	leading  bool
	pos      plan.LeaderLog
	appended []replica.BatchMeta
	refuse   bool
}

func (l *fakeLog) Locked(f func(runner.LockedLog)) { f(l) }
func (l *fakeLog) Leading() bool                   { return l.leading }
func (l *fakeLog) Position() plan.LeaderLog        { return l.pos }
func (l *fakeLog) AppendMirrored(metas []replica.BatchMeta, v storage.Validated) error {
	if l.refuse {
		return errors.New("refused")
	}
	if len(metas) != len(v.Batches()) {
		return errors.New("metas do not describe the batches")
	}
	l.appended = append(l.appended, metas...)
	l.pos.LogEndOffset = metas[len(metas)-1].LastOffset + 1
	l.pos.LatestEpoch = metas[len(metas)-1].Epoch
	return nil
}

type harness struct {
	t      *testing.T
	log    *fakeLog
	seen   atomic.Int32
	events []plan.Event
	s      *runner.FetchSession
}

const topicID = "t-id"

func newHarness(t *testing.T, min twinlog.Epoch) *harness {
	h := &harness{t: t, log: &fakeLog{leading: true, pos: plan.LeaderLog{LogEndOffset: 10, LeaderEpoch: 5, LatestEpoch: 2}}}
	h.s = runner.NewFetchSession(runner.FetchConfig{
		Session: 9, MinSourceLeaderEpoch: min, TopicID: topicID, Seen: &h.seen, Log: h.log,
		Post:  func(ev plan.Event) { h.events = append(h.events, ev) },
		NowMs: func() int64 { return 1000 },
	})
	return h
}

// batches encodes one-record batches at the given offsets and epochs.
func batches(t *testing.T, at ...[2]int) []byte {
	var buf []byte
	for _, a := range at {
		var err error
		buf, err = storage.AppendBatch(buf, []storage.Record{{Offset: twinlog.Offset(a[0]), Value: []byte("v")}},
			storage.BatchOptions{BaseOffset: twinlog.Offset(a[0]), LeaderEpoch: twinlog.Epoch(a[1])})
		if err != nil {
			t.Fatal(err)
		}
	}
	return buf
}

func leader(le twinlog.Epoch) runner.SourceLeader {
	return runner.SourceLeader{TopicID: topicID, Leader: 1, LeaderEpoch: le, Addr: "a-1"}
}

func (h *harness) takeEvents() []plan.Event {
	evs := h.events
	h.events = nil
	return evs
}

// TestFetchSessionCopies: a session asks for the leader, fetches from its
// LEO with its latest epoch, appends the answer's batches and reports
// Fetched, then fetches again.
func TestFetchSessionCopies(t *testing.T) {
	h := newHarness(t, 0)
	if st := h.s.Start(); st != (runner.LookupLeader{}) {
		t.Fatalf("first step %#v", st)
	}
	st := h.s.Leader(leader(4), pb.ErrorCode_ERROR_CODE_NONE, nil)
	want := runner.SendFetch{Leader: leader(4), Request: plan.FetchRequest{FetchOffset: 10, CurrentLeaderEpoch: 4, LastFetchedEpoch: 2}}
	if st != want {
		t.Fatalf("step %#v, want %#v", st, want)
	}
	st = h.s.Answer(&runner.Answer{HighWatermark: 13, LogEndOffset: 14, Records: batches(t, [2]int{10, 2}, [2]int{11, 3}, [2]int{12, 3})}, nil)
	if st != (runner.LookupLeader{}) {
		t.Fatalf("after an answer: %#v", st)
	}
	if len(h.log.appended) != 3 || h.log.pos.LogEndOffset != 13 {
		t.Fatalf("appended %v (LEO %d)", h.log.appended, h.log.pos.LogEndOffset)
	}
	if d := cmp.Diff([]plan.Event{plan.Fetched{Session: 9, SourceHighWatermark: 13, SourceLogEndOffset: 14, NowMs: 1000}}, h.takeEvents()); d != "" {
		t.Fatalf("events (-want +got):\n%s", d)
	}
	if h.seen.Load() != 4 {
		t.Fatalf("seen LE %d, want 4", h.seen.Load())
	}
}

// TestFetchSessionRefusesStaleLeaders: a leader of an LE at or below the
// run's LMLE (floor lmleUsed + 1, seed 1737467) or older than one already
// fetched in (seed 1318604) is not fetched from: the session reports
// NOT_LEADER_OR_FOLLOWER, backs off and asks the source's metadata again.
func TestFetchSessionRefusesStaleLeaders(t *testing.T) {
	h := newHarness(t, plan.MinSourceLeaderEpoch(3))
	h.s.Start()
	st := h.s.Leader(leader(3), pb.ErrorCode_ERROR_CODE_NONE, nil)
	if st != (runner.Wait{D: runner.MinBackoff}) {
		t.Fatalf("zombie of LE 3 with LMLE 3: step %#v, want a wait", st)
	}
	evs := h.takeEvents()
	if len(evs) != 1 || evs[0].(plan.FetchError).Error != pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER {
		t.Fatalf("events %v", evs)
	}
	if st := h.s.Resume(); st != (runner.LookupLeader{Refresh: true}) {
		t.Fatalf("after the wait: %#v, want a refreshed lookup", st)
	}
	if _, ok := h.s.Leader(leader(7), pb.ErrorCode_ERROR_CODE_NONE, nil).(runner.SendFetch); !ok {
		t.Fatal("leader of LE 7 not fetched from")
	}
	h.s.Answer(&runner.Answer{}, nil)
	h.takeEvents()
	// LE 7 fetched in: a later session of the runner refuses LE 5.
	h2 := runner.NewFetchSession(runner.FetchConfig{Session: 10, TopicID: topicID, Seen: &h.seen, Log: h.log,
		Post: func(ev plan.Event) { h.events = append(h.events, ev) }, NowMs: func() int64 { return 0 }})
	h2.Start()
	if _, ok := h2.Leader(leader(5), pb.ErrorCode_ERROR_CODE_NONE, nil).(runner.Wait); !ok {
		t.Fatal("leader of LE 5 fetched from after LE 7")
	}
}

// TestFetchSessionBackoff: retriable errors wait 50 ms, 100 ms, … up to
// 2 s, each reported to the machine; an answer resets the backoff.
func TestFetchSessionBackoff(t *testing.T) {
	h := newHarness(t, 0)
	h.s.Start()
	var waits []time.Duration
	for range 8 {
		st := h.s.Leader(runner.SourceLeader{}, pb.ErrorCode_ERROR_CODE_NONE, errors.New("unreachable"))
		waits = append(waits, st.(runner.Wait).D)
		h.s.Resume()
	}
	ms := time.Millisecond
	if d := cmp.Diff([]time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms}, waits); d != "" {
		t.Fatalf("waits (-want +got):\n%s", d)
	}
	if n := len(h.takeEvents()); n != 8 {
		t.Fatalf("%d events for 8 errors", n)
	}
	h.s.Leader(leader(4), pb.ErrorCode_ERROR_CODE_NONE, nil)
	h.s.Answer(&runner.Answer{}, nil)
	h.s.Leader(leader(4), pb.ErrorCode_ERROR_CODE_NONE, nil)
	if st := h.s.Answer(&runner.Answer{FetchAnswer: plan.FetchAnswer{Error: pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER}}, nil); st != (runner.Wait{D: runner.MinBackoff}) {
		t.Fatalf("after an answer the backoff is %#v, want reset", st)
	}
}

// TestFetchSessionEnds: the outcomes that end a session, each with the
// event the machine needs (or none when the partition is no longer led
// here), and nothing appended where the log is no prefix of the source's.
func TestFetchSessionEnds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		leader  runner.SourceLeader
		code    pb.ErrorCode
		answer  *runner.Answer
		setup   func(*fakeLog)
		want    []plan.Event
		appends int
	}{
		{name: "source lost the topic", leader: leader(4), code: pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
			want: []plan.Event{plan.FetchError{Session: 9, Error: pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, Message: "source metadata"}}},
		{name: "topic re-created at the source", leader: runner.SourceLeader{TopicID: "other", Leader: 1, LeaderEpoch: 4},
			want: []plan.Event{plan.FetchError{Session: 9, Error: pb.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID, Message: "source metadata"}}},
		{name: "not leading", leader: leader(4), setup: func(l *fakeLog) { l.leading = false }},
		{name: "diverging", leader: leader(4), answer: &runner.Answer{FetchAnswer: plan.FetchAnswer{Diverging: &plan.Diverging{Epoch: 2, EndOffset: 8}}},
			want: []plan.Event{plan.FetchDiverging{Session: 9, Epoch: 2, EndOffset: 8}}},
		{name: "needs a bump", leader: leader(7), answer: &runner.Answer{Records: batches(t, [2]int{10, 5}, [2]int{11, 7})},
			want: []plan.Event{plan.FetchNeedsBump{Session: 9, Epoch: 7}}, appends: 1},
		{name: "foreign epoch", leader: leader(4), answer: &runner.Answer{FetchAnswer: plan.FetchAnswer{LogStartOffset: 3}, Records: batches(t, [2]int{10, 1})},
			want: []plan.Event{plan.FetchForeignEpoch{Session: 9, Epoch: 1, BaseOffset: 10, SourceLogStartOffset: 3}}},
		{name: "replica refuses", leader: leader(4), answer: &runner.Answer{Records: batches(t, [2]int{10, 2})}, setup: func(l *fakeLog) { l.refuse = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 0)
			h.s.Start()
			if tc.setup != nil && tc.answer == nil {
				tc.setup(h.log)
			}
			st := h.s.Leader(tc.leader, tc.code, nil)
			if tc.answer != nil {
				if tc.setup != nil {
					tc.setup(h.log)
				}
				st = h.s.Answer(tc.answer, nil)
			}
			if st != (runner.Done{}) {
				t.Fatalf("step %#v, want Done", st)
			}
			if d := cmp.Diff(tc.want, h.takeEvents()); d != "" {
				t.Fatalf("events (-want +got):\n%s", d)
			}
			if len(h.log.appended) != tc.appends {
				t.Fatalf("appended %v, want %d batches", h.log.appended, tc.appends)
			}
			if st := h.s.Resume(); st != (runner.Done{}) {
				t.Fatalf("a finished session continues: %#v", st)
			}
		})
	}
}

// TestFetchSessionStraddleAndCorrupt: a batch holding the LEO inside it
// ends the session with FetchStraddle and appends nothing; an answer with
// a bad CRC, or an epoch above the source LE, is CORRUPT_MESSAGE with no
// Fetched (so that repeated ones fail the run) and a retry.
func TestFetchSessionStraddleAndCorrupt(t *testing.T) {
	h := newHarness(t, 0)
	h.s.Start()
	h.s.Leader(leader(4), pb.ErrorCode_ERROR_CODE_NONE, nil)
	straddling, err := storage.EncodeBatch([]storage.Record{{Offset: 9, Value: []byte("a")}, {Offset: 10, Value: []byte("b")}},
		storage.BatchOptions{BaseOffset: 9, LeaderEpoch: 2, RecordOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	if st := h.s.Answer(&runner.Answer{FetchAnswer: plan.FetchAnswer{LogStartOffset: 3}, Records: straddling}, nil); st != (runner.Done{}) {
		t.Fatalf("step %#v", st)
	}
	if d := cmp.Diff([]plan.Event{plan.FetchStraddle{Session: 9, BaseOffset: 9, LastOffset: 10, SourceLogStartOffset: 3}}, h.takeEvents()); d != "" {
		t.Fatalf("events (-want +got):\n%s", d)
	}

	for name, recs := range map[string][]byte{
		"bad crc":                   func() []byte { b := batches(t, [2]int{10, 2}); b[len(b)-1] ^= 0xff; return b }(),
		"epoch above the source LE": batches(t, [2]int{10, 6}),
	} {
		h := newHarness(t, 0)
		h.s.Start()
		h.s.Leader(leader(4), pb.ErrorCode_ERROR_CODE_NONE, nil)
		if _, ok := h.s.Answer(&runner.Answer{Records: recs}, nil).(runner.Wait); !ok {
			t.Fatalf("%s: no retry", name)
		}
		evs := h.takeEvents()
		if len(evs) != 1 || evs[0].(plan.FetchError).Error != pb.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE {
			t.Fatalf("%s: events %v, want one CORRUPT_MESSAGE and no Fetched", name, evs)
		}
		if len(h.log.appended) != 0 {
			t.Fatalf("%s: appended %v", name, h.log.appended)
		}
	}
}

// TestFetchSessionLogMoved: when the leader's log moved between the
// request and the answer, nothing is appended and the session fetches
// again from the new LEO.
func TestFetchSessionLogMoved(t *testing.T) {
	h := newHarness(t, 0)
	h.s.Start()
	h.s.Leader(leader(4), pb.ErrorCode_ERROR_CODE_NONE, nil)
	h.log.pos.LogEndOffset = 8 // truncated meanwhile
	h.s.Answer(&runner.Answer{Records: batches(t, [2]int{10, 2})}, nil)
	if len(h.log.appended) != 0 {
		t.Fatalf("appended %v", h.log.appended)
	}
	st := h.s.Leader(leader(4), pb.ErrorCode_ERROR_CODE_NONE, nil)
	if st.(runner.SendFetch).Request.FetchOffset != 8 {
		t.Fatalf("next request %#v", st)
	}
}
