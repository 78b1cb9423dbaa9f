// Package producer keeps one partition's idempotent-producer state, as
// Kafka's ProducerStateManager does: per producer id, its epoch and the
// sequence and offset ranges of its last five batches. A leader checks
// each produced batch against it (Check) before appending: a retried
// batch it already holds is a duplicate answered with its original
// offsets, a gap in the sequence is OUT_OF_ORDER_SEQUENCE_NUMBER, an older
// epoch INVALID_PRODUCER_EPOCH. Every replica applies every batch it
// appends (Apply), as leader, follower, mirror or when rebuilding from its
// log, so that a new leader answers retries like the old one and a mirror
// like its source (issue 15).
//
// The package is pure: no clocks (times are arguments), no I/O, no
// goroutines. Not safe for concurrent use; the partition's lock guards it.
package producer

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/twinlog/twinlog"
)

// MaxBatches is how many of a producer's latest batches are kept for
// duplicate detection: Kafka's producer keeps at most five in flight
// (max.in.flight.requests.per.connection with idempotence), so a retry is
// always one of them.
const MaxBatches = 5

// NoProducerID marks a batch without an idempotent producer.
const NoProducerID = -1

// Batch is one appended batch of an idempotent producer: its sequences
// and the offsets the log gave it.
type Batch struct {
	ProducerID int64
	Epoch      int16
	// FirstSeq and LastSeq are the batch's base sequence and that plus
	// its record count minus one, wrapping past MaxInt32 to 0 as Kafka's
	// producer does.
	FirstSeq, LastSeq int32
	// FirstOffset and LastOffset are where the log put it.
	FirstOffset, LastOffset twinlog.Offset
	// MaxTimestamp is its largest record timestamp (producer expiry).
	MaxTimestamp int64
}

// Outcome is Check's decision on a batch.
type Outcome int8

const (
	// Append: a new batch in sequence (or of a producer this partition
	// does not know, or at the start of a newer epoch): append it.
	Append Outcome = iota
	// Duplicate: the partition holds this batch already (a retry); answer
	// with Verdict.Original's offsets and append nothing.
	Duplicate
	// OutOfOrder: the batch does not follow the producer's last one
	// (OUT_OF_ORDER_SEQUENCE_NUMBER): an earlier batch was lost or the
	// producer skipped ahead. Nothing is appended.
	OutOfOrder
	// StaleEpoch: the producer was fenced by a newer epoch of its id
	// (INVALID_PRODUCER_EPOCH). Nothing is appended.
	StaleEpoch
	// DuplicateAmongOthers: one batch of a request of several repeats a
	// batch the partition holds (DUPLICATE_SEQUENCE_NUMBER): only a retry
	// of a request's single batch can be answered with its original
	// offsets. Nothing is appended.
	DuplicateAmongOthers
)

func (o Outcome) String() string {
	switch o {
	case Append:
		return "append"
	case Duplicate:
		return "duplicate"
	case OutOfOrder:
		return "out of order"
	case StaleEpoch:
		return "stale epoch"
	case DuplicateAmongOthers:
		return "duplicate among others"
	}
	return "outcome(?)"
}

// Verdict is Check's answer.
type Verdict struct {
	Outcome Outcome
	// Original is the batch a Duplicate repeats.
	Original Batch
	// Expected is the sequence an OutOfOrder batch should have started at
	// (for the error message), −1 when any was expected at epoch start.
	Expected int32
	// CurrentEpoch is the producer's epoch (for StaleEpoch's message).
	CurrentEpoch int16
}

// entry is one producer's state.
type entry struct {
	epoch int16
	// batches are its latest appended batches, oldest first, at most
	// MaxBatches, all in epoch.
	batches []Batch
	// lastTimestamp is the largest MaxTimestamp applied.
	lastTimestamp int64
}

// State is a partition's producer state.
type State struct {
	producers map[int64]*entry
}

// New returns an empty State.
func New() *State { return &State{producers: map[int64]*entry{}} }

// Len is the number of producers known.
func (s *State) Len() int { return len(s.producers) }

// nextSeq is the sequence after seq, wrapping as the producer does.
func nextSeq(seq int32) int32 {
	if seq == math.MaxInt32 {
		return 0
	}
	return seq + 1
}

// LastSeq is the last sequence of a batch of n records starting at first.
func LastSeq(first int32, n int32) int32 {
	return int32((int64(first) + int64(n) - 1) % (int64(math.MaxInt32) + 1))
}

