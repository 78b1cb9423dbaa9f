package alter

import (
	"sync"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
)

const lagMs = 1000

// fakeHost is Env, Partition and Observer for one replica: calls and timers
// wait in lists until the test answers or fires them.
type fakeHost struct {
	sync.Mutex
	r       *replica.Replica
	now     int64
	usable  bool
	calls   []func(bool, *pb.AlterPartitionResponse)
	timers  []func()
	waits   []time.Duration
	readies int
	tries   []int
	got     []bool // Delivered's pending, per delivery
}

func (h *fakeHost) NowMs() int64                                       { return h.now }
func (h *fakeHost) Usable() bool                                       { return h.usable }
func (h *fakeHost) Replica() *replica.Replica                          { return h.r }
func (h *fakeHost) ProcessReady()                                      { h.readies++; h.r.Advance() }
func (h *fakeHost) Attempting(_ replica.AlterPartitionProposal, n int) { h.tries = append(h.tries, n) }
func (h *fakeHost) Retrying(replica.AlterPartitionProposal, int, bool, *pb.AlterPartitionResponse, time.Duration) {
}
func (h *fakeHost) Delivered(_ replica.AlterPartitionProposal, _ *pb.AlterPartitionResponse, pending bool) {
	h.got = append(h.got, pending)
}

func (h *fakeHost) Call(_ replica.AlterPartitionProposal, answer func(bool, *pb.AlterPartitionResponse)) {
	h.calls = append(h.calls, answer)
}

func (h *fakeHost) After(d time.Duration, f func()) {
	h.waits = append(h.waits, d)
	h.timers = append(h.timers, f)
}

// answer answers the oldest outstanding call.
func (h *fakeHost) answer(t *testing.T, sent bool, resp *pb.AlterPartitionResponse) {
	t.Helper()
	if len(h.calls) == 0 {
		t.Fatal("no call outstanding")
	}
	f := h.calls[0]
	h.calls = h.calls[1:]
	f(sent, resp)
}

// fire fires the oldest timer.
func (h *fakeHost) fire(t *testing.T) {
	t.Helper()
	if len(h.timers) == 0 {
		t.Fatal("no timer set")
	}
	f := h.timers[0]
	h.timers = h.timers[1:]
	f()
}

// shrinking returns a host whose replica, leader of {1,2} in LE 1 PE 1,
// proposes to drop follower 2, which never fetched.
func shrinking(t *testing.T) (*fakeHost, replica.AlterPartitionProposal) {
	t.Helper()
	r, err := replica.New(replica.Config{ID: 1, Partition: twinlog.TopicPartition{Topic: "t"}, ReplicaLagTimeMaxMs: lagMs},
		replica.LogState{AlignedEpoch: twinlog.NoEpoch})
	if err != nil {
		t.Fatal(err)
	}
	r.ApplyPartitionState(replica.PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
		Replicas: []twinlog.BrokerID{1, 2}, ISR: []twinlog.BrokerID{1, 2}, MinISR: 1,
		Brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 10, 2: 20}}, 0)
	r.Advance()
	h := &fakeHost{r: r, usable: true, now: 10 * lagMs}
	r.Tick(h.now)
	ap := r.Ready().AlterPartition
	if ap == nil {
		t.Fatalf("no shrink proposed; ready %+v", r.Ready())
	}
	r.Advance()
	return h, *ap
}

func committed(ap replica.AlterPartitionProposal) *pb.AlterPartitionResponse {
	resp := &pb.AlterPartitionResponse{Leader: 1, LeaderEpoch: ap.Request.GetLeaderEpoch(), PartitionEpoch: ap.Request.GetPartitionEpoch() + 1}
	for _, m := range ap.Request.GetNewIsr() {
		resp.Isr = append(resp.Isr, m.GetBrokerId())
	}
	return resp
}

// TestSendDeliversAnswer: one attempt, answered: the replica commits the
// ISR, the Ready is processed, nothing is retried.
func TestSendDeliversAnswer(t *testing.T) {
	h, ap := shrinking(t)
	Send(h, h, h, ap)
	if len(h.calls) != 1 || len(h.tries) != 1 {
		t.Fatalf("calls %d tries %v, want one attempt", len(h.calls), h.tries)
	}
	h.answer(t, true, committed(ap))
	if h.r.AlterPartitionPending(ap.Seq) {
		t.Fatal("still pending after the answer")
	}
	if got := h.r.ISR(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("ISR %v, want [1]", got)
	}
	if h.readies != 1 || len(h.got) != 1 || !h.got[0] || len(h.timers) != 0 {
		t.Fatalf("readies %d delivered %v timers %d", h.readies, h.got, len(h.timers))
	}
}

