package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twinlog/twinlog/broker/kafka"
	"github.com/twinlog/twinlog/group"
)

// fakeEnv is a deterministic Env for the host's tests: a clock and timers
// the test moves and fires, a log per partition whose appends the test
// completes (or refuses), and metadata tables the test changes. It is
// made inside a synctest bubble, so that synctest.Wait tells when every
// goroutine it starts (loaders, reporters) is blocked on it.
type fakeEnv struct {
	t *testing.T
	// ctx is the run's: Close ends it and waits for the goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// changed is closed, and replaced, on every change await watches.
	changed chan struct{}
	nowMs   int64
	// partitions is __consumer_offsets' partition count; exists false:
	// the topic does not exist.
	partitions int32
	exists     bool
	// leads is the leader epoch of every partition this broker leads.
	leads     map[int32]int32
	logs      map[int32]*fakeLog
	timers    []*fakeTimer
	nextTimer int
	// coordinators answers Coordinator.
	coordinators map[int32]kafka.Coordinator
	createCalls  int
	createErr    error
	// missing are the topic partitions PartitionExists denies.
	missing map[topicPartition]bool
	// goCancel cancels one goroutine's ctx (each Go gets its own, ended
	// with the run's), by that ctx.
	goCancel map[context.Context]context.CancelFunc
}

// fakeLog is one partition: every record appended (written at once, as a
// leader writes before replicating), in order.
type fakeLog struct {
	records []group.Record
	// notReady: Read answers ErrNotReady (the HW trails the log end).
	notReady bool
	// readMax bounds the records of one Read (0: all).
	readMax int
	// reads counts Read calls: notReadyReads answered ErrNotReady,
	// readyReads answered records.
	reads, notReadyReads, readyReads int
	// hold: an append's outcome waits for complete; otherwise it is
	// committed at once.
	hold bool
	// refuse refuses every append with this code before writing it.
	refuse  group.ErrorCode
	appends []*fakeAppend
}

// fakeAppend is one Append call.
type fakeAppend struct {
	records []group.Record
	// refused is the refusal code (None: written).
	refused group.ErrorCode
	// done is the host's callback for the outcome (nil when refused).
	done func(group.ErrorCode)
	// delivered: done returned.
	delivered bool
}

type fakeTimer struct {
	id   int
	atMs int64
	f    func()
}

// readGuard stops a loader that keeps reading (a bug): the test fails
// instead of spinning.
const readGuard = 100_000

func newFakeEnv(t *testing.T, partitions int32) *fakeEnv {
	ctx, cancel := context.WithCancel(context.Background())
	e := &fakeEnv{
		t: t, ctx: ctx, cancel: cancel, changed: make(chan struct{}),
		nowMs: 1000, partitions: partitions, exists: true,
		leads: map[int32]int32{}, logs: map[int32]*fakeLog{},
		coordinators: map[int32]kafka.Coordinator{}, missing: map[topicPartition]bool{},
		goCancel: map[context.Context]context.CancelFunc{},
	}
	for p := range partitions {
		e.leads[p] = 1
		e.logs[p] = &fakeLog{}
	}
	return e
}

// newHost is a host over e whose loader retries every 5ms (of the bubble's
// clock). Cleanup closes it, then ends e's run and waits for its goroutines.
func newHost(t *testing.T, e *fakeEnv, gc group.Config) *Host {
	t.Helper()
	h, err := New(Config{Group: gc, ReconcileInterval: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}, e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		e.stop()
	})
	return h
}

// stop ends the run and waits for every goroutine Go started.
func (e *fakeEnv) stop() {
	e.cancel()
	e.wg.Wait()
}

// notifyLocked wakes await.
func (e *fakeEnv) notifyLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// do changes the fake under its lock.
func (e *fakeEnv) do(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f()
	e.notifyLocked()
}

// await blocks until cond (run under the fake's lock) holds. The bubble's
// clock runs while it waits (a loader's retry sleep passes); a minute of
// it without cond fails the test.
func (e *fakeEnv) await(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.After(time.Minute)
	for {
		e.mu.Lock()
		ok, ch := cond(), e.changed
		e.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			e.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// append is partition p's i-th Append call, once it was made.
func (e *fakeEnv) append(p int32, i int) *fakeAppend {
	e.t.Helper()
	var a *fakeAppend
	e.await(fmt.Sprintf("append %d of partition %d", i, p), func() bool {
		if as := e.logs[p].appends; len(as) > i {
			a = as[i]
			return true
		}
		return false
	})
	return a
}

// appends is how many Append calls partition p got.
func (e *fakeEnv) appends(p int32) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.logs[p].appends)
}

