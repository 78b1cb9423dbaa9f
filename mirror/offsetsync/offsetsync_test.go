package offsetsync

import (
	"regexp"
	"slices"
	"testing"

	"github.com/twinlog/twinlog"
)

func tp(t string, p int32) twinlog.TopicPartition {
	return twinlog.TopicPartition{Topic: t, Partition: p}
}

// TestPlan: the rules of the package doc, one case each.
func TestPlan(t *testing.T) {
	all := Filter{Include: regexp.MustCompile("^(?:.*)$")}
	mirrored := map[string]bool{"a": true, "b": true}
	hw := map[twinlog.TopicPartition]int64{tp("a", 0): 100, tp("a", 1): 50, tp("b", 0): 10, tp("stopped", 0): 100}
	src := map[twinlog.TopicPartition]Offset{
		tp("a", 0):       {Offset: 40, LeaderEpoch: 3, Metadata: "m"},
		tp("a", 1):       {Offset: 70, LeaderEpoch: 4},  // above the destination HW 50
		tp("b", 0):       {Offset: 10, LeaderEpoch: 1},  // exactly the HW: not clamped
		tp("b", 1):       {Offset: 5, LeaderEpoch: 1},   // HW unknown: left
		tp("stopped", 0): {Offset: 9, LeaderEpoch: 1},   // topic no longer mirrored
		tp("a", 2):       {Offset: -1, LeaderEpoch: -1}, // no offset
	}
	want := []Commit{
		{Partition: tp("a", 0), To: Offset{Offset: 40, LeaderEpoch: 3, Metadata: "m"}},
		{Partition: tp("a", 1), To: Offset{Offset: 50, LeaderEpoch: -1}, Clamped: true},
		{Partition: tp("b", 0), To: Offset{Offset: 10, LeaderEpoch: 1}},
	}
	for _, tc := range []struct {
		name string
		g    Group
		f    Filter
		want []Commit
		skip Skip
	}{
		{name: "new group", g: Group{ID: "g", Source: src}, f: all, want: want},
		{name: "equal offsets are not written again", g: Group{ID: "g", Source: src, Dest: map[twinlog.TopicPartition]Offset{
			tp("a", 0): {Offset: 40, LeaderEpoch: 3, Metadata: "m"}, tp("a", 1): {Offset: 50, LeaderEpoch: -1},
		}}, f: all, want: want[2:]},
		{name: "a destination offset ahead is moved to the source's", g: Group{ID: "g", Source: src, Dest: map[twinlog.TopicPartition]Offset{
			tp("a", 0): {Offset: 90, LeaderEpoch: 3, Metadata: "m"}, tp("a", 1): {Offset: 50, LeaderEpoch: -1}, tp("b", 0): {Offset: 10, LeaderEpoch: 1},
		}}, f: all, want: want[:1]},
		{name: "active on the destination", g: Group{ID: "g", Source: src, DestMembers: 1}, f: all, skip: ActiveOnDestination},
		{name: "not included", g: Group{ID: "g", Source: src}, f: Filter{Include: regexp.MustCompile("^(?:app-.*)$")}, skip: Filtered},
		{name: "excluded", g: Group{ID: "app-1", Source: src}, f: Filter{Include: all.Include, Exclude: regexp.MustCompile("^(?:app-.*)$")}, skip: Filtered},
		{name: "no include takes nothing", g: Group{ID: "g", Source: src}, f: Filter{}, skip: Filtered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, skip := Plan(tc.g, tc.f, mirrored, hw)
			if skip != tc.skip || !slices.Equal(got, tc.want) {
				t.Fatalf("Plan = %+v, %v; want %+v, %v", got, skip, tc.want, tc.skip)
			}
		})
	}
}

// TestTruncated: an offset whose epoch now ends below it (a truncation
// removed its record) moves to that end with the answered epoch; an
// offset at or below its epoch's end, one without an epoch or without an
// answer, and a group with members are left.
func TestTruncated(t *testing.T) {
	ends := map[twinlog.TopicPartition]EpochEnd{
		tp("a", 0): {Epoch: 2, EndOffset: 100}, // truncated to 100: offset 150 is gone
		tp("a", 1): {Epoch: 3, EndOffset: 200}, // still holds 150
		tp("a", 2): {Epoch: -1, EndOffset: -1}, // no such epoch: unknown
		tp("a", 4): {Epoch: -1, EndOffset: 0},  // truncated to nothing (seed 13100046)
	}
	g := Group{ID: "g", Dest: map[twinlog.TopicPartition]Offset{
		tp("a", 0): {Offset: 150, LeaderEpoch: 2, Metadata: "m"},
		tp("a", 1): {Offset: 150, LeaderEpoch: 3},
		tp("a", 2): {Offset: 150, LeaderEpoch: 1},
		tp("a", 3): {Offset: 150, LeaderEpoch: 1}, // no answer
		tp("a", 4): {Offset: 131, LeaderEpoch: 2},
		tp("b", 0): {Offset: 150, LeaderEpoch: -1},
	}}
	want := []Commit{
		{Partition: tp("a", 0), To: Offset{Offset: 100, LeaderEpoch: 2, Metadata: "m"}, Clamped: true},
		{Partition: tp("a", 4), To: Offset{Offset: 0, LeaderEpoch: -1}, Clamped: true},
	}
	if got := Truncated(g, ends); !slices.Equal(got, want) {
		t.Fatalf("Truncated = %+v, want %+v", got, want)
	}
	g.DestMembers = 1
	if got := Truncated(g, ends); len(got) != 0 {
		t.Errorf("group with members: %+v", got)
	}
}