// TestSendRetriesSilence: an attempt without an answer is tried again
// after the backoff, for as long as the replica awaits the proposal; the
// second attempt's answer is delivered.
func TestSendRetriesSilence(t *testing.T) {
	h, ap := shrinking(t)
	Send(h, h, h, ap)
	h.answer(t, true, nil)
	notController := &pb.AlterPartitionResponse{Error: pb.ErrorCode_ERROR_CODE_NOT_CONTROLLER}
	if len(h.calls) != 0 || len(h.timers) != 1 || h.waits[0] != MinBackoff || h.readies != 0 {
		t.Fatalf("after silence: calls %d timers %d waits %v readies %d", len(h.calls), len(h.timers), h.waits, h.readies)
	}
	h.fire(t)
	h.answer(t, true, notController)
	h.fire(t)
	if len(h.tries) != 3 || h.tries[2] != 2 || h.waits[1] != 2*MinBackoff {
		t.Fatalf("tries %v waits %v", h.tries, h.waits)
	}
	h.answer(t, true, committed(ap))
	if h.r.AlterPartitionPending(ap.Seq) || h.readies != 1 {
		t.Fatalf("pending %t readies %d after the third attempt's answer", h.r.AlterPartitionPending(ap.Seq), h.readies)
	}
}

// TestSendStopsWhenAnsweredOtherwise: a retry finds the replica no longer
// awaiting the proposal (metadata answered it) and sends nothing.
func TestSendStopsWhenAnsweredOtherwise(t *testing.T) {
	h, ap := shrinking(t)
	Send(h, h, h, ap)
	h.answer(t, true, nil)
	// Metadata brings a new LE: the proposal is answered otherwise.
	h.r.ApplyPartitionState(replica.PartitionState{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 2,
		Replicas: []twinlog.BrokerID{1, 2}, ISR: []twinlog.BrokerID{1}, MinISR: 1,
		Brokers: map[twinlog.BrokerID]twinlog.BrokerEpoch{1: 10, 2: 20}}, h.now)
	h.r.Advance()
	if h.r.AlterPartitionPending(ap.Seq) {
		t.Fatal("new LE left the proposal pending")
	}
	h.fire(t)
	if len(h.calls) != 0 || len(h.tries) != 1 {
		t.Fatalf("calls %d tries %v after the proposal was answered by metadata", len(h.calls), h.tries)
	}
}

// TestSendAbortsNeverSent: NotSentAborted attempts none of which went out
// abort the proposal; the replica rolls back and its Ready is processed.
func TestSendAbortsNeverSent(t *testing.T) {
	h, ap := shrinking(t)
	Send(h, h, h, ap)
	for i := 0; i < NotSentAborted-1; i++ {
		h.answer(t, false, nil)
		h.fire(t)
	}
	h.answer(t, false, nil)
	if len(h.timers) != 0 || h.readies != 1 || h.r.AlterPartitionPending(ap.Seq) {
		t.Fatalf("timers %d readies %d pending %t, want aborted", len(h.timers), h.readies, h.r.AlterPartitionPending(ap.Seq))
	}
	if got := h.r.MaximalISR(); len(got) != 2 {
		t.Fatalf("maximal ISR %v, want rolled back to [1 2]", got)
	}
}

// TestSendUnusable: an answer for a partition no longer hosted goes
// nowhere and starts nothing.
func TestSendUnusable(t *testing.T) {
	h, ap := shrinking(t)
	Send(h, h, h, ap)
	h.usable = false
	h.answer(t, true, committed(ap))
	if !h.r.AlterPartitionPending(ap.Seq) || h.readies != 0 || len(h.timers) != 0 || len(h.got) != 0 {
		t.Fatalf("pending %t readies %d timers %d delivered %v", h.r.AlterPartitionPending(ap.Seq), h.readies, len(h.timers), h.got)
	}
}
