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
