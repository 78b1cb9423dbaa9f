package producer

import (
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/twinlog/twinlog"
)

// TestCheck walks one producer through Kafka's cases: its first batch at
// any sequence, the next in sequence, a retry of any of its last five
// batches (answered with the original offsets), a gap, a stale epoch, a
// bumped epoch that must restart at 0, and the sequence wrapping past
// MaxInt32.
func TestCheck(t *testing.T) {
	s := New()
	off := twinlog.Offset(0)
	appendBatch := func(pid int64, epoch int16, first, n int32) Batch {
		t.Helper()
		last := LastSeq(first, n)
		if v := s.Check(pid, epoch, first, last); v.Outcome != Append {
			t.Fatalf("pid %d epoch %d seq [%d, %d]: %v, want append", pid, epoch, first, last, v.Outcome)
		}
		b := Batch{ProducerID: pid, Epoch: epoch, FirstSeq: first, LastSeq: last, FirstOffset: off, LastOffset: off + twinlog.Offset(n) - 1}
		off += twinlog.Offset(n)
		s.Apply(b)
		return b
	}
	expect := func(pid int64, epoch int16, first, last int32, want Outcome) Verdict {
		t.Helper()
		v := s.Check(pid, epoch, first, last)
		if v.Outcome != want {
			t.Fatalf("pid %d epoch %d seq [%d, %d]: %v, want %v", pid, epoch, first, last, v.Outcome, want)
		}
		return v
	}

	first := appendBatch(7, 0, 40, 3) // unknown producer: any sequence
	var sent []Batch
	for range 6 {
		prev := first
		if len(sent) > 0 {
			prev = sent[len(sent)-1]
		}
		sent = append(sent, appendBatch(7, 0, prev.LastSeq+1, 2))
	}
	// The last five are retried as duplicates with their offsets; the
	// sixth-last is gone (it would be OUT_OF_ORDER, as in Kafka).
	for _, b := range sent[1:] {
		if v := expect(7, 0, b.FirstSeq, b.LastSeq, Duplicate); v.Original != b {
			t.Fatalf("duplicate of %+v answered %+v", b, v.Original)
		}
	}
	expect(7, 0, sent[0].FirstSeq, sent[0].LastSeq, OutOfOrder)
	// A gap, and a batch overlapping the last one without matching it.
	last := sent[len(sent)-1]
	if v := expect(7, 0, last.LastSeq+2, last.LastSeq+2, OutOfOrder); v.Expected != last.LastSeq+1 {
		t.Fatalf("expected sequence %d, want %d", v.Expected, last.LastSeq+1)
	}
	expect(7, 0, last.FirstSeq, last.LastSeq+1, OutOfOrder)
	// A bumped epoch restarts at 0; then the old epoch is fenced.
	expect(7, 1, 5, 5, OutOfOrder)
	appendBatch(7, 1, 0, 1)
	if v := expect(7, 0, last.LastSeq+1, last.LastSeq+1, StaleEpoch); v.CurrentEpoch != 1 {
		t.Fatalf("current epoch %d, want 1", v.CurrentEpoch)
	}
	expect(7, 0, last.FirstSeq, last.LastSeq, StaleEpoch) // even a retry of the old epoch
	// Another producer is independent.
	appendBatch(8, 3, 0, 1)
	expect(8, 3, 0, 0, Duplicate)
	// Sequences wrap past MaxInt32 to 0.
	w := appendBatch(9, 0, math.MaxInt32-1, 4)
	if w.LastSeq != 1 {
		t.Fatalf("LastSeq(MaxInt32-1, 4) = %d, want 1", w.LastSeq)
	}
	appendBatch(9, 0, 2, 1)
	expect(9, 0, math.MaxInt32-1, 1, Duplicate)
}

// TestApplyAndExpire: replicas apply batches without checks (an older
// epoch than the state's is ignored, a newer one replaces the producer's
// batches), and a producer silent for longer than the expiration is
// forgotten, after which any sequence starts it again.
func TestApplyAndExpire(t *testing.T) {
	s := New()
	s.Apply(Batch{ProducerID: NoProducerID, FirstSeq: 0, LastSeq: 0})
	if s.Len() != 0 {
		t.Fatal("a batch without a producer id was kept")
	}
	s.Apply(Batch{ProducerID: 1, Epoch: 2, FirstSeq: 0, LastSeq: 4, LastOffset: 4, MaxTimestamp: 1000})
	s.Apply(Batch{ProducerID: 1, Epoch: 1, FirstSeq: 9, LastSeq: 9, MaxTimestamp: 5000})
	if p := s.Producers(); len(p) != 1 || p[0].Epoch != 2 || len(p[0].Batches) != 1 {
		t.Fatalf("after an older epoch: %+v", p)
	}
	s.Apply(Batch{ProducerID: 1, Epoch: 3, FirstSeq: 0, LastSeq: 0, MaxTimestamp: 2000})
	if p := s.Producers(); p[0].Epoch != 3 || len(p[0].Batches) != 1 || p[0].Batches[0].FirstSeq != 0 {
		t.Fatalf("after a newer epoch: %+v", p)
	}
	s.Apply(Batch{ProducerID: 2, Epoch: 0, FirstSeq: 0, LastSeq: 0, MaxTimestamp: 9000})
	s.Expire(10_000, 7_000) // producer 1 last wrote at 2000
	if p := s.Producers(); len(p) != 1 || p[0].ID != 2 {
		t.Fatalf("after expiry: %+v", p)
	}
	if v := s.Check(1, 3, 77, 77); v.Outcome != Append {
		t.Fatalf("expired producer at sequence 77: %v, want append", v.Outcome)
	}
}

