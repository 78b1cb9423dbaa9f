package session

import (
	"fmt"
	"sync"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Env is what a Keeper needs from its host: the broker calls the
// controller through gRPC on goroutines of its own, the simulator through
// its network on its scheduler.
type Env interface {
	// After calls f after d, unless the host stops first.
	After(d time.Duration, f func())
	// Register sends req to the controller and calls done once, later and
	// never from inside Register; err reports that no answer came (no
	// connection, a transport error, the host's RPC deadline).
	Register(req *pb.RegisterBrokerRequest, done func(*pb.RegisterBrokerResponse, error))
	// Heartbeat is Register's counterpart for BrokerHeartbeat.
	Heartbeat(req *pb.BrokerHeartbeatRequest, done func(*pb.BrokerHeartbeatResponse, error))
}

// Host fills in the requests and hears the outcomes. A Keeper never calls
// it with its own lock held, and never after Stop returned.
type Host interface {
	// RegisterRequest is the registration to send; the Keeper sets its
	// PreviousBrokerEpoch.
	RegisterRequest() *pb.RegisterBrokerRequest
	// HeartbeatRequest is the heartbeat to send; the Keeper sets its
	// BrokerEpoch and WantShutDown.
	HeartbeatRequest() *pb.BrokerHeartbeatRequest
	// Registered: the controller registered the broker in epoch
	// (again: a registration after an earlier one of this Keeper).
	Registered(epoch int64, again bool)
	// RegisterFailed: an attempt failed; with fatal (the controller
	// refused the request as invalid) no other attempt follows.
	RegisterFailed(err error, fatal bool)
	// HeartbeatAnswered: the outcome of heartbeat req (resp nil when err
	// is set); reregister is ReRegister's verdict on it.
	HeartbeatAnswered(req *pb.BrokerHeartbeatRequest, resp *pb.BrokerHeartbeatResponse, err error, reregister bool)
}

// Defaults of Config's zero fields.
const (
	DefaultShutdownInterval = 100 * time.Millisecond
	DefaultRegisterBackoff  = 100 * time.Millisecond
)

// Config is a Keeper's timing.
type Config struct {
	// HeartbeatInterval is the time between heartbeats.
	HeartbeatInterval time.Duration
	// ShutdownInterval is the time between heartbeats once the broker
	// asks for a controlled shutdown (at most HeartbeatInterval; 0:
	// DefaultShutdownInterval).
	ShutdownInterval time.Duration
	// RegisterBackoff is the wait after a failed registration (0:
	// DefaultRegisterBackoff).
	RegisterBackoff time.Duration
	// PreviousEpoch is the broker epoch the clean-shutdown files name
	// (SPEC §2.5; −1 after a crash).
	PreviousEpoch twinlog.BrokerEpoch
}

// Keeper keeps a broker registered with its controller (SPEC §3.2):
// RegisterBroker until the controller accepts it, then BrokerHeartbeat
// every interval (and at once when kicked, after the one in flight), with
// a new registration whenever a heartbeat's answer says the epoch is stale
// (ReRegister). One registration and one heartbeat are in flight at a
// time. Its methods may be called from any goroutine.
type Keeper struct {
	env  Env
	host Host
	cfg  Config

	mu           sync.Mutex
	stopped      bool
	epoch        int64 // registered broker epoch, 0 before
	registering  bool  // a registration in flight
	beating      bool  // a heartbeat in flight
	due          bool  // a heartbeat is due once the one in flight answers
	timer        int   // the heartbeat timer armed last; earlier ones are void
	shuttingDown bool
}

// NewKeeper returns a Keeper; Start sends its first registration.
func NewKeeper(env Env, host Host, cfg Config) *Keeper {
	if cfg.ShutdownInterval <= 0 {
		cfg.ShutdownInterval = DefaultShutdownInterval
	}
	cfg.ShutdownInterval = min(cfg.ShutdownInterval, cfg.HeartbeatInterval)
	if cfg.RegisterBackoff <= 0 {
		cfg.RegisterBackoff = DefaultRegisterBackoff
	}
	return &Keeper{env: env, host: host, cfg: cfg}
}

// Start sends the first registration.
func (k *Keeper) Start() { k.register() }

// Stop ends the Keeper: nothing more is sent, no outcome reaches the host.
func (k *Keeper) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
}

