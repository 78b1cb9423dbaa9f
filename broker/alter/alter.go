// Package alter sends a leader's AlterPartition proposals (SPEC §4.5):
// Retry is the policy (when an attempt's outcome goes to the replica, when
// the proposal is given up as never sent, how long to wait before the next
// attempt) and Send the attempts that follow it. The broker shell
// (broker.go) and the simulator both run Send; the transport (gRPC, the
// simulated network) and the clock are theirs.
package alter

import (
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Bounds of the wait between attempts, and the number of attempts that
// could not be sent at all (no controller to send to) after which the
// proposal is given up: no attempt can have reached the controller, so the
// replica may roll its maximal ISR back (replica.AbortAlterPartition).
const (
	MinBackoff     = 100 * time.Millisecond
	MaxBackoff     = 2 * time.Second
	NotSentAborted = 5
)

// Verdict is what a host does after an attempt.
type Verdict int8

const (
	// Deliver: hand the answer to the replica
	// (replica.HandleAlterPartitionResponse).
	Deliver Verdict = iota + 1
	// Abort: tell the replica the proposal was never sent
	// (replica.AbortAlterPartition).
	Abort
	// Again: wait, then attempt again if the replica still awaits the
	// proposal (replica.AlterPartitionPending); metadata with a newer
	// partition epoch, a new leader epoch or a re-proposal answers it
	// otherwise.
	Again
)

func (v Verdict) String() string {
	switch v {
	case Deliver:
		return "deliver"
	case Abort:
		return "abort"
	case Again:
		return "again"
	}
	return "?"
}

// Retry follows one proposal's attempts. The zero value is ready.
type Retry struct {
	backoff time.Duration
	sent    bool
	notSent int
}

// Attempted records one attempt's outcome: sent reports whether it went out
// at all, resp is its answer (nil: none came, a transport error or the
// deadline). An answer other than NOT_CONTROLLER is delivered, even an
// error: the replica decides what a rejection means. Otherwise the proposal
// is tried again after a backoff that doubles from MinBackoff to
// MaxBackoff, unless none of NotSentAborted attempts could be sent.
func (r *Retry) Attempted(sent bool, resp *pb.AlterPartitionResponse) (Verdict, time.Duration) {
	if resp != nil && resp.GetError() != pb.ErrorCode_ERROR_CODE_NOT_CONTROLLER {
		return Deliver, 0
	}
	if sent {
		r.sent = true
	} else {
		r.notSent++
	}
	if !r.sent && r.notSent >= NotSentAborted {
		return Abort, 0
	}
	if r.backoff == 0 {
		r.backoff = MinBackoff
	} else {
		r.backoff = min(2*r.backoff, MaxBackoff)
	}
	return Again, r.backoff
}
