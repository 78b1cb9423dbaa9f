// Package epoch keeps a partition's leader-epoch history: the ordered list of
// (epoch, start offset) entries that Kafka calls the leader epoch cache, and
// its on-disk checkpoint (SPEC §2.3, §2.4).
//
// Invariant: entries are strictly increasing in both epoch and start offset.
//
// Cache is a pure value: it does no I/O and is not safe for concurrent use.
// The owner persists Entries() with WriteCheckpoint after every change that
// reports changed = true.
package epoch

import (
	"fmt"
	"slices"

	"github.com/twinlog/twinlog"
)

// Entry is one leader epoch and the first offset written in it.
type Entry struct {
	Epoch       twinlog.Epoch
	StartOffset twinlog.Offset
}

func (e Entry) String() string { return fmt.Sprintf("%d:%d", e.Epoch, e.StartOffset) }

// Cache is the in-memory leader epoch history of one partition.
type Cache struct {
	entries []Entry
}

// NewCache returns a cache holding entries, which must be strictly
// increasing in epoch and start offset.
func NewCache(entries []Entry) (*Cache, error) {
	if err := validate(entries); err != nil {
		return nil, err
	}
	return &Cache{entries: slices.Clone(entries)}, nil
}

func validate(entries []Entry) error {
	for i, e := range entries {
		if e.Epoch < 0 || e.StartOffset < 0 {
			return fmt.Errorf("epoch: entry %d (%v) is negative", i, e)
		}
		if i > 0 {
			p := entries[i-1]
			if e.Epoch <= p.Epoch || e.StartOffset <= p.StartOffset {
				return fmt.Errorf("epoch: entry %d (%v) does not follow %v", i, e, p)
			}
		}
	}
	return nil
}

// Entries returns a copy of the entries, oldest first.
func (c *Cache) Entries() []Entry { return slices.Clone(c.entries) }

// Len is the number of entries.
func (c *Cache) Len() int { return len(c.entries) }

// Latest returns the latest cached epoch, or NoEpoch if the cache is empty.
func (c *Cache) Latest() twinlog.Epoch {
	if len(c.entries) == 0 {
		return twinlog.NoEpoch
	}
	return c.entries[len(c.entries)-1].Epoch
}

// LatestEntry returns the latest entry and whether there is one.
func (c *Cache) LatestEntry() (Entry, bool) {
	if len(c.entries) == 0 {
		return Entry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// Assign records that epoch e starts at offset s (SPEC §2.4). It is a no-op
// if e is the latest epoch and s is at or after its start; otherwise it drops
// tail entries with epoch >= e or start >= s and appends (e, s). It reports
// whether the cache changed (and so must be checkpointed).
func (c *Cache) Assign(e twinlog.Epoch, s twinlog.Offset) (changed bool) {
	if last, ok := c.LatestEntry(); ok && last.Epoch == e && s >= last.StartOffset {
		return false
	}
	n := len(c.entries)
	for n > 0 && (c.entries[n-1].Epoch >= e || c.entries[n-1].StartOffset >= s) {
		n--
	}
	c.entries = append(c.entries[:n], Entry{Epoch: e, StartOffset: s})
	return true
}

// TruncateFromEnd drops entries starting at or after o (a log truncated to o).
func (c *Cache) TruncateFromEnd(o twinlog.Offset) (changed bool) {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= o {
		n--
	}
	changed = n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// TruncateFromStart drops entries starting at or before o and re-inserts the
// last dropped epoch at o (the log start moved to o).
func (c *Cache) TruncateFromStart(o twinlog.Offset) (changed bool) {
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= o {
		i++
	}
	if i == 0 {
		return false
	}
	last := c.entries[i-1]
	if i == 1 && last.StartOffset == o {
		return false
	}
	rest := append([]Entry{{Epoch: last.Epoch, StartOffset: o}}, c.entries[i:]...)
	c.entries = rest
	return true
}

// Clear drops every entry (a full truncation).
func (c *Cache) Clear() (changed bool) {
	changed = len(c.entries) > 0
	c.entries = c.entries[:0]
	return changed
}

// EndOffsetFor answers OffsetForLeaderEpoch for epoch e given the log end
// offset leo, per the table of SPEC §2.4:
//
//	e = −1            → (−1, −1)
//	cache empty       → (−1, LEO)
//	e ≥ latest        → (latest, LEO)
//	no entry ≤ e      → (e, first entry's start)
//	otherwise         → (largest epoch ≤ e, start of the first epoch > e)
func (c *Cache) EndOffsetFor(e twinlog.Epoch, leo twinlog.Offset) (twinlog.Epoch, twinlog.Offset) {
	switch {
	case e == twinlog.NoEpoch:
		return twinlog.NoEpoch, twinlog.NoOffset
	case len(c.entries) == 0:
		return twinlog.NoEpoch, leo
	case e >= c.Latest():
		return c.Latest(), leo
	}
	// First entry with epoch > e; it exists because e < latest.
	i, _ := slices.BinarySearchFunc(c.entries, e+1, func(en Entry, t twinlog.Epoch) int {
		return int(en.Epoch) - int(t)
	})
	if i == 0 {
		return e, c.entries[0].StartOffset
	}
	return c.entries[i-1].Epoch, c.entries[i].StartOffset
}

// Diverging decides a fetch that carries the epoch of the last record
// its reader holds (KIP-320's lastFetchedEpoch; NoEpoch: none, nothing
// to check) against this log, whose end is leo: the reader's log diverges
// from this one when this log has no epoch last (the largest it holds at
// or below it is smaller) or its last ends before fetchOffset. Then the
// answer is EndOffsetFor(last), where the reader must truncate to; ok is
// false when the logs agree up to fetchOffset.
func (c *Cache) Diverging(last twinlog.Epoch, fetchOffset, leo twinlog.Offset) (e twinlog.Epoch, end twinlog.Offset, ok bool) {
	if last < 0 {
		return twinlog.NoEpoch, twinlog.NoOffset, false
	}
	e, end = c.EndOffsetFor(last, leo)
	return e, end, e < last || end < fetchOffset
}

// EpochForOffset returns the epoch covering offset o (the last entry starting
// at or before o), or NoEpoch if o precedes every entry.
func (c *Cache) EpochForOffset(o twinlog.Offset) twinlog.Epoch {
	i, found := slices.BinarySearchFunc(c.entries, o, func(en Entry, t twinlog.Offset) int {
		return int(en.StartOffset - t)
	})
	if found {
		return c.entries[i].Epoch
	}
	if i == 0 {
		return twinlog.NoEpoch
	}
	return c.entries[i-1].Epoch
}

// StartOffsetOfFirstEpochAfter returns the start of the first cached epoch
// greater than e, and false if there is none. LMLE truncation cuts there
// (SPEC §6.6 step 2).
func (c *Cache) StartOffsetOfFirstEpochAfter(e twinlog.Epoch) (twinlog.Offset, bool) {
	for _, en := range c.entries {
		if en.Epoch > e {
			return en.StartOffset, true
		}
	}
	return 0, false
}