// Epoch is the registered broker epoch, 0 before the first registration.
func (k *Keeper) Epoch() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.epoch
}

// Kick sends a heartbeat now, or as soon as the one in flight answers
// (the broker kicks after applying metadata, so the controller learns its
// applied offset without waiting an interval).
func (k *Keeper) Kick() {
	k.mu.Lock()
	send := k.beatLocked()
	k.mu.Unlock()
	send()
}

// ShutDown asks for a controlled shutdown: every heartbeat from now on
// carries WantShutDown, at ShutdownInterval, starting at once. A stale
// epoch no longer means registering again (the controller took the
// broker's leadership away with its registration).
func (k *Keeper) ShutDown() {
	k.mu.Lock()
	k.shuttingDown = true
	k.mu.Unlock()
	k.Kick()
}

func (k *Keeper) register() {
	k.mu.Lock()
	if k.stopped || k.registering {
		k.mu.Unlock()
		return
	}
	k.registering = true
	prev := PreviousEpoch(k.cfg.PreviousEpoch, k.epoch)
	k.mu.Unlock()

	req := k.host.RegisterRequest()
	req.PreviousBrokerEpoch = prev
	k.env.Register(req, k.registered)
}

func (k *Keeper) registered(resp *pb.RegisterBrokerResponse, err error) {
	k.mu.Lock()
	k.registering = false
	if k.stopped {
		k.mu.Unlock()
		return
	}
	fatal := false
	if err == nil && resp.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		err = fmt.Errorf("register: %v: %s", resp.GetError(), resp.GetErrorMessage())
		fatal = resp.GetError() == pb.ErrorCode_ERROR_CODE_INVALID_REQUEST
	}
	if err != nil {
		k.mu.Unlock()
		k.host.RegisterFailed(err, fatal)
		if !fatal {
			k.env.After(k.cfg.RegisterBackoff, k.register)
		}
		return
	}
	again := k.epoch > 0
	if resp.GetBrokerEpoch() == k.epoch {
		k.mu.Unlock()
		return // nothing new
	}
	k.epoch = resp.GetBrokerEpoch()
	k.mu.Unlock()
	k.host.Registered(resp.GetBrokerEpoch(), again)
	k.Kick()
}

// beatLocked sends a heartbeat now if none is in flight (else marks one
// due) and arms the next; it returns the sending, to be called without
// k.mu. Before the first registration there is nothing to send.
func (k *Keeper) beatLocked() (send func()) {
	if k.stopped || k.epoch == 0 {
		return func() {}
	}
	if k.beating {
		k.due = true
		return func() {}
	}
	k.beating, k.due = true, false
	k.timer++
	timer, epoch, shutting := k.timer, k.epoch, k.shuttingDown
	interval := k.cfg.HeartbeatInterval
	if shutting {
		interval = k.cfg.ShutdownInterval
	}
	return func() {
		req := k.host.HeartbeatRequest()
		req.BrokerEpoch, req.WantShutDown = epoch, shutting
		k.env.Heartbeat(req, func(resp *pb.BrokerHeartbeatResponse, err error) { k.answered(req, resp, err) })
		k.env.After(interval, func() {
			k.mu.Lock()
			if k.timer != timer {
				k.mu.Unlock()
				return // a kick armed a newer timer
			}
			send := k.beatLocked()
			k.mu.Unlock()
			send()
		})
	}
}

func (k *Keeper) answered(req *pb.BrokerHeartbeatRequest, resp *pb.BrokerHeartbeatResponse, err error) {
	k.mu.Lock()
	k.beating = false
	if k.stopped {
		k.mu.Unlock()
		return
	}
	reregister := err == nil && ReRegister(resp.GetError(), req.GetBrokerEpoch(), k.epoch, k.shuttingDown)
	send := func() {}
	if k.due {
		send = k.beatLocked()
	}
	k.mu.Unlock()
	k.host.HeartbeatAnswered(req, resp, err, reregister)
	if reregister {
		k.register()
	}
	send()
}

// ShutdownGranted reports whether a heartbeat's answer during a controlled
// shutdown lets the broker stop: the controller says so, or the broker's
// registration is gone (its leadership with it).
func ShutdownGranted(resp *pb.BrokerHeartbeatResponse) bool {
	return resp.GetShouldShutDown() || resp.GetError() == pb.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH
}
