package session_test

import (
	"errors"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/session"
)

const (
	interval = time.Second
	shutdown = 100 * time.Millisecond
	backoff  = 50 * time.Millisecond
)

type timer struct {
	d time.Duration
	f func()
}

// fake is the Keeper's Env and Host: requests and timers wait until the
// test answers or fires them; the host's calls are recorded.
type fake struct {
	regs       []*pb.RegisterBrokerRequest
	regDone    []func(*pb.RegisterBrokerResponse, error)
	beats      []*pb.BrokerHeartbeatRequest
	beatDone   []func(*pb.BrokerHeartbeatResponse, error)
	timers     []timer
	registered []int64 // epochs, negative for again
	failed     []bool  // fatal, per failure
	answered   []bool  // reregister, per heartbeat answer
}

func (f *fake) After(d time.Duration, fn func()) { f.timers = append(f.timers, timer{d, fn}) }
func (f *fake) Register(req *pb.RegisterBrokerRequest, done func(*pb.RegisterBrokerResponse, error)) {
	f.regs, f.regDone = append(f.regs, req), append(f.regDone, done)
}
func (f *fake) Heartbeat(req *pb.BrokerHeartbeatRequest, done func(*pb.BrokerHeartbeatResponse, error)) {
	f.beats, f.beatDone = append(f.beats, req), append(f.beatDone, done)
}
func (f *fake) RegisterRequest() *pb.RegisterBrokerRequest {
	return &pb.RegisterBrokerRequest{BrokerId: 1}
}
func (f *fake) HeartbeatRequest() *pb.BrokerHeartbeatRequest {
	return &pb.BrokerHeartbeatRequest{BrokerId: 1}
}
func (f *fake) Registered(epoch int64, again bool) {
	if again {
		epoch = -epoch
	}
	f.registered = append(f.registered, epoch)
}
func (f *fake) RegisterFailed(_ error, fatal bool) { f.failed = append(f.failed, fatal) }
func (f *fake) HeartbeatAnswered(_ *pb.BrokerHeartbeatRequest, _ *pb.BrokerHeartbeatResponse, _ error, reregister bool) {
	f.answered = append(f.answered, reregister)
}

// answerReg answers registration i.
func (f *fake) answerReg(i int, resp *pb.RegisterBrokerResponse, err error) { f.regDone[i](resp, err) }

// answerBeat answers heartbeat i.
func (f *fake) answerBeat(i int, resp *pb.BrokerHeartbeatResponse, err error) {
	f.beatDone[i](resp, err)
}

// fire fires timer i.
func (f *fake) fire(t *testing.T, i int, want time.Duration) {
	t.Helper()
	if f.timers[i].d != want {
		t.Fatalf("timer %d waits %v, want %v", i, f.timers[i].d, want)
	}
	f.timers[i].f()
}

func newKeeper(f *fake) *session.Keeper {
	return session.NewKeeper(f, f, session.Config{HeartbeatInterval: interval, ShutdownInterval: shutdown, RegisterBackoff: backoff, PreviousEpoch: 7})
}

func epochResp(e int64) *pb.RegisterBrokerResponse { return &pb.RegisterBrokerResponse{BrokerEpoch: e} }

var stale = &pb.BrokerHeartbeatResponse{Error: pb.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH}

// registered returns a Keeper registered in epoch 12 with its first
// heartbeat (0) in flight and its timer (0) armed.
func registered(t *testing.T) (*fake, *session.Keeper) {
	t.Helper()
	f := &fake{}
	k := newKeeper(f)
	k.Start()
	f.answerReg(0, epochResp(12), nil)
	if len(f.beats) != 1 || f.beats[0].GetBrokerEpoch() != 12 || len(f.timers) != 1 {
		t.Fatalf("after registering: beats %v timers %d", f.beats, len(f.timers))
	}
	return f, k
}

// TestKeeperRegisters: the first registration carries the files' previous
// epoch; a failed one is retried after the backoff, a refused-as-invalid
// one is not; heartbeats start only once registered.
func TestKeeperRegisters(t *testing.T) {
	f := &fake{}
	k := newKeeper(f)
	k.Kick() // not registered: nothing to send
	k.Start()
	if len(f.regs) != 1 || f.regs[0].GetPreviousBrokerEpoch() != 7 || len(f.beats) != 0 {
		t.Fatalf("regs %v beats %d", f.regs, len(f.beats))
	}
	k.Start() // one registration in flight
	if len(f.regs) != 1 {
		t.Fatalf("second registration while one is in flight")
	}
	f.answerReg(0, nil, errors.New("unreachable"))
	f.fire(t, 0, backoff)
	f.answerReg(1, &pb.RegisterBrokerResponse{Error: pb.ErrorCode_ERROR_CODE_NOT_CONTROLLER}, nil)
	f.fire(t, 1, backoff)
	f.answerReg(2, epochResp(12), nil)
	if want := []bool{false, false}; len(f.failed) != 2 || f.failed[0] || f.failed[1] {
		t.Fatalf("failed %v, want %v", f.failed, want)
	}
	if len(f.registered) != 1 || f.registered[0] != 12 || k.Epoch() != 12 {
		t.Fatalf("registered %v epoch %d", f.registered, k.Epoch())
	}
	if len(f.beats) != 1 || f.beats[0].GetBrokerEpoch() != 12 || f.beats[0].GetWantShutDown() {
		t.Fatalf("first heartbeat %v", f.beats)
	}

	g := &fake{}
	k = newKeeper(g)
	k.Start()
	g.answerReg(0, &pb.RegisterBrokerResponse{Error: pb.ErrorCode_ERROR_CODE_INVALID_REQUEST}, nil)
	if len(g.failed) != 1 || !g.failed[0] || len(g.timers) != 0 {
		t.Fatalf("invalid request: failed %v timers %d, want fatal and no retry", g.failed, len(g.timers))
	}
}

