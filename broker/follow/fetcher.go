package follow

import (
	"slices"
	"sync"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
)

// Env is what a Fetcher needs from its host: the broker sends a long-poll
// gRPC Fetch on a goroutine of its own, the simulator a message on its
// network.
type Env interface {
	// Send sends req to the leader and calls done once, later and never
	// from inside Send: resp, or err when no answer came (a transport
	// error, the host's deadline, or cancel). cancel ends the request
	// early.
	Send(req *pb.FetchRequest, done func(resp *pb.FetchResponse, err error)) (cancel func())
	// After calls f after d (0: soon, never from inside After), unless
	// the host stops first.
	After(d time.Duration, f func())
}

// Host is the broker the Fetcher fetches for.
type Host interface {
	// Partitions are the hosted partitions (Next picks those following
	// the Fetcher's leader).
	Partitions() []Partition
	// BrokerEpoch is the broker's registration epoch, sent on the wire
	// (the replica's is its metadata view: −1 while it shows this broker
	// fenced).
	BrokerEpoch() int64
	// Applied: an answer was applied; grew are the partitions whose log
	// grew (a host that persists each batch persists them here, before
	// the next fetch reports their LEO to the leader).
	Applied(grew []Partition)
	// Corrupt: a partition's answer failed its checks (SPEC §2.2); the
	// partition fetches again.
	Corrupt(it Item, err error)
}

// Config is a Fetcher's identity and limits.
type Config struct {
	Self, Leader twinlog.BrokerID
	Limits       Limits
}

// Fetcher replicates every partition its broker follows from one leader
// broker: one Fetch in flight carrying all of them (SPEC §4.4), the next
// sent as soon as the answer is applied, so replication is pipelined one
// request deep per leader. Without an answer it backs off (Backoff); with
// nothing to fetch it idles until kicked or IdleWait passes. Kick (the
// partitions changed) cancels the request in flight, so the next one
// carries the new members. Its methods may be called from any goroutine.
type Fetcher struct {
	env  Env
	host Host
	cfg  Config

	mu       sync.Mutex
	stopped  bool
	inflight bool
	kicked   bool   // a kick during the request in flight
	cancel   func() // of the request in flight
	seq      uint64 // of the request in flight (or being built)
	wait     int    // the pause armed last; earlier ones are void
	backoff  Backoff
}

// NewFetcher returns a Fetcher; Start sends its first request.
func NewFetcher(env Env, host Host, cfg Config) *Fetcher {
	return &Fetcher{env: env, host: host, cfg: cfg}
}

// Start sends the first request (or idles).
func (f *Fetcher) Start() { f.step() }

// Stop ends the Fetcher: the request in flight is cancelled and no other
// is sent.
func (f *Fetcher) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	if f.cancel != nil {
		f.cancel()
	}
}

// Kick tells the Fetcher the partitions changed: the request in flight is
// cancelled and the next one built afresh; a pause ends now.
func (f *Fetcher) Kick() {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return
	}
	if f.inflight {
		f.kicked = true
		if f.cancel != nil {
			f.cancel()
		}
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	f.pause(0)
}

// pause sends the next request after d, unless a kick or a later pause
// comes first.
func (f *Fetcher) pause(d time.Duration) {
	f.mu.Lock()
	f.wait++
	wait := f.wait
	f.mu.Unlock()
	f.env.After(d, func() {
		f.mu.Lock()
		ok := !f.stopped && !f.inflight && f.wait == wait
		f.mu.Unlock()
		if ok {
			f.step()
		}
	})
}

// step builds and sends the next request; one step or request at a time.
func (f *Fetcher) step() {
	f.mu.Lock()
	if f.stopped || f.inflight {
		f.mu.Unlock()
		return
	}
	f.inflight, f.kicked, f.cancel = true, false, nil
	f.seq++
	f.wait++ // void any pause armed before
	seq := f.seq
	f.mu.Unlock()

	items := Next(f.cfg.Leader, f.host.Partitions())
	if len(items) == 0 {
		f.mu.Lock()
		f.inflight = false
		kicked := f.kicked
		f.mu.Unlock()
		if kicked {
			f.pause(0)
		} else {
			f.pause(IdleWait) // until a kick brings partitions
		}
		return
	}
	req := Request(f.cfg.Self, f.host.BrokerEpoch(), items, f.cfg.Limits)
	cancel := f.env.Send(req, func(resp *pb.FetchResponse, err error) { f.answered(seq, items, resp, err) })
	f.mu.Lock()
	if f.inflight && f.seq == seq {
		f.cancel = cancel
		if f.stopped || f.kicked {
			cancel()
		}
	}
	f.mu.Unlock()
}

func (f *Fetcher) answered(seq uint64, items []Item, resp *pb.FetchResponse, err error) {
	f.mu.Lock()
	if f.seq != seq || !f.inflight {
		f.mu.Unlock()
		return
	}
	f.inflight, f.cancel = false, nil
	kicked, stopped := f.kicked, f.stopped
	f.kicked = false
	f.mu.Unlock()
	if stopped {
		return
	}
	if err != nil {
		if kicked {
			f.step() // cancelled by a kick: the next request at once
			return
		}
		f.pause(f.backoff.Failed())
		return
	}
	progress, grew := Apply(items, resp, f.host.Corrupt)
	f.host.Applied(grew)
	if d := f.backoff.Answered(progress); d > 0 && !kicked {
		// Only errors (fenced, not the leader yet): wait for metadata.
		f.pause(d)
		return
	}
	f.step()
}

// Leaders are the leader brokers the usable partitions of parts follow,
// in order: the host runs one Fetcher for each.
func Leaders(parts []Partition) []twinlog.BrokerID {
	var out []twinlog.BrokerID
	for _, p := range parts {
		p.Lock()
		if r := p.Replica(); p.Usable() && r.Role() == replica.RoleFollower {
			if l := r.Leader(); l != twinlog.NoBroker && !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
		p.Unlock()
	}
	slices.Sort(out)
	return out
}
