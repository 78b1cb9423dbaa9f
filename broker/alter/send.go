package alter

import (
	"sync"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
)

// Env is what Send needs from its host: the broker sends through gRPC on
// goroutines of its own, the simulator through its network on its
// scheduler.
type Env interface {
	// NowMs is the host's clock.
	NowMs() int64
	// Call sends ap.Request to the controller and calls answer once, later and
	// never from inside Call: sent is false when there was no controller
	// to send to, resp nil when no answer came (a transport error or the
	// host's RPC deadline).
	Call(ap replica.AlterPartitionProposal, answer func(sent bool, resp *pb.AlterPartitionResponse))
	// After calls f after d, unless the host stops first.
	After(d time.Duration, f func())
}

// Partition is the proposing replica's partition. Send locks it around
// every call into its replica.
type Partition interface {
	sync.Locker
	// Usable reports that the partition is still hosted and healthy: an
	// answer for a removed, closed or failed partition goes nowhere.
	Usable() bool
	// Replica is the partition's replica.
	Replica() *replica.Replica
	// ProcessReady carries out the replica's Ready (ready.Drain). The lock
	// is held.
	ProcessReady()
}

// Observer sees a proposal's attempts. The lock is held during Retrying
// and Delivered, not during Attempting.
type Observer interface {
	// Attempting: attempt n (from 0) of ap goes out now.
	Attempting(ap replica.AlterPartitionProposal, n int)
	// Retrying: attempt n left the outcome unknown (sent, resp as
	// Env.Call gave them); the next one follows after wait if the replica
	// still awaits ap.
	Retrying(ap replica.AlterPartitionProposal, n int, sent bool, resp *pb.AlterPartitionResponse, wait time.Duration)
	// Delivered: the replica took resp; pending is whether it still
	// awaited ap when resp came (false: a stale answer it ignores).
	Delivered(ap replica.AlterPartitionProposal, resp *pb.AlterPartitionResponse, pending bool)
}

// NoObserver observes nothing.
type NoObserver struct{}

func (NoObserver) Attempting(replica.AlterPartitionProposal, int) {}
func (NoObserver) Retrying(replica.AlterPartitionProposal, int, bool, *pb.AlterPartitionResponse, time.Duration) {
}
func (NoObserver) Delivered(replica.AlterPartitionProposal, *pb.AlterPartitionResponse, bool) {}

// Send sends one AlterPartition proposal of p's replica (the machine keeps
// at most one in flight per partition) and feeds the outcome back, as
// Retry decides: an answer goes to the replica
// (HandleAlterPartitionResponse), a proposal that could never be sent is
// aborted (AbortAlterPartition), anything else is attempted again after a
// backoff for as long as the replica still awaits it — metadata with a
// newer partition epoch, a new leader epoch or a re-proposal answers it
// otherwise. Like Kafka's AlterPartitionManager, a retried request the
// controller already applied answers INVALID_UPDATE_VERSION, and the
// metadata carrying the newer partition epoch resolves it (SPEC §4.5).
//
// Send returns at once; the attempts run on Env's callbacks.
func Send(env Env, p Partition, obs Observer, ap replica.AlterPartitionProposal) {
	s := &sending{env: env, p: p, obs: obs, ap: ap}
	s.attempt(0)
}

// sending is one proposal's attempts; only one of its callbacks is ever
// outstanding, so retry needs no lock of its own.
type sending struct {
	env   Env
	p     Partition
	obs   Observer
	ap    replica.AlterPartitionProposal
	retry Retry
}

func (s *sending) attempt(n int) {
	s.obs.Attempting(s.ap, n)
	s.env.Call(s.ap, func(sent bool, resp *pb.AlterPartitionResponse) { s.answered(n, sent, resp) })
}

func (s *sending) answered(n int, sent bool, resp *pb.AlterPartitionResponse) {
	s.p.Lock()
	defer s.p.Unlock()
	if !s.p.Usable() {
		return
	}
	r, seq, now := s.p.Replica(), s.ap.Seq, s.env.NowMs()
	verdict, wait := s.retry.Attempted(sent, resp)
	switch verdict {
	case Again:
		s.obs.Retrying(s.ap, n, sent, resp, wait)
		s.env.After(wait, func() {
			if s.stillPending() {
				s.attempt(n + 1)
			}
		})
		return
	case Abort:
		r.AbortAlterPartition(seq, now)
	case Deliver:
		pending := r.AlterPartitionPending(seq)
		r.HandleAlterPartitionResponse(seq, resp, now)
		s.obs.Delivered(s.ap, resp, pending)
	}
	s.p.ProcessReady()
}

func (s *sending) stillPending() bool {
	s.p.Lock()
	defer s.p.Unlock()
	return s.p.Usable() && s.p.Replica().AlterPartitionPending(s.ap.Seq)
}
