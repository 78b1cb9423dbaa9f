package storage

import (
	"testing"

	"github.com/twinlog/twinlog"
)

// TestTruncateCheckpointsRecoveryPoint: a truncation that lowers the
// recovery point rewrites the dir's recovery-point checkpoint before it
// returns (Kafka LogManager.truncateTo). Otherwise the checkpoint keeps the
// old value, and a crash after unsynced appends that roll a segment leaves a
// segment ending below it followed by a later one: the partition fails to
// open with ErrCorrupt and goes offline (the simulator's seed 669).
func TestTruncateCheckpointsRecoveryPoint(t *testing.T) {
	for _, full := range []bool{false, true} {
		name := "TruncateTo"
		if full {
			name = "TruncateFullyAndStartAt"
		}
		t.Run(name, func(t *testing.T) {
			fs := NewMemFS()
			opts := Options{SegmentMaxBytes: 4096}
			d, err := OpenLogDir(fs, "/data", opts)
			if err != nil {
				t.Fatal(err)
			}
			tp := twinlog.TopicPartition{Topic: "t", Partition: 0}
			other := twinlog.TopicPartition{Topic: "u", Partition: 0}
			l, err := d.GetOrCreate(tp)
			if err != nil {
				t.Fatal(err)
			}
			lo, err := d.GetOrCreate(other)
			if err != nil {
				t.Fatal(err)
			}
			app := func(l *Log, n int, e twinlog.Epoch) {
				t.Helper()
				for range n {
					b, _ := EncodeBatch([]Record{{Value: make([]byte, 300)}}, BatchOptions{})
					if _, err := l.AppendAsLeader(b, e); err != nil {
						t.Fatal(err)
					}
				}
			}
			app(l, 10, 1)
			app(lo, 3, 1)
			for _, x := range []*Log{l, lo} {
				if err := x.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			readRP := func() map[twinlog.TopicPartition]twinlog.Offset {
				t.Helper()
				rps, err := ReadOffsetCheckpoint(fs, "/data/"+RecoveryPointCheckpointFile)
				if err != nil {
					t.Fatal(err)
				}
				return rps
			}
			if rp := readRP(); rp[tp] != 10 || rp[other] != 3 {
				t.Fatalf("checkpointed recovery points %v, want t-0 10, u-0 3", rp)
			}
			// At the LEO nothing is lowered and nothing is written.
			if err := l.TruncateTo(10); err != nil {
				t.Fatal(err)
			}
			want := twinlog.Offset(5)
			if full {
				err = l.TruncateFullyAndStartAt(want)
			} else {
				err = l.TruncateTo(want)
			}
			if err != nil {
				t.Fatal(err)
			}
			if rp := readRP(); rp[tp] != want || rp[other] != 3 {
				t.Fatalf("checkpointed recovery points after truncation %v, want t-0 %d, u-0 3", rp, want)
			}
			app(l, 20, 2) // unsynced; rolls segments
			d2, err := OpenLogDir(fs.CrashClone(), "/data", opts)
			if err != nil {
				t.Fatalf("reopen after crash: %v", err)
			}
			l2, ok := d2.Get(tp)
			if !ok {
				t.Fatal("log gone")
			}
			if l2.LogEndOffset() < want {
				t.Fatalf("LEO %d after crash, below the truncation offset %d", l2.LogEndOffset(), want)
			}
		})
	}
}
