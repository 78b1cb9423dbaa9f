package plan

import (
	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// A Fetch{MIRROR} answer reaches the machine as one event per session end
// (SPEC §6.3). The two functions here are the shell's whole reading of an
// answer, so that every shell (the broker's runner, the simulator's) ends
// a session on the same answers and appends the same batches.

// Diverging is a DivergingEpoch{Epoch, EndOffset} of a fetch answer.
type Diverging struct {
	Epoch     twinlog.Epoch
	EndOffset twinlog.Offset
}

// FetchAnswer is what a source's answer to one partition's Fetch{MIRROR}
// says besides its records.
type FetchAnswer struct {
	Error          twinlogv1.ErrorCode
	Diverging      *Diverging // nil: none
	LogStartOffset twinlog.Offset
}

// AnswerOutcome reads a fetch answer before its records: end is the event
// that ends the session (FetchDiverging, FetchOutOfRange, or FetchError
// for a code fatal to the run); retry reports a retriable error, after
// which the shell backs off, refreshes the source's metadata and fetches
// again. Neither: the answer's records are for PlanAppend. A
// DivergingEpoch counts only on an answer without error, as Kafka's
// fetchers read it.
func AnswerOutcome(session uint64, a FetchAnswer) (end Event, retry bool) {
	switch {
	case a.Error == twinlogv1.ErrorCode_ERROR_CODE_NONE && a.Diverging != nil:
		return FetchDiverging{Session: session, Epoch: a.Diverging.Epoch, EndOffset: a.Diverging.EndOffset}, false
	case a.Error == twinlogv1.ErrorCode_ERROR_CODE_NONE:
		return nil, false
	case a.Error == twinlogv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:
		return FetchOutOfRange{Session: session, SourceLogStartOffset: a.LogStartOffset}, false
	case Fatal(a.Error):
		return FetchError{Session: session, Error: a.Error}, false
	}
	return nil, true
}

// FetchedBatch is one batch of a fetch answer: its offsets and the epoch
// of its records.
type FetchedBatch struct {
	BaseOffset, LastOffset twinlog.Offset
	Epoch                  twinlog.Epoch
}

// LeaderLog is the mirror leader's log as an answer is applied to it: its
// LEO, its leader epoch and the latest epoch of its cache (−1 none).
type LeaderLog struct {
	LogEndOffset twinlog.Offset
	LeaderEpoch  twinlog.Epoch
	LatestEpoch  twinlog.Epoch
}

// AppendPlan is what a mirror leader does with an answer's batches: drop
// the first Skip (wholly below its LEO: a source read may start at the
// batch holding the fetch offset), append the next Append, and end the
// session with End instead of Fetched when End is not nil.
type AppendPlan struct {
	Skip   int
	Append int
	// End is FetchNeedsBump (after the appended prefix the next batch's
	// epoch is above the leader's LE), or FetchStraddle or
	// FetchForeignEpoch (Append is 0: the log is no prefix of the source's).
	End Event
}

// PlanAppend decides what the batches of an answer do to the leader's log
// (SPEC §6.2b–d): the appendable prefix by FetchedBatches; a first batch
// starting below the LEO and ending at or above it (batches are copied
// whole, so the log is no prefix of the source's) ends the session with
// FetchStraddle; a first batch of an epoch below the latest cached one
// with FetchForeignEpoch (§6.8). sourceLE is the source leader epoch the
// fetch was made in, sourceLogStart the source's log start from the
// answer. An error (an epoch above sourceLE or MaxEpoch) refuses the
// answer whole: CORRUPT_MESSAGE for the run, and no Fetched, so that
// repeated corrupt answers fail the run (§6.3).
func PlanAppend(session uint64, batches []FetchedBatch, log LeaderLog, sourceLE twinlog.Epoch, sourceLogStart twinlog.Offset) (AppendPlan, error) {
	var p AppendPlan
	for p.Skip < len(batches) && batches[p.Skip].LastOffset < log.LogEndOffset {
		p.Skip++
	}
	rest := batches[p.Skip:]
	epochs := make([]twinlog.Epoch, len(rest))
	for i, b := range rest {
		epochs[i] = b.Epoch
	}
	n, need, foreign, err := FetchedBatches(epochs, log.LeaderEpoch, log.LatestEpoch, sourceLE)
	switch {
	case err != nil:
		return AppendPlan{}, err
	case len(rest) > 0 && rest[0].BaseOffset < log.LogEndOffset:
		p.End = FetchStraddle{Session: session, BaseOffset: rest[0].BaseOffset, LastOffset: rest[0].LastOffset, SourceLogStartOffset: sourceLogStart}
		return p, nil
	case foreign:
		p.End = FetchForeignEpoch{Session: session, Epoch: rest[0].Epoch, BaseOffset: rest[0].BaseOffset, SourceLogStartOffset: sourceLogStart}
		return p, nil
	case need >= 0:
		p.End = FetchNeedsBump{Session: session, Epoch: need}
	}
	p.Append = n
	return p, nil
}
