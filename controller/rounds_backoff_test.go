package controller

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// logInfoBroker answers GetReplicaLogInfo with a settable error for every
// partition (KAFKA_STORAGE_ERROR: the candidate's copy is offline) and
// records when, on the controller's clock, it was asked.
type logInfoBroker struct {
	twinlogv1.UnimplementedReplicationServiceServer
	clock *fakeClock
	epoch atomic.Int64
	code  atomic.Int32

	mu    sync.Mutex
	asked []time.Time
}

func startLogInfoBroker(t *testing.T, nw *netw, addr string, clock *fakeClock, epoch int64, code twinlogv1.ErrorCode) *logInfoBroker {
	fb := &logInfoBroker{clock: clock}
	fb.epoch.Store(epoch)
	fb.code.Store(int32(code))
	srv := grpc.NewServer()
	twinlogv1.RegisterReplicationServiceServer(srv, fb)
	lis := nw.listen(addr)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return fb
}

func (fb *logInfoBroker) GetReplicaLogInfo(ctx context.Context, req *twinlogv1.GetReplicaLogInfoRequest) (*twinlogv1.GetReplicaLogInfoResponse, error) {
	fb.mu.Lock()
	fb.asked = append(fb.asked, fb.clock.Now())
	fb.mu.Unlock()
	resp := &twinlogv1.GetReplicaLogInfoResponse{BrokerEpoch: fb.epoch.Load()}
	for _, t := range req.GetTopics() {
		tr := &twinlogv1.GetReplicaLogInfoTopicResponse{Topic: t.GetTopic()}
		for _, p := range t.GetPartitions() {
			tr.Partitions = append(tr.Partitions, &twinlogv1.ReplicaLogInfo{
				Partition: p, Error: twinlogv1.ErrorCode(fb.code.Load()), LastWrittenLeaderEpoch: 1, LogEndOffset: 10,
			})
		}
		resp.Topics = append(resp.Topics, tr)
	}
	return resp, nil
}

func (fb *logInfoBroker) askedAt() []time.Time {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return slices.Clone(fb.asked)
}

// TestRecoveryRoundBackoff: the only candidate of an unclean recovery
// round answers KAFKA_STORAGE_ERROR (its copy is offline). The controller
// asks again after a growing interval (0.5 s doubling to 30 s), not on
// every tick; a re-registration of the candidate (a restart, the repair)
// has it asked at once, and a round that elects a leader ends the backoff.
// Before, every tick planned and ran a new round: 20 asks a second at
// brokertest's 50 ms tick, 10 a second here.
func TestRecoveryRoundBackoff(t *testing.T) {
	clock := newClock()
	nw := newNet()
	h := startController(t, t.TempDir(), clock, nw)
	h.upBrokers(3)
	h.createTopic("u", 1, 3, map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
	h.tick()
	clock.Advance(10 * time.Second) // everyone silent: all fenced, u-0 leaderless
	h.tick()
	if p := h.partition("u", 0); p.GetLeader() != -1 {
		t.Fatalf("still led: %v", p)
	}
	// Broker 2 comes back uncleanly: the only acceptable replica, asked by
	// aggressive rounds, and its copy is offline.
	e2 := h.register(2, -1)
	fb := startLogInfoBroker(t, nw, "b2:9092", clock, e2, twinlogv1.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR)
	h.heartbeat(2, e2)

	const step = 100 * time.Millisecond // the tick
	start := clock.Now()
	run := func(d time.Duration, epoch int64) {
		t.Helper()
		for end := clock.Now().Add(d); clock.Now().Before(end); clock.Advance(step) {
			h.heartbeat(2, epoch)
			h.tick()
			h.c.wg.Wait() // the round, if one ran, has completed
		}
	}
	run(70*time.Second, e2)
	asked := fb.askedAt()
	var intervals []time.Duration
	for i := 1; i < len(asked); i++ {
		intervals = append(intervals, asked[i].Sub(asked[i-1]))
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 30 * time.Second}
	if len(asked) == 0 || !asked[0].Equal(start) || !slices.Equal(intervals, want) {
		t.Fatalf("asked %d times over 70 s of ticks every %v, intervals %v; want the first at once, then %v",
			len(asked), step, intervals[:min(len(intervals), 10)], want)
	}
	if p := h.partition("u", 0); p.GetLeader() != -1 {
		t.Fatalf("a candidate answering KAFKA_STORAGE_ERROR was elected: %v", p)
	}

	// The operator repairs broker 2 and restarts it: it registers again and
	// is asked at the next tick, although the backoff (30 s) has not run out.
	e2 = h.register(2, -1)
	fb.epoch.Store(e2)
	fb.code.Store(int32(twinlogv1.ErrorCode_ERROR_CODE_NONE))
	before := len(fb.askedAt())
	run(step, e2)
	if n := len(fb.askedAt()); n != before+1 {
		t.Fatalf("asked %d times in the tick after the candidate re-registered, want 1", n-before)
	}
	if p := h.partition("u", 0); p.GetLeader() != 2 {
		t.Fatalf("after the repaired candidate answered: %v, want leader 2", p)
	}
	h.c.mu.RLock()
	left := len(h.c.roundRetry.parts)
	h.c.mu.RUnlock()
	if left != 0 {
		t.Fatalf("%d partitions still backing off after the election", left)
	}
}

// TestRoundRetryBackoff: the default wait doubles from roundRetryInitialBackoff and
// stops at roundRetryMaxBackoff, without overflowing for any count.
func TestRoundRetryBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second,
		6: 16 * time.Second, 7: 30 * time.Second, 8: 30 * time.Second, 1 << 30: 30 * time.Second} {
		if got := (&roundBackoff{initial: roundRetryInitialBackoff, max: roundRetryMaxBackoff}).backoff(n); got != want {
			t.Errorf("roundRetryBackoff(%d) = %v, want %v", n, got, want)
		}
	}
}
