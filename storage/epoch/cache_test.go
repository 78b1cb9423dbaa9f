package epoch

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog"
)

func mustCache(t *testing.T, es ...Entry) *Cache {
	t.Helper()
	c, err := NewCache(es)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEndOffsetFor covers every row of the SPEC §2.4 table.
func TestEndOffsetFor(t *testing.T) {
	const leo = 20
	full := []Entry{{1, 0}, {3, 5}, {6, 10}}
	tests := []struct {
		name      string
		entries   []Entry
		e         twinlog.Epoch
		wantEpoch twinlog.Epoch
		wantEnd   twinlog.Offset
	}{
		{"e=-1", full, -1, -1, -1},
		{"empty cache", nil, 4, -1, leo},
		{"e = latest", full, 6, 6, leo},
		{"e > latest", full, 9, 6, leo},
		{"no entry <= e", []Entry{{2, 4}, {5, 8}}, 1, 1, 4},
		{"exact middle epoch", full, 3, 3, 10},
		{"gap epoch", full, 4, 3, 10},
		{"first epoch", full, 1, 1, 5},
		{"epoch 2 between 1 and 3", full, 2, 1, 5},
		{"S4b leader {1:0,2:2}", []Entry{{1, 0}, {2, 2}}, 1, 1, 2},
		{"S4d leader {1:0,3:5} e=2", []Entry{{1, 0}, {3, 5}}, 2, 1, 5},
		{"S4d follower {2:0} e=1", []Entry{{2, 0}}, 1, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCache(t, tt.entries...)
			e, o := c.EndOffsetFor(tt.e, leo)
			if e != tt.wantEpoch || o != tt.wantEnd {
				t.Fatalf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", tt.e, e, o, tt.wantEpoch, tt.wantEnd)
			}
		})
	}
}

// TestDiverging: a reader whose last record is of epoch last and who reads
// from offset from holds records this log does not exactly when the log
// lacks last or ends it before from (KIP-320's check of a fetch).
func TestDiverging(t *testing.T) {
	const leo = 20
	full := []Entry{{1, 0}, {3, 5}, {6, 10}}
	tests := []struct {
		name    string
		last    twinlog.Epoch
		from    twinlog.Offset
		want    bool
		e       twinlog.Epoch
		wantEnd twinlog.Offset
	}{
		{"no last epoch", -1, 7, false, -1, -1},
		{"within epoch 3", 3, 7, false, 3, 10},
		{"at the end of epoch 3", 3, 10, false, 3, 10},
		{"past the end of epoch 3", 3, 11, true, 3, 10},
		{"epoch 4 missing", 4, 8, true, 3, 10},
		{"latest epoch up to the LEO", 6, 20, false, 6, leo},
		{"past the LEO in the latest epoch", 6, 21, true, 6, leo},
		{"a later epoch than the log has", 7, 15, true, 6, leo},
	}
	c := mustCache(t, full...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, end, ok := c.Diverging(tt.last, tt.from, leo)
			if ok != tt.want || e != tt.e || end != tt.wantEnd {
				t.Fatalf("Diverging(%d, %d) = (%d, %d, %t), want (%d, %d, %t)", tt.last, tt.from, e, end, ok, tt.e, tt.wantEnd, tt.want)
			}
		})
	}
}

func TestAssign(t *testing.T) {
	tests := []struct {
		name    string
		start   []Entry
		e       twinlog.Epoch
		s       twinlog.Offset
		want    []Entry
		changed bool
	}{
		{"first", nil, 0, 0, []Entry{{0, 0}}, true},
		{"same epoch later offset", []Entry{{1, 0}}, 1, 5, []Entry{{1, 0}}, false},
		{"new epoch", []Entry{{1, 0}}, 2, 5, []Entry{{1, 0}, {2, 5}}, true},
		{"same epoch earlier offset replaces", []Entry{{1, 3}}, 1, 1, []Entry{{1, 1}}, true},
		{"older epoch drops newer", []Entry{{1, 0}, {3, 5}}, 2, 7, []Entry{{1, 0}, {2, 7}}, true},
		{"start before tail drops it", []Entry{{1, 0}, {3, 5}}, 4, 5, []Entry{{1, 0}, {4, 5}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCache(t, tt.start...)
			if got := c.Assign(tt.e, tt.s); got != tt.changed {
				t.Errorf("changed = %v, want %v", got, tt.changed)
			}
			if d := cmp.Diff(tt.want, c.Entries()); d != "" {
				t.Errorf("entries (-want +got):\n%s", d)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	c := mustCache(t, Entry{1, 0}, Entry{3, 5}, Entry{6, 10})
	c.TruncateFromEnd(10)
	if d := cmp.Diff([]Entry{{1, 0}, {3, 5}}, c.Entries()); d != "" {
		t.Fatalf("TruncateFromEnd(10): %s", d)
	}
	c.TruncateFromStart(7)
	if d := cmp.Diff([]Entry{{3, 7}}, c.Entries()); d != "" {
		t.Fatalf("TruncateFromStart(7): %s", d)
	}
	if c.TruncateFromStart(7) {
		t.Fatal("TruncateFromStart at the current start changed the cache")
	}
	c = mustCache(t, Entry{1, 0}, Entry{3, 5})
	c.TruncateFromStart(5)
	if d := cmp.Diff([]Entry{{3, 5}}, c.Entries()); d != "" {
		t.Fatalf("TruncateFromStart(5): %s", d)
	}
	if !c.Clear() || c.Len() != 0 || c.Latest() != twinlog.NoEpoch {
		t.Fatal("Clear left entries")
	}
}

func TestEpochForOffsetAndFirstAfter(t *testing.T) {
	c := mustCache(t, Entry{1, 0}, Entry{3, 5}, Entry{6, 10})
	for o, want := range map[twinlog.Offset]twinlog.Epoch{0: 1, 4: 1, 5: 3, 9: 3, 10: 6, 99: 6} {
		if got := c.EpochForOffset(o); got != want {
			t.Errorf("EpochForOffset(%d) = %d, want %d", o, got, want)
		}
	}
	if o, ok := c.StartOffsetOfFirstEpochAfter(3); !ok || o != 10 {
		t.Errorf("first after 3 = %d,%v", o, ok)
	}
	if _, ok := c.StartOffsetOfFirstEpochAfter(6); ok {
		t.Error("first after latest should not exist")
	}
	if _, err := NewCache([]Entry{{2, 0}, {1, 3}}); err == nil {
		t.Error("NewCache accepted decreasing epochs")
	}
}