// TestKeeperHeartbeats: one heartbeat in flight at a time; a kick or a
// timer while one is in flight sends the next once it answers; a kick
// voids the timer armed before it.
func TestKeeperHeartbeats(t *testing.T) {
	f, k := registered(t)
	k.Kick()
	f.fire(t, 0, interval)
	if len(f.beats) != 1 {
		t.Fatalf("%d heartbeats in flight", len(f.beats))
	}
	f.answerBeat(0, &pb.BrokerHeartbeatResponse{}, nil)
	if len(f.beats) != 2 || len(f.timers) != 2 {
		t.Fatalf("due heartbeat: beats %d timers %d", len(f.beats), len(f.timers))
	}
	f.answerBeat(1, nil, errors.New("deadline"))
	k.Kick() // sends 2, voids timer 1
	f.fire(t, 1, interval)
	f.answerBeat(2, &pb.BrokerHeartbeatResponse{}, nil)
	if len(f.beats) != 3 {
		t.Fatalf("void timer sent a heartbeat: %d", len(f.beats))
	}
	f.fire(t, 2, interval)
	if len(f.beats) != 4 {
		t.Fatalf("timer after the kick sent nothing: %d", len(f.beats))
	}
}

// TestKeeperReRegisters: a stale epoch for the epoch held registers again
// with it as the previous epoch, and heartbeats go on in the new epoch; a
// stale answer to an earlier epoch's heartbeat does nothing.
func TestKeeperReRegisters(t *testing.T) {
	f, k := registered(t)
	f.answerBeat(0, stale, nil)
	if len(f.regs) != 2 || f.regs[1].GetPreviousBrokerEpoch() != 12 {
		t.Fatalf("re-registration %v", f.regs)
	}
	f.fire(t, 0, interval) // heartbeat 1, still in epoch 12
	f.answerReg(1, epochResp(20), nil)
	if len(f.registered) != 2 || f.registered[1] != -20 || k.Epoch() != 20 {
		t.Fatalf("registered %v", f.registered)
	}
	// Heartbeat 1 answers stale for epoch 12: nothing to re-register, and
	// the heartbeat the registration made due goes out in epoch 20.
	f.answerBeat(1, stale, nil)
	if len(f.regs) != 2 {
		t.Fatal("an answer to epoch 12's heartbeat re-registered epoch 20")
	}
	if len(f.beats) != 3 || f.beats[2].GetBrokerEpoch() != 20 {
		t.Fatalf("heartbeats %v, want the third in epoch 20", f.beats)
	}
}

// TestKeeperShutDown: heartbeats ask to shut down at the shorter
// interval, starting at once, and a stale epoch no longer re-registers.
func TestKeeperShutDown(t *testing.T) {
	f, k := registered(t)
	f.answerBeat(0, &pb.BrokerHeartbeatResponse{}, nil)
	k.ShutDown()
	last := len(f.beats) - 1
	if !f.beats[last].GetWantShutDown() {
		t.Fatal("ShutDown sent no heartbeat asking to shut down")
	}
	f.answerBeat(last, stale, nil)
	if len(f.regs) != 1 || f.answered[len(f.answered)-1] {
		t.Fatal("a stale epoch during shutdown re-registered")
	}
	f.fire(t, len(f.timers)-1, shutdown)
	if !f.beats[len(f.beats)-1].GetWantShutDown() {
		t.Fatal("timer heartbeat during shutdown lacks WantShutDown")
	}
	if !session.ShutdownGranted(stale) || !session.ShutdownGranted(&pb.BrokerHeartbeatResponse{ShouldShutDown: true}) ||
		session.ShutdownGranted(&pb.BrokerHeartbeatResponse{}) {
		t.Fatal("ShutdownGranted")
	}
}

// TestKeeperStop: after Stop nothing is sent and no outcome reaches the
// host.
func TestKeeperStop(t *testing.T) {
	f, k := registered(t)
	k.Stop()
	f.answerBeat(0, stale, nil)
	f.fire(t, 0, interval)
	k.Kick()
	if len(f.beats) != 1 || len(f.regs) != 1 || len(f.answered) != 0 {
		t.Fatalf("after Stop: beats %d regs %d answered %v", len(f.beats), len(f.regs), f.answered)
	}
}
