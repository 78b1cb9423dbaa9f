// Package offsetsync decides a mirror's offset sync (issue 16): which
// committed offsets of the source cluster's consumer groups are written to
// the destination's groups. Mirrored partitions hold the same records at
// the same offsets on both clusters, so an offset needs no translation: a
// group that committed offset o on the source resumes at o on the
// destination after a failover.
//
// The rules, decided here once for the controller's periodic sync and the
// last sync before a stop:
//
//   - only groups whose id the filter takes (include, and not exclude);
//   - only partitions of topics the mirror is still copying (a stopped
//     topic is the destination's own: its consumers commit there);
//   - never a group with members on the destination (its consumers own its
//     offsets; the coordinator refuses such a commit too);
//   - never above what the destination partition holds: an offset is
//     clamped to the destination's high watermark, so a consumer never
//     skips a record the destination does not have yet (it re-reads
//     instead); a partition whose high watermark is unknown is left;
//   - nothing is ever deleted: a group or offset the source no longer has
//     stays as it is on the destination;
//   - an offset already equal on the destination is not written again;
//   - an offset of the destination's own groups whose record a truncation
//     removed (a failback truncates to the LMLE) is moved back to where its
//     leader epoch now ends (Truncated), as a KIP-320 consumer moves.
//
// The package is pure: the caller gathers the facts and performs the
// commits.
package offsetsync

import (
	"regexp"
	"sort"

	"github.com/twinlog/twinlog"
)

// Filter selects groups by id; nil Include takes none, nil Exclude
// excludes none.
type Filter struct {
	Include, Exclude *regexp.Regexp
}

// Takes reports whether the filter selects group id.
func (f Filter) Takes(id string) bool {
	return f.Include != nil && f.Include.MatchString(id) && (f.Exclude == nil || !f.Exclude.MatchString(id))
}

// Offset is a committed offset.
type Offset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// Group is what the caller learnt of one group.
type Group struct {
	ID string
	// Source are the group's committed offsets on the source.
	Source map[twinlog.TopicPartition]Offset
	// DestMembers is how many members the group has on the destination.
	DestMembers int
	// Dest are the group's committed offsets on the destination.
	Dest map[twinlog.TopicPartition]Offset
}

// Commit is one offset to write on the destination.
type Commit struct {
	Partition twinlog.TopicPartition
	To        Offset
	// Clamped: the source's offset was above the destination's high
	// watermark.
	Clamped bool
}

// Skip says why a group gets no commit.
type Skip uint8

// Why a group is skipped.
const (
	NotSkipped Skip = iota
	// Filtered: the filter does not take the group.
	Filtered
	// ActiveOnDestination: the group has members on the destination.
	ActiveOnDestination
)

// Plan returns the commits that bring group g's destination offsets to its
// source offsets on the partitions of mirrored (the topics the mirror
// copies), by the rules of the package doc, sorted by topic and partition;
// hw is the destination partitions' high watermarks (a partition missing
// from it is left).
func Plan(g Group, f Filter, mirrored map[string]bool, hw map[twinlog.TopicPartition]int64) ([]Commit, Skip) {
	switch {
	case !f.Takes(g.ID):
		return nil, Filtered
	case g.DestMembers > 0:
		return nil, ActiveOnDestination
	}
	var out []Commit
	for tp, o := range g.Source {
		if !mirrored[tp.Topic] || o.Offset < 0 {
			continue
		}
		end, ok := hw[tp]
		if !ok || end < 0 {
			continue
		}
		c := Commit{Partition: tp, To: o}
		if o.Offset > end {
			// The epoch of the record before the clamped offset is not the
			// source's: unknown.
			c.To.Offset, c.To.LeaderEpoch, c.Clamped = end, -1, true
		}
		if d, ok := g.Dest[tp]; ok && d == c.To {
			continue
		}
		out = append(out, c)
	}
	sortCommits(out)
	return out, NotSkipped
}

// EpochEnd is a destination partition leader's OffsetForLeaderEpoch answer
// for the leader epoch of a committed offset (SPEC §2.4 endOffsetFor, which
// accounts for the partition's truncation points): the largest epoch ≤ the
// asked one in its log and where it ends there.
type EpochEnd struct {
	Epoch     int32
	EndOffset int64
}

// Truncated returns the commits that move a destination group's offsets
// out of truncated history, as a KIP-320 consumer moves its position: an
// offset committed with leader epoch e whose record the log no longer
// holds (the leader's end offset for e, ends[tp], is below it — a failback
// truncated the log to the LMLE since) is moved to that end offset, with
// the answered epoch, so the consumer re-reads from there instead of
// skipping what replaced the removed records. An end offset without an
// epoch (-1: the leader holds no epoch below it, as after a failback that
// truncated the log to nothing) moves the offset there too, without an
// epoch. Offsets committed without a leader epoch (-1), or whose
// partition has no answer or an unknown end (-1), cannot be placed and
// are left. A group with members is left to them (their clients do the
// same check).
func Truncated(g Group, ends map[twinlog.TopicPartition]EpochEnd) []Commit {
	if g.DestMembers > 0 {
		return nil
	}
	var out []Commit
	for tp, o := range g.Dest {
		e, ok := ends[tp]
		if o.LeaderEpoch < 0 || !ok || e.EndOffset < 0 || e.EndOffset >= o.Offset {
			continue
		}
		out = append(out, Commit{Partition: tp, To: Offset{Offset: e.EndOffset, LeaderEpoch: e.Epoch, Metadata: o.Metadata}, Clamped: true})
	}
	sortCommits(out)
	return out
}

func sortCommits(cs []Commit) {
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i].Partition, cs[j].Partition
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
}