// TestProducerRetriesProperty: a producer with up to five batches in
// flight whose requests are retried, reordered and lost (as a broker
// answers them) never gets a batch appended twice and never has one of
// its acknowledged batches answered at other offsets: every send of an
// appended batch is Append once and Duplicate (with the same offsets)
// after; a batch sent before its predecessor was appended is OutOfOrder.
func TestProducerRetriesProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := New()
		var log []Batch // appended, in offset order
		var off twinlog.Offset
		next := int32(rapid.Int32Range(0, math.MaxInt32).Draw(rt, "start"))
		type pending struct{ first, last int32 }
		var inflight []pending // sent, not yet appended, in send order
		appended := map[[2]int32]Batch{}
		// A producer whose answer was lost resends before anything new
		// (the connection that lost it fails every request on it), so a
		// retry is always one of the last MaxBatches batches.
		retrying := func(in []pending) bool {
			for _, p := range in {
				if _, ok := appended[[2]int32{p.first, p.last}]; ok {
					return true
				}
			}
			return false
		}
		for range rapid.IntRange(1, 200).Draw(rt, "steps") {
			switch {
			case len(inflight) < MaxBatches && !retrying(inflight) && rapid.Bool().Draw(rt, "send"):
				n := rapid.Int32Range(1, 5).Draw(rt, "n")
				inflight = append(inflight, pending{next, LastSeq(next, n)})
				next = nextSeq(LastSeq(next, n))
			case len(inflight) > 0:
				// The broker receives one request: usually the oldest
				// outstanding, sometimes a later one (reordered). Not
				// before the first is appended: a partition accepts any
				// sequence from a producer it does not know (KIP-360;
				// TestCheck), so the producer's first batch must arrive
				// first.
				i := 0
				if len(log) > 0 && rapid.IntRange(0, 3).Draw(rt, "reorder") == 0 {
					i = rapid.IntRange(0, len(inflight)-1).Draw(rt, "which")
				}
				p := inflight[i]
				v := s.Check(1, 0, p.first, p.last)
				orig, done := appended[[2]int32{p.first, p.last}]
				inSeq := len(log) == 0 || p.first == nextSeq(log[len(log)-1].LastSeq)
				switch {
				case done:
					if v.Outcome != Duplicate || v.Original != orig {
						rt.Fatalf("retry of appended [%d, %d]: %v %+v, want duplicate of %+v", p.first, p.last, v.Outcome, v.Original, orig)
					}
					inflight = slices.Delete(inflight, i, i+1)
				case !inSeq:
					if v.Outcome != OutOfOrder {
						rt.Fatalf("[%d, %d] after %+v: %v, want out of order", p.first, p.last, log[len(log)-1], v.Outcome)
					}
				default:
					if v.Outcome != Append {
						rt.Fatalf("next batch [%d, %d]: %v, want append", p.first, p.last, v.Outcome)
					}
					n := int64(p.last) - int64(p.first) + 1
					if n <= 0 {
						n += math.MaxInt32 + 1
					}
					b := Batch{ProducerID: 1, FirstSeq: p.first, LastSeq: p.last, FirstOffset: off, LastOffset: off + twinlog.Offset(n) - 1}
					off += twinlog.Offset(n)
					s.Apply(b)
					log = append(log, b)
					appended[[2]int32{p.first, p.last}] = b
					// The answer may be lost: the producer sends it again.
					if !rapid.Bool().Draw(rt, "lost") {
						inflight = slices.Delete(inflight, i, i+1)
					}
				}
			}
		}
		for i := 1; i < len(log); i++ {
			if log[i].FirstSeq != nextSeq(log[i-1].LastSeq) {
				rt.Fatalf("log has a gap: %+v then %+v", log[i-1], log[i])
			}
		}
	})
}
