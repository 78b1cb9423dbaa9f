package storage

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"

	"github.com/twinlog/twinlog"
)

// withoutRecent runs fn with every segment's recent-batch cache hidden, so
// find and ReadInto take the header-reading path.
func withoutRecent(l *Log, fn func()) {
	saved := make([][]recentBatch, len(l.segs))
	for i, s := range l.segs {
		saved[i], s.recent = s.recent, nil
	}
	defer func() {
		for i, s := range l.segs {
			s.recent = saved[i]
		}
	}()
	fn()
}

// TestRecentBatchesAgreeWithScan: after any mix of leader appends, follower
// appends with offset gaps, truncations and rolls, find and ReadInto answer
// from the recent-batch cache exactly as from the file headers.
func TestRecentBatchesAgreeWithScan(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clock := newClock()
		o := testOpts(t, clock)
		o.Logger = nil
		o.SegmentMaxBytes = int64(rapid.IntRange(600, 6000).Draw(rt, "segment bytes"))
		l := openLog(t, NewMemFS(), o)
		defer l.Close()
		epoch := twinlog.Epoch(1)
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2, 3, 4:
				b := batchOf(t, rapid.IntRange(1, 5).Draw(rt, "records"), rapid.IntRange(0, 200).Draw(rt, "size"), 1)
				if _, err := l.AppendAsLeader(b, epoch); err != nil {
					rt.Fatal(err)
				}
			case 5, 6:
				// Several follower batches in one call, with offset gaps.
				var buf []byte
				next := l.LogEndOffset()
				for range rapid.IntRange(1, 4).Draw(rt, "batches") {
					next += twinlog.Offset(rapid.IntRange(0, 3).Draw(rt, "gap"))
					b := BatchView(batchOf(t, rapid.IntRange(1, 3).Draw(rt, "records"), 50, 1))
					b.SetBaseOffset(next)
					b.SetLeaderEpoch(epoch)
					next = b.NextOffset()
					buf = append(buf, b...)
				}
				if _, err := l.AppendAsFollower(buf); err != nil {
					rt.Fatal(err)
				}
			case 7:
				if leo := l.LogEndOffset(); leo > 0 {
					to := twinlog.Offset(rapid.Int64Range(0, int64(leo)).Draw(rt, "truncate to"))
					if err := l.TruncateTo(to); err != nil {
						rt.Fatal(err)
					}
				}
			case 8:
				epoch++
			case 9:
				if err := l.Roll(); err != nil {
					rt.Fatal(err)
				}
			}
			checkRecentAgrees(rt, l)
		}
	})
}

func checkRecentAgrees(rt *rapid.T, l *Log) {
	leo := l.LogEndOffset()
	for _, s := range l.segs {
		for o := s.base; o <= s.next+1; o++ {
			got, err := s.find(o)
			if err != nil {
				rt.Fatal(err)
			}
			var want int64
			withoutRecent(l, func() { want, err = s.find(o) })
			if err != nil || got != want {
				rt.Fatalf("segment %d find(%d) = %d, scan says %d (%v)", s.base, o, got, want, err)
			}
		}
	}
	for from := l.LogStartOffset(); from <= leo; from++ {
		maxBytes := rapid.IntRange(1, 3000).Draw(rt, "max bytes")
		upTo := twinlog.Offset(rapid.Int64Range(int64(from), int64(leo)+1).Draw(rt, "up to"))
		got, gerr := l.Read(from, maxBytes, upTo)
		var want ReadResult
		var werr error
		withoutRecent(l, func() { want, werr = l.Read(from, maxBytes, upTo) })
		if (gerr == nil) != (werr == nil) || !bytes.Equal(got.Batches, want.Batches) {
			rt.Fatalf("Read(%d, %d, %d): %d bytes (%v), scan: %d bytes (%v)", from, maxBytes, upTo, len(got.Batches), gerr, len(want.Batches), werr)
		}
	}
}