// Check decides what a leader does with a produced batch of producer pid
// at epoch with sequences [firstSeq, lastSeq]. It changes nothing; Apply
// the batch once appended.
func (s *State) Check(pid int64, epoch int16, firstSeq, lastSeq int32) Verdict {
	e := s.producers[pid]
	if e == nil {
		// A producer this partition does not know (new, or its state
		// expired or was truncated away): any sequence starts it, as
		// Kafka accepts since KIP-360.
		return Verdict{Outcome: Append}
	}
	switch {
	case epoch < e.epoch:
		return Verdict{Outcome: StaleEpoch, CurrentEpoch: e.epoch}
	case epoch > e.epoch:
		// A bumped epoch restarts the sequence at 0.
		if firstSeq != 0 {
			return Verdict{Outcome: OutOfOrder, Expected: 0, CurrentEpoch: e.epoch}
		}
		return Verdict{Outcome: Append}
	}
	for _, b := range e.batches {
		if b.FirstSeq == firstSeq && b.LastSeq == lastSeq {
			return Verdict{Outcome: Duplicate, Original: b}
		}
	}
	if len(e.batches) == 0 {
		return Verdict{Outcome: Append}
	}
	if want := nextSeq(e.batches[len(e.batches)-1].LastSeq); firstSeq != want {
		return Verdict{Outcome: OutOfOrder, Expected: want, CurrentEpoch: e.epoch}
	}
	return Verdict{Outcome: Append}
}

// Seqs are a produced batch's producer fields, for CheckBatches.
type Seqs struct {
	ProducerID        int64
	Epoch             int16
	FirstSeq, LastSeq int32
}

// CheckBatches is Check for the batches of one produce request, in order:
// each batch is checked as if the ones before it were appended. The verdict
// is the first batch's that is not Append (Index says which), or Append for
// all. A Duplicate is only answered as such when it is the request's only
// batch of an idempotent producer; among others it is DuplicateAmongOthers.
func (s *State) CheckBatches(batches []Seqs) (Verdict, int) {
	idempotent := 0
	for _, b := range batches {
		if b.ProducerID != NoProducerID {
			idempotent++
		}
	}
	// What the earlier batches of this request would leave, per producer.
	type pending struct {
		epoch   int16
		lastSeq int32
	}
	var seen map[int64]pending
	for i, b := range batches {
		if b.ProducerID == NoProducerID {
			continue
		}
		var v Verdict
		if p, ok := seen[b.ProducerID]; ok {
			switch {
			case b.Epoch < p.epoch:
				v = Verdict{Outcome: StaleEpoch, CurrentEpoch: p.epoch}
			case b.Epoch > p.epoch && b.FirstSeq != 0:
				v = Verdict{Outcome: OutOfOrder, Expected: 0, CurrentEpoch: p.epoch}
			case b.Epoch == p.epoch && b.FirstSeq != nextSeq(p.lastSeq):
				v = Verdict{Outcome: OutOfOrder, Expected: nextSeq(p.lastSeq), CurrentEpoch: p.epoch}
			}
		} else {
			v = s.Check(b.ProducerID, b.Epoch, b.FirstSeq, b.LastSeq)
		}
		if v.Outcome == Duplicate && idempotent > 1 {
			v = Verdict{Outcome: DuplicateAmongOthers, Original: v.Original}
		}
		if v.Outcome != Append {
			return v, i
		}
		if seen == nil {
			seen = map[int64]pending{}
		}
		seen[b.ProducerID] = pending{epoch: b.Epoch, lastSeq: b.LastSeq}
	}
	return Verdict{Outcome: Append}, -1
}

// Apply records an appended batch. Replicas apply what their log holds
// without checking (the leader checked): a newer epoch replaces the
// producer's batches, an older one is ignored.
func (s *State) Apply(b Batch) {
	if b.ProducerID == NoProducerID {
		return
	}
	e := s.producers[b.ProducerID]
	if e == nil {
		e = &entry{epoch: b.Epoch}
		s.producers[b.ProducerID] = e
	}
	switch {
	case b.Epoch < e.epoch:
		return
	case b.Epoch > e.epoch:
		e.epoch, e.batches = b.Epoch, nil
	}
	if len(e.batches) == MaxBatches {
		e.batches = slices.Delete(e.batches, 0, 1)
	}
	e.batches = append(e.batches, b)
	e.lastTimestamp = max(e.lastTimestamp, b.MaxTimestamp)
}

// Expire forgets the producers whose latest batch is older than
// expirationMs at nowMs (producer.id.expiration.ms): a producer silent
// that long starts afresh, as in Kafka.
func (s *State) Expire(nowMs, expirationMs int64) {
	maps.DeleteFunc(s.producers, func(_ int64, e *entry) bool { return nowMs-e.lastTimestamp > expirationMs })
}

// Producer is one producer's state, for snapshots and inspection.
type Producer struct {
	ID      int64
	Epoch   int16
	Batches []Batch
}

// Producers lists the state, by producer id.
func (s *State) Producers() []Producer {
	out := make([]Producer, 0, len(s.producers))
	for id, e := range s.producers {
		out = append(out, Producer{ID: id, Epoch: e.epoch, Batches: slices.Clone(e.batches)})
	}
	slices.SortFunc(out, func(a, b Producer) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
