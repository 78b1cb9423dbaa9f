package assign

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
	"github.com/twinlog/twinlog/storage/epoch"
	"github.com/twinlog/twinlog/storage/vfs"
)

// openFixture is one or more log dirs on a MemFS.
type openFixture struct {
	t    *testing.T
	fsys *storage.MemFS
	dirs []*storage.LogDir
}

func newOpenFixture(t *testing.T, n int) *openFixture {
	f := &openFixture{t: t, fsys: storage.NewMemFS()}
	for i := range n {
		d, err := storage.OpenLogDir(f.fsys, fmt.Sprintf("/d%d", i), storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		f.dirs = append(f.dirs, d)
	}
	return f
}

// log creates tp in dir i with records in leader epoch 3 and, unless
// topicID is "", partition.metadata naming it with aligned epoch 2.
func (f *openFixture) log(i int, tp twinlog.TopicPartition, records int, topicID string) {
	t := f.t
	t.Helper()
	l, err := f.dirs[i].GetOrCreate(tp)
	if err != nil {
		t.Fatal(err)
	}
	for range records {
		b, err := storage.EncodeBatch([]storage.Record{{Value: []byte("v")}}, storage.BatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendAsLeader(b, 3); err != nil {
			t.Fatal(err)
		}
	}
	if topicID != "" {
		if err := l.WritePartitionMetadata(storage.PartitionMetadata{TopicID: topicID, AlignedEpoch: 2}); err != nil {
			t.Fatal(err)
		}
	}
}

// garble overwrites partition.metadata of tp in dir i with bytes that do
// not parse (after the dir was opened: OpenLogDir would take it offline).
func (f *openFixture) garble(i int, tp twinlog.TopicPartition) {
	f.t.Helper()
	p := filepath.Join(f.dirs[i].Path(), tp.String(), storage.PartitionMetadataFile)
	if err := vfs.WriteFileAtomic(f.fsys, p, []byte("garbage\n")); err != nil {
		f.t.Fatal(err)
	}
}

func TestOpenLog(t *testing.T) {
	tp := twinlog.TopicPartition{Topic: "t", Partition: 0}
	other := func(p int32) twinlog.TopicPartition { return twinlog.TopicPartition{Topic: "o", Partition: p} }
	type want struct {
		err          bool // a *MetadataError
		dir          int  // the dir holding the log
		leo          twinlog.Offset
		aligned      twinlog.Epoch
		replaced     bool
		found        string
		kept         bool // the log found is the one returned
		metadataOnly bool // no records; partition.metadata names "id" with no aligned epoch
	}
	tests := []struct {
		name  string
		dirs  int
		setup func(f *openFixture)
		want  want
	}{
		{"new", 1, func(*openFixture) {},
			want{dir: 0, leo: 0, aligned: storage.NoAlignedEpoch, metadataOnly: true}},
		{"same id", 1, func(f *openFixture) { f.log(0, tp, 2, "id") },
			want{dir: 0, leo: 2, aligned: 2, kept: true}},
		{"another id", 1, func(f *openFixture) { f.log(0, tp, 2, "old") },
			want{dir: 0, leo: 0, aligned: storage.NoAlignedEpoch, replaced: true, found: "old", metadataOnly: true}},
		{"no partition.metadata", 1, func(f *openFixture) { f.log(0, tp, 2, "") },
			want{dir: 0, leo: 0, aligned: storage.NoAlignedEpoch, replaced: true, found: "", metadataOnly: true}},
		{"unreadable partition.metadata", 1, func(f *openFixture) { f.log(0, tp, 2, "id"); f.garble(0, tp) },
			want{err: true, dir: 0, leo: 2}},
		{"new goes to the dir with fewer logs", 2, func(f *openFixture) {
			f.log(0, other(0), 0, "o")
			f.log(0, other(1), 0, "o")
			f.log(1, other(2), 0, "o")
		}, want{dir: 1, leo: 0, aligned: storage.NoAlignedEpoch, metadataOnly: true}},
		{"new goes to the first dir on a tie", 2, func(f *openFixture) {
			f.log(0, other(0), 0, "o")
			f.log(1, other(1), 0, "o")
		}, want{dir: 0, leo: 0, aligned: storage.NoAlignedEpoch, metadataOnly: true}},
		{"same id found in the fuller dir stays", 2, func(f *openFixture) {
			f.log(1, tp, 1, "id")
			f.log(1, other(0), 0, "o")
		}, want{dir: 1, leo: 1, aligned: 2, kept: true}},
		{"another id is recreated in the dir with fewer logs", 2, func(f *openFixture) {
			f.log(0, other(0), 0, "o")
			f.log(1, tp, 2, "old")
			f.log(1, other(1), 0, "o")
		}, want{dir: 0, leo: 0, aligned: storage.NoAlignedEpoch, replaced: true, found: "old", metadataOnly: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newOpenFixture(t, tt.dirs)
			tt.setup(f)
			before, _ := f.dirs[tt.want.dir].Get(tp)
			o, err := OpenLog(f.dirs, tp, "id")
			if tt.want.err {
				if _, ok := errors.AsType[*MetadataError](err); !ok || !errors.Is(err, storage.ErrBadCheckpoint) {
					t.Fatalf("err = %v, want a *MetadataError wrapping storage.ErrBadCheckpoint", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			// Exactly the wanted dir holds tp.
			for i, d := range f.dirs {
				if _, ok := d.Get(tp); ok != (i == tt.want.dir) {
					t.Errorf("dir %d holds %v: %t, want %t", i, tp, ok, i == tt.want.dir)
				}
			}
			l, _ := f.dirs[tt.want.dir].Get(tp)
			if l == nil {
				t.Fatal("no log")
			}
			if l.LogEndOffset() != tt.want.leo {
				t.Errorf("LEO = %d, want %d", l.LogEndOffset(), tt.want.leo)
			}
			if tt.want.err {
				if l != before {
					t.Error("log replaced after an unreadable partition.metadata")
				}
				return
			}
			if o.Dir != f.dirs[tt.want.dir] || o.Log != l {
				t.Errorf("OpenLog returned dir %s log %p, want %s log %p", o.Dir.Path(), o.Log, f.dirs[tt.want.dir].Path(), l)
			}
			if (o.Log == before) != tt.want.kept {
				t.Errorf("kept the log found: %t, want %t", o.Log == before, tt.want.kept)
			}
			if o.AlignedEpoch != tt.want.aligned || o.Replaced != tt.want.replaced || o.FoundTopicID != tt.want.found {
				t.Errorf("aligned %d replaced %t found %q, want %d %t %q",
					o.AlignedEpoch, o.Replaced, o.FoundTopicID, tt.want.aligned, tt.want.replaced, tt.want.found)
			}
			md, ok, err := l.ReadPartitionMetadata()
			if err != nil || !ok || md.TopicID != "id" {
				t.Errorf("partition.metadata = %+v ok=%t err=%v, want topic id %q", md, ok, err, "id")
			}
			if tt.want.metadataOnly && md.AlignedEpoch != storage.NoAlignedEpoch {
				t.Errorf("new partition.metadata aligned epoch = %d, want %d", md.AlignedEpoch, storage.NoAlignedEpoch)
			}
		})
	}
}

func TestLogState(t *testing.T) {
	f := newOpenFixture(t, 1)
	tp := twinlog.TopicPartition{Topic: "t", Partition: 0}
	f.log(0, tp, 3, "id")
	l, _ := f.dirs[0].Get(tp)
	l.SetHighWatermark(2)
	got := LogState(l, 5)
	want := replica.LogState{LogStartOffset: 0, LogEndOffset: 3, HighWatermark: 2,
		Epochs: []epoch.Entry{{Epoch: 3, StartOffset: 0}}, AlignedEpoch: 5}
	if got.LogStartOffset != want.LogStartOffset || got.LogEndOffset != want.LogEndOffset ||
		got.HighWatermark != want.HighWatermark || got.AlignedEpoch != want.AlignedEpoch || !slices.Equal(got.Epochs, want.Epochs) {
		t.Errorf("LogState = %+v, want %+v", got, want)
	}
}
