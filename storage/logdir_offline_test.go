package storage

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/vfs"
)

// TestCorruptPartitionGoesOffline: a partition corrupt below its recovery
// point, or with a bad leader-epoch-checkpoint or partition.metadata, fails
// to open, and only it: the dir opens, the other partition is
// served, the bad one is listed by Offline with the file named, refused by
// GetOrCreate (no empty log in its place), left byte for byte on disk, and
// its checkpoint entries survive the dir's checkpoints, so the next start
// still refuses to cut its durable records.
func TestCorruptPartitionGoesOffline(t *testing.T) {
	damage := map[string]struct {
		file string
		fn   func([]byte) []byte
	}{
		// The magic of the first batch: caught by the clean and the recovery path.
		"segment":                 {segmentName(0) + logSuffix, func(b []byte) []byte { b[16]++; return b }},
		"leader-epoch-checkpoint": {"leader-epoch-checkpoint", func([]byte) []byte { return []byte("0\n2\n1 0\n") }},
		"partition.metadata":      {PartitionMetadataFile, func([]byte) []byte { return []byte("version: 0\ntopic_id: x\n") }},
	}
	for _, clean := range []bool{true, false} {
		for what, dmg := range damage {
			t.Run(map[bool]string{true: "clean", false: "unclean"}[clean]+"/"+what, func(t *testing.T) {
				fsys := NewMemFS()
				good := twinlog.TopicPartition{Topic: "good", Partition: 0}
				bad := twinlog.TopicPartition{Topic: "bad", Partition: 0}
				d, err := OpenLogDir(fsys, "/data", Options{})
				if err != nil {
					t.Fatal(err)
				}
				for _, tp := range []twinlog.TopicPartition{good, bad} {
					l, err := d.GetOrCreate(tp)
					if err != nil {
						t.Fatal(err)
					}
					for i := range 5 {
						if _, err := l.AppendAsLeader(mustBatch(t, testRecords(2, int64(i)), BatchOptions{}), 1); err != nil {
							t.Fatal(err)
						}
					}
					l.SetHighWatermark(10)
					if err := l.WritePartitionMetadata(PartitionMetadata{TopicID: "id-" + tp.Topic, AlignedEpoch: NoAlignedEpoch}); err != nil {
						t.Fatal(err)
					}
				}
				if clean {
					err = d.Close(7)
				} else {
					for _, l := range d.Logs() {
						if err := l.Flush(); err != nil {
							t.Fatal(err)
						}
					}
					err = d.Checkpoint()
				}
				if err != nil {
					t.Fatal(err)
				}
				fsys = fsys.CrashClone()
				seg := filepath.Join("/data", bad.String(), dmg.file)
				data, _ := vfs.ReadFile(fsys, seg)
				data = dmg.fn(data)
				if err := vfs.WriteFileAtomic(fsys, seg, data); err != nil {
					t.Fatal(err)
				}

				for range 2 { // the second start sees what the first one checkpointed
					d, err = OpenLogDir(fsys, "/data", Options{})
					if err != nil {
						t.Fatalf("one corrupt partition failed the dir: %v", err)
					}
					off := d.Offline()
					if len(off) != 1 || !errors.Is(off[bad], ErrLogOffline) || !strings.Contains(off[bad].Error(), seg) {
						t.Fatalf("offline %v, want %v naming %s", off, bad, seg)
					}
					if _, ok := d.Get(bad); ok {
						t.Fatal("the corrupt log is open")
					}
					if _, err := d.GetOrCreate(bad); !errors.Is(err, ErrLogOffline) {
						t.Fatalf("GetOrCreate of the offline partition: %v", err)
					}
					l, ok := d.Get(good)
					if !ok || l.LogEndOffset() != 10 || l.HighWatermark() != 10 {
						t.Fatalf("good partition: open %v", ok)
					}
					if err := d.Checkpoint(); err != nil {
						t.Fatal(err)
					}
					for _, name := range []string{RecoveryPointCheckpointFile, HighWatermarkCheckpointFile} {
						m, err := ReadOffsetCheckpoint(fsys, filepath.Join("/data", name))
						if err != nil || m[bad] != 10 {
							t.Fatalf("%s lost the offline partition's entry: %v %v", name, m, err)
						}
					}
					if err := d.Close(8); err != nil {
						t.Fatal(err)
					}
					if now, _ := vfs.ReadFile(fsys, seg); !bytes.Equal(now, data) {
						t.Fatalf("the damaged %s was changed", dmg.file)
					}
				}
				// The replica leaving the broker deletes the damaged copy.
				d, err = OpenLogDir(fsys, "/data", Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := d.Delete(bad); err != nil {
					t.Fatal(err)
				}
				if len(d.Offline()) != 0 {
					t.Fatal("deleted partition still offline")
				}
				if _, err := fsys.Stat(filepath.Join("/data", bad.String())); err == nil {
					t.Fatal("deleted partition dir still there")
				}
			})
		}
	}
}
