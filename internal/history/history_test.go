package history

import (
	"slices"
	"strings"
	"testing"
)

func kinds(vs []Violation) string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Invariant)
	}
	return strings.Join(out, ", ")
}

func TestHistoryClean(t *testing.T) {
	h := NewHistory()
	h.RecordAck("t-0", 0, "a", 1, true, 2)
	h.RecordAck("t-0", 1, "b", 1, false, 2)
	h.RecordRead("c", "t-0", 0, "a", 1)
	h.RecordRead("c", "t-0", 1, "b", 2)
	h.Final("t-0", map[int64]string{0: "a", 1: "b"}, 2)
	if vs := h.Violations(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
}

func TestHistoryOffsetTwoValues(t *testing.T) {
	h := NewHistory()
	h.RecordAck("t-0", 5, "a", 1, true, 2)
	h.RecordRead("c", "t-0", 5, "b", 2)
	if got := kinds(h.Violations()); got != "§8.13 offset with two values" {
		t.Fatalf("got %q", got)
	}
	// A recorded truncation between the two leader epochs allows it.
	h = NewHistory()
	h.RecordAck("t-0", 5, "a", 1, true, 2)
	h.RecordTruncation("t-0", 2)
	h.RecordRead("c", "t-0", 5, "b", 2)
	if vs := h.Violations(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
	// ... but not a read served by a later, clean epoch of the same
	// generation as the first.
	h.RecordRead("d", "t-0", 5, "a", 3)
	if got := kinds(h.Violations()); got != "§8.13 offset with two values" {
		t.Fatalf("got %q", got)
	}
}

// TestHistoryExemptTwoValues: under the §6.8 exemption two reads of one
// offset may show two values (the replicas they came from disagree, §6.10
// case 2); it is counted, not reported, and only in the exempt partition.
func TestHistoryExemptTwoValues(t *testing.T) {
	h := NewHistory()
	h.Exempt("t-1")
	h.RecordRead("c", "t-1", 18, "b-131", 9)
	h.RecordRead("d", "t-1", 18, "a-94", 10)
	if vs := h.Violations(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
	if h.ExemptConflicts != 1 {
		t.Fatalf("ExemptConflicts = %d, want 1", h.ExemptConflicts)
	}
	h.RecordRead("c", "t-0", 18, "b-131", 9)
	h.RecordRead("d", "t-0", 18, "a-94", 10)
	if got := kinds(h.Violations()); got != "§8.13 offset with two values" {
		t.Fatalf("got %q", got)
	}
	// A value at two offsets is still reported in the exempt partition.
	h.RecordRead("e", "t-1", 19, "b-131", 10)
	if got := kinds(h.Violations()); got != "§8.13 offset with two values, §8.13 value at two offsets" {
		t.Fatalf("got %q", got)
	}
}

func TestHistoryAcksOneNotShown(t *testing.T) {
	// acks=1 records are not below the HW when acknowledged: losing them
	// is allowed, so a different value later is no violation.
	h := NewHistory()
	h.RecordAck("t-0", 3, "a", 1, false, 2)
	h.RecordRead("c", "t-0", 3, "b", 2)
	h.Final("t-0", map[int64]string{3: "b"}, 2)
	if vs := h.Violations(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
}

func TestHistoryValueTwoOffsets(t *testing.T) {
	h := NewHistory()
	h.RecordAck("t-0", 3, "a", 1, false, 2)
	h.RecordRead("c", "t-0", 4, "a", 1)
	if got := kinds(h.Violations()); got != "§8.13 value at two offsets" {
		t.Fatalf("got %q", got)
	}
}

// TestHistoryReappends: with Reappends, a value may come back at another
// offset only once a recorded truncation may have removed its first copy;
// two copies in one generation, or in the final log, stay violations.
func TestHistoryReappends(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(h *History)
		want string
	}{
		{"after a truncation", func(h *History) {
			h.RecordRead("c", "t-0", 3, "a", 1)
			h.RecordTruncation("t-0", 2)
			h.RecordAck("t-0", 1, "a", 2, true, 2)
			h.Final("t-0", map[int64]string{1: "a"}, 2)
		}, ""},
		{"after a truncation point below the first copy", func(h *History) {
			h.RecordRead("c", "t-0", 3, "a", 1)
			h.RecordTruncationPoint("t-0", 2, 2)
			h.RecordAck("t-0", 5, "a", 2, true, 2)
		}, ""},
		{"a truncation point above the first copy", func(h *History) {
			h.RecordRead("c", "t-0", 3, "a", 1)
			h.RecordTruncationPoint("t-0", 2, 4)
			h.RecordAck("t-0", 5, "a", 2, true, 2)
		}, "§8.13 value at two offsets"},
		{"seen at the first offset after the truncation", func(h *History) {
			h.RecordRead("c", "t-0", 3, "a", 1)
			h.RecordTruncation("t-0", 2)
			h.RecordRead("d", "t-0", 3, "a", 2)
			h.RecordAck("t-0", 5, "a", 2, true, 2)
		}, "§8.13 value at two offsets"},
		{"no truncation", func(h *History) {
			h.RecordRead("c", "t-0", 3, "a", 1)
			h.RecordAck("t-0", 5, "a", 1, true, 2)
		}, "§8.13 value at two offsets"},
		{"an acks=1 answer of a stale leader", func(h *History) {
			h.RecordRead("c", "t-0", 27, "a", 1)
			h.RecordAck("t-0", 34, "a", 0, false, 1)
		}, ""},
		{"an acks=all answer of a second copy", func(h *History) {
			h.RecordRead("c", "t-0", 27, "a", 1)
			h.RecordAck("t-0", 34, "a", 1, true, 1)
		}, "§8.13 value at two offsets"},
		{"twice in the final log", func(h *History) {
			h.RecordRead("c", "t-0", 3, "a", 1)
			h.RecordTruncation("t-0", 2)
			h.Final("t-0", map[int64]string{3: "a", 5: "a"}, 2)
		}, "§8.13 value at two offsets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory()
			h.Reappends = true
			tc.run(h)
			if got := kinds(h.Violations()); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHistoryNonMonotonicRead(t *testing.T) {
	h := NewHistory()
	h.RecordRead("c", "t-0", 3, "a", 1)
	h.RecordRead("c", "t-0", 3, "a", 1)
	if got := kinds(h.Violations()); got != "non-monotonic read" {
		t.Fatalf("got %q", got)
	}
	h = NewHistory()
	h.RecordRead("c", "t-0", 3, "a", 1)
	h.RecordReset("c", "t-0")
	h.RecordRead("c", "t-0", 0, "z", 1)
	h.RecordRead("d", "t-0", 0, "z", 1) // another consumer
	if vs := h.Violations(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
}

func TestHistoryLostAck(t *testing.T) {
	h := NewHistory()
	h.RecordAck("t-0", 0, "a", 1, true, 2)
	h.RecordAck("t-0", 1, "b", 1, true, 2)
	h.Final("t-0", map[int64]string{0: "a"}, 3)
	if got := kinds(h.Violations()); got != "§8.12 acked write lost" {
		t.Fatalf("got %q", got)
	}

	// After a recorded truncation (unclean election) the loss is allowed.
	h = NewHistory()
	h.RecordAck("t-0", 0, "a", 1, true, 2)
	h.RecordAck("t-0", 1, "b", 1, true, 2)
	h.RecordTruncation("t-0", 3)
	h.Final("t-0", map[int64]string{0: "a"}, 3)
	if vs := h.Violations(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}

	// m lossy unclean shutdowns after the ack allow it; fewer do not.
	h = NewHistory()
	h.RecordAck("t-0", 0, "a", 1, true, 2)
	h.RecordAck("t-0", 1, "b", 1, true, 2)
	h.RecordLossyShutdown("t-0", 1, 1)
	h.Final("t-0", map[int64]string{0: "a"}, 3)
	if got := kinds(h.Violations()); got != "§8.12 acked write lost" {
		t.Fatalf("one lossy shutdown with m 2: got %q", got)
	}
	h = NewHistory()
	h.RecordAck("t-0", 0, "a", 1, true, 2)
	h.RecordAck("t-0", 1, "b", 1, true, 2)
	h.RecordLossyShutdown("t-0", 1, 1)
	h.RecordLossyShutdown("t-0", 2, 0)
	h.Final("t-0", map[int64]string{0: "a"}, 3)
	if vs := h.Violations(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
	// A lossy shutdown before the ack does not count.
	h = NewHistory()
	h.RecordLossyShutdown("t-0", 1, 1)
	h.RecordLossyShutdown("t-0", 2, 0)
	h.RecordAck("t-0", 1, "b", 1, true, 2)
	h.Final("t-0", map[int64]string{}, 3)
	if got := kinds(h.Violations()); got != "§8.12 acked write lost" {
		t.Fatalf("got %q", got)
	}
}

func TestHistoryTruncationPointOffset(t *testing.T) {
	// A truncation point cut from offset 5: offset 5 may change across it,
	// offset 4 may not.
	h := NewHistory()
	h.RecordAck("t-0", 4, "a", 1, true, 2)
	h.RecordAck("t-0", 5, "b", 1, true, 2)
	h.RecordTruncationPoint("t-0", 3, 5)
	h.RecordRead("c", "t-0", 5, "x", 3)
	if vs := h.Violations(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
	h.RecordRead("c", "t-0", 6, "y", 3)
	h.RecordRead("d", "t-0", 4, "z", 3)
	if got := kinds(h.Violations()); got != "§8.13 offset with two values" {
		t.Fatalf("got %q", got)
	}

	// Final: the ack at 5 may be gone, the one at 4 may not; a point at an
	// LE not above the ack's excuses nothing.
	h = NewHistory()
	h.RecordAck("t-0", 4, "a", 1, true, 2)
	h.RecordAck("t-0", 5, "b", 1, true, 2)
	h.RecordTruncationPoint("t-0", 3, 5)
	h.Final("t-0", map[int64]string{4: "a", 5: "x"}, 3)
	if vs := h.Violations(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
	h = NewHistory()
	h.RecordAck("t-0", 4, "a", 1, true, 2)
	h.RecordTruncationPoint("t-0", 3, 5)
	h.Final("t-0", map[int64]string{}, 3)
	if got := kinds(h.Violations()); got != "§8.12 acked write lost" {
		t.Fatalf("got %q", got)
	}
	h = NewHistory()
	h.RecordTruncationPoint("t-0", 3, 0)
	h.RecordAck("t-0", 4, "a", 3, true, 2)
	h.Final("t-0", map[int64]string{}, 4)
	if got := kinds(h.Violations()); got != "§8.12 acked write lost" {
		t.Fatalf("got %q", got)
	}
}

func TestHistoryReposition(t *testing.T) {
	h := NewHistory()
	h.RecordRead("c", "t-0", 7, "a", 1)
	h.RecordReposition("c", "t-0", 5)
	h.RecordRead("c", "t-0", 5, "a5", 2)
	if vs := h.Violations(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
	h.RecordReposition("c", "t-0", 5)
	h.RecordRead("c", "t-0", 4, "a4", 2)
	if got := kinds(h.Violations()); got != "non-monotonic read" {
		t.Fatalf("got %q", got)
	}
}

// TestHistoryAccessors: the read-only views a two-history driver uses (the
// simulator's failover check) report what was recorded and create nothing.
func TestHistoryAccessors(t *testing.T) {
	h := NewHistory()
	if h.Acks("t-0") != nil || h.TruncatedAbove("t-0", 0) || h.TruncatedSince("t-0", 0) ||
		h.Owed("t-0") != nil || h.Exempted("t-0") {
		t.Fatal("unknown partition reports something")
	}
	if s := h.Summary(); !strings.HasPrefix(s, "partitions []") {
		t.Fatalf("asking created a partition: %s", s)
	}
	h.RecordAck("t-0", 5, "b", 1, true, 2)
	h.RecordAck("t-0", 3, "a", 1, true, 1)
	h.RecordAck("t-0", 4, "x", 1, false, 2) // acks=1: not an Ack
	copied := h.Seq()
	if copied != 3 {
		t.Fatalf("Seq = %d, want 3", copied)
	}
	want := []Ack{
		{Offset: 3, Value: "a", LeaderEpoch: 1, Seq: 2, MinISR: 1},
		{Offset: 5, Value: "b", LeaderEpoch: 1, Seq: 1, MinISR: 2},
	}
	if got := h.Acks("t-0"); !slices.Equal(got, want) {
		t.Fatalf("Acks = %+v, want %+v", got, want)
	}
	if got := h.Owed("t-0"); !slices.Equal(got, want) {
		t.Fatalf("Owed = %+v, want %+v", got, want)
	}
	// A lossy shutdown of one broker excuses the ack with m 1 at offset 3;
	// one of offset 6 and up touches neither, and one recorded before an
	// ack does not excuse it.
	h.RecordLossyShutdown("t-0", 1, 2)
	h.RecordLossyShutdown("t-0", 2, 6)
	h.RecordAck("t-0", 7, "c", 1, true, 1)
	h.RecordLossyShutdown("t-0", 3, 8)
	want = []Ack{want[1], {Offset: 7, Value: "c", LeaderEpoch: 1, Seq: 6, MinISR: 1}}
	if got := h.Owed("t-0"); !slices.Equal(got, want) {
		t.Fatalf("Owed after lossy shutdowns = %+v, want %+v", got, want)
	}
	h.RecordTruncationPoint("t-0", 4, 6) // points count for neither
	if h.TruncatedAbove("t-0", 1) || h.TruncatedSince("t-0", copied) {
		t.Fatal("a truncation point counted")
	}
	// ... but excuse the acks at and above their offset (sweep seed 2208455).
	if got := h.Owed("t-0"); !slices.Equal(got, want[:1]) {
		t.Fatalf("Owed after a truncation point = %+v, want %+v", got, want[:1])
	}
	h.RecordTruncation("t-0", 3)
	if !h.TruncatedAbove("t-0", 2) || h.TruncatedAbove("t-0", 3) {
		t.Fatal("TruncatedAbove")
	}
	if !h.TruncatedSince("t-0", copied) || h.TruncatedSince("t-0", h.Seq()) {
		t.Fatal("TruncatedSince")
	}
	if got := h.Owed("t-0"); got != nil {
		t.Fatalf("Owed after an unclean election's truncation = %+v, want none", got)
	}
	h.RecordAck("t-0", 9, "d", 4, true, 1) // an ack in the newest epoch
	if got := h.Owed("t-0"); len(got) != 1 || got[0].Value != "d" {
		t.Fatalf("Owed after an ack in the new epoch = %+v", got)
	}
	h.Exempt("t-1")
	if h.Exempted("t-0") || !h.Exempted("t-1") {
		t.Fatal("Exempted")
	}
}