// complete gives a held append its outcome, as the broker does: from
// another goroutine than Append's caller. It returns once the host took it.
func (e *fakeEnv) complete(a *fakeAppend, code group.ErrorCode) {
	a.done(code)
	e.do(func() { a.delivered = true })
}

// deadlines are the armed timers' deadlines, sorted.
func (e *fakeEnv) deadlines() []int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []int64
	for _, tm := range e.timers {
		out = append(out, tm.atMs)
	}
	slices.Sort(out)
	return out
}

// fire runs the earliest timer, first moving the clock to its deadline
// unless early; false when none is armed.
func (e *fakeEnv) fire(early bool) bool {
	e.mu.Lock()
	if len(e.timers) == 0 {
		e.mu.Unlock()
		return false
	}
	i := 0
	for j, tm := range e.timers {
		if tm.atMs < e.timers[i].atMs {
			i = j
		}
	}
	tm := e.timers[i]
	e.timers = slices.Delete(e.timers, i, i+1)
	if !early {
		e.nowMs = max(e.nowMs, tm.atMs)
	}
	e.notifyLocked()
	e.mu.Unlock()
	tm.f()
	return true
}

func (e *fakeEnv) NowMs() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nowMs
}

func (e *fakeEnv) AfterFunc(d time.Duration, f func()) func() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextTimer++
	tm := &fakeTimer{id: e.nextTimer, atMs: e.nowMs + d.Milliseconds(), f: f}
	e.timers = append(e.timers, tm)
	e.notifyLocked()
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.timers = slices.DeleteFunc(e.timers, func(x *fakeTimer) bool { return x == tm })
		e.notifyLocked()
	}
}

// Go runs f on a goroutine, never synchronously: shard.appendLocked calls
// it holding the shard's lock, and the goroutine takes that lock.
func (e *fakeEnv) Go(f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(e.ctx)
	e.mu.Lock()
	e.goCancel[ctx] = cancel
	e.mu.Unlock()
	e.wg.Go(func() {
		defer cancel()
		f(ctx)
	})
}

func (e *fakeEnv) Partitions() (int32, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.partitions, e.exists
}

func (e *fakeEnv) Leads(p int32) (int32, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	epoch, ok := e.leads[p]
	return epoch, ok
}

func (e *fakeEnv) leadsLocked(p, epoch int32) bool {
	le, ok := e.leads[p]
	return ok && le == epoch
}

func (e *fakeEnv) Read(p, epoch int32, from int64) ([]group.Record, int64, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.notifyLocked()
	l := e.logs[p]
	l.reads++
	switch {
	case l.reads > readGuard:
		e.t.Errorf("partition %d read %d times", p, l.reads)
		return nil, 0, false, errors.New("fake: read guard")
	case !e.leadsLocked(p, epoch):
		return nil, 0, false, fmt.Errorf("fake: partition %d not led in epoch %d", p, epoch)
	case l.notReady:
		l.notReadyReads++
		return nil, 0, false, ErrNotReady
	}
	l.readyReads++
	next := int64(len(l.records))
	if l.readMax > 0 {
		next = min(next, from+int64(l.readMax))
	}
	recs := slices.Clone(l.records[from:next])
	return recs, next, next == int64(len(l.records)), nil
}

func (e *fakeEnv) Append(p, epoch int32, recs []group.Record, done func(group.ErrorCode)) group.ErrorCode {
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.notifyLocked()
	l := e.logs[p]
	a := &fakeAppend{records: recs, refused: l.refuse}
	if !e.leadsLocked(p, epoch) {
		a.refused = group.NotLeaderOrFollower
	}
	l.appends = append(l.appends, a)
	if a.refused != group.None {
		return a.refused
	}
	a.done = done
	l.records = append(l.records, recs...)
	if !l.hold {
		// Never from within Append (the host holds its lock): a goroutine
		// of the run, as the broker's.
		e.wg.Go(func() { e.complete(a, group.None) })
	}
	return group.None
}

func (e *fakeEnv) Coordinator(p int32) (kafka.Coordinator, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.coordinators[p]
	return c, ok
}

// CreateTopic counts the call; the topic appears when the test says so
// (the controller creates it asynchronously).
func (e *fakeEnv) CreateTopic(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.createCalls++
	return e.createErr
}

// creates is how many times CreateTopic was called.
func (e *fakeEnv) creates() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.createCalls
}

func (e *fakeEnv) PartitionExists(topic string, partition int32) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.missing[topicPartition{Topic: topic, Partition: partition}]
}

var _ Env = (*fakeEnv)(nil)
