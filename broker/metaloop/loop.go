// Package metaloop is a broker's metadata loop (SPEC §3.1): FetchMetadata
// from the image's next offset, one request at a time, with
// metadata.Follower gathering snapshot pages; each answer is applied to the
// image whole, or the image starts over. The broker shell (metadata.go) and
// the simulator both run it; the transport, the clock and the image are
// theirs.
package metaloop

import (
	"sync/atomic"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// Env is what a Loop needs from its host.
type Env interface {
	// After calls f after d (at once for 0, but never from inside After),
	// unless the host stops first.
	After(d time.Duration, f func())
	// Fetch sends req to the controller and calls done once, later and
	// never from inside Fetch; err reports that no answer came (no
	// connection, a transport error, the host's deadline).
	Fetch(req *pb.FetchMetadataRequest, done func(*pb.FetchMetadataResponse, error))
}

// Host owns the image. The Loop calls it from one callback at a time.
type Host interface {
	// Position is the image's offset and the broker's registered epoch,
	// for the next request.
	Position() (offset, brokerEpoch int64)
	// Reload starts the image over, empty.
	Reload()
	// Apply applies an answer to the image (metadata.ApplyTo: the whole
	// answer or nothing).
	Apply(resp *pb.FetchMetadataResponse) error
	// Applied: Apply took resp; before is the image's offset before it.
	// The host acts on the new image (reconcile the hosted partitions).
	Applied(resp *pb.FetchMetadataResponse, before int64)
	// Event tells the host what the loop did, for its logs and counters.
	Event(ev Event)
}

// Kind is what happened.
type Kind int8

const (
	// FetchFailed: no answer (Event.Err); the next request follows
	// after Config.Backoff.
	FetchFailed Kind = iota + 1
	// PageGathered: a snapshot page was taken; the next is asked for.
	PageGathered
	// Replaced: the controller replaced the snapshot being paged; the
	// pages start over.
	Replaced
	// Reloaded: the image was ahead of the controller's log
	// (Event.HighOffset); it starts over.
	Reloaded
	// Restarted: the controller refused the snapshot cursor or a page
	// was unusable (Event.Err); the snapshot starts over after
	// Config.Backoff.
	Restarted
	// ApplyFailed: the image refused an answer (Event.Err); it starts
	// over.
	ApplyFailed
	// SnapshotApplied: a whole snapshot was applied.
	SnapshotApplied
)

// Event is one thing the loop did.
type Event struct {
	Kind       Kind
	Err        error
	From       int64 // the request's from_offset
	HighOffset int64 // the controller's high offset (Reloaded)
}

// Config is a Loop's settings.
type Config struct {
	// BrokerID is the requests' broker id.
	BrokerID int32
	// MaxWait is the long poll the controller may hold a request for
	// (0: none).
	MaxWait time.Duration
	// Idle is the pause after an answer with nothing new before the next
	// request: 0 when the controller long-polls.
	Idle time.Duration
	// Backoff is the pause after a failed request or a refused snapshot.
	Backoff time.Duration
	// MaxSnapshotItems caps a gathered snapshot's lists
	// (metadata.MaxSnapshotItems in production).
	MaxSnapshotItems int64
}

// Loop follows the controller's metadata for one broker incarnation.
type Loop struct {
	env     Env
	host    Host
	cfg     Config
	follow  *metadata.Follower
	stopped atomic.Bool
	started atomic.Bool
}

// New returns a Loop; Start sends its first request.
func New(env Env, host Host, cfg Config) *Loop {
	return &Loop{env: env, host: host, cfg: cfg, follow: metadata.NewFollower(cfg.MaxSnapshotItems)}
}

// Start sends the first request; later calls do nothing.
func (l *Loop) Start() {
	if l.started.CompareAndSwap(false, true) {
		l.fetch()
	}
}

// Stop ends the loop: no more requests, no outcome reaches the host.
func (l *Loop) Stop() { l.stopped.Store(true) }

func (l *Loop) fetch() {
	if l.stopped.Load() {
		return
	}
	offset, epoch := l.host.Position()
	req := &pb.FetchMetadataRequest{
		BrokerId: l.cfg.BrokerID, BrokerEpoch: epoch, FromOffset: offset + 1,
		MaxWaitMs:      int32(l.cfg.MaxWait.Milliseconds()),
		SnapshotCursor: l.follow.Cursor(),
	}
	l.env.Fetch(req, func(resp *pb.FetchMetadataResponse, err error) { l.answered(req, resp, err) })
}

// next sends the next request after d.
func (l *Loop) next(d time.Duration) {
	if d <= 0 {
		l.fetch()
		return
	}
	l.env.After(d, l.fetch)
}

func (l *Loop) answered(req *pb.FetchMetadataRequest, resp *pb.FetchMetadataResponse, err error) {
	if l.stopped.Load() {
		return
	}
	from := req.GetFromOffset()
	if err != nil {
		// The cursor stays: the next page is asked for again (the
		// controller restarts it if its snapshot was replaced).
		l.host.Event(Event{Kind: FetchFailed, Err: err, From: from})
		l.next(l.cfg.Backoff)
		return
	}
	taken := l.follow.Take(resp)
	if taken.Replaced {
		l.host.Event(Event{Kind: Replaced, From: from})
	}
	switch taken.Step {
	case metadata.Wait:
		if l.follow.Cursor() != nil {
			l.host.Event(Event{Kind: PageGathered, From: from})
			l.next(0)
			return
		}
		l.next(l.cfg.Idle)
		return
	case metadata.Reload:
		l.host.Event(Event{Kind: Reloaded, From: from, HighOffset: resp.GetHighOffset()})
		l.host.Reload()
		l.next(0)
		return
	case metadata.Restart:
		l.host.Event(Event{Kind: Restarted, Err: taken.Err, From: from})
		l.next(l.cfg.Backoff)
		return
	}
	before, _ := l.host.Position()
	if err := l.host.Apply(taken.Apply); err != nil {
		l.host.Event(Event{Kind: ApplyFailed, Err: err, From: from})
		l.host.Reload()
		l.next(0)
		return
	}
	if taken.Apply.GetSnapshot() != nil {
		l.host.Event(Event{Kind: SnapshotApplied, From: from})
	}
	l.host.Applied(taken.Apply, before)
	l.next(0)
}
