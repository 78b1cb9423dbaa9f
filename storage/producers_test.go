package storage

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/producer"
	"github.com/twinlog/twinlog/storage/vfs"
)

// idemBatch is one batch of n records of producer pid at epoch from
// sequence seq, as a Kafka producer sends it.
func idemBatch(t *testing.T, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	rs := make([]Record, n)
	for i := range rs {
		rs[i] = Record{Timestamp: time.Now().UnixMilli(), Value: []byte("v")}
	}
	b, err := EncodeBatch(rs, BatchOptions{Producer: &Producer{ID: pid, Epoch: epoch, BaseSequence: seq}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func check(t *testing.T, l *Log, b []byte) producer.Verdict {
	t.Helper()
	v, err := ValidateBatches(b)
	if err != nil {
		t.Fatal(err)
	}
	verdict, _ := l.CheckProducers(v)
	return verdict
}

// appendIdem appends producer 7's batch [seq, seq+n) at epoch 0 after
// checking it is new, and returns where it went.
func appendIdem(t *testing.T, l *Log, seq int32, n int) AppendInfo {
	t.Helper()
	b := idemBatch(t, 7, 0, seq, n)
	if v := check(t, l, b); v.Outcome != producer.Append {
		t.Fatalf("seq %d: %v, want append", seq, v.Outcome)
	}
	info, err := l.AppendAsLeader(b, 1)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func snapshots(t *testing.T, fsys FS, dir string) []string {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return !strings.HasSuffix(n, snapshotSuffix) })
}

// TestProducerStateFollowsTheLog: the log's producer state answers a
// retry of any of the producer's last batches with its offsets, after a
// roll, a clean reopen, a crash and a truncation alike; a truncation that
// cuts a batch makes its retry new again (it is appended, not answered
// from a batch the log no longer has).
func TestProducerStateFollowsTheLog(t *testing.T) {
	fsys := NewMemFS()
	opts := Options{SegmentMaxBytes: 300}
	l, err := Open(fsys, "/p", opts)
	if err != nil {
		t.Fatal(err)
	}
	var infos []AppendInfo
	seq := int32(0)
	for range 8 {
		infos = append(infos, appendIdem(t, l, seq, 2))
		seq += 2
	}
	if l.NumSegments() < 3 || len(snapshots(t, fsys, "/p")) < 2 {
		t.Fatalf("%d segments and snapshots %v: the test wants rolls", l.NumSegments(), snapshots(t, fsys, "/p"))
	}
	dupOf := func(l *Log, i int) {
		t.Helper()
		v := check(t, l, idemBatch(t, 7, 0, int32(2*i), 2))
		if v.Outcome != producer.Duplicate || v.Original.FirstOffset != infos[i].FirstOffset || v.Original.LastOffset != infos[i].LastOffset {
			t.Fatalf("retry of batch %d: %v at [%d, %d], want duplicate at [%d, %d]", i, v.Outcome,
				v.Original.FirstOffset, v.Original.LastOffset, infos[i].FirstOffset, infos[i].LastOffset)
		}
	}
	for i := 3; i < 8; i++ {
		dupOf(l, i)
	}
	if v := check(t, l, idemBatch(t, 7, 0, seq+1, 1)); v.Outcome != producer.OutOfOrder {
		t.Fatalf("gap: %v, want out of order", v.Outcome)
	}
	if v := check(t, l, idemBatch(t, 7, 0, 2, 2)); v.Outcome != producer.OutOfOrder {
		t.Fatalf("retry of the sixth-last batch: %v, want out of order", v.Outcome)
	}

	// A crash keeps what was durable: everything is, after Flush.
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	crashed := fsys.CrashClone()
	l2, err := Open(crashed, "/p", opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 8; i++ {
		dupOf(l2, i)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}

	// A clean reopen reads the snapshot Close wrote at the LEO.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if snaps := snapshots(t, fsys, "/p"); snaps[len(snaps)-1] != segmentName(infos[7].LastOffset+1)+snapshotSuffix {
		t.Fatalf("snapshots %v: none at the LEO %d", snaps, infos[7].LastOffset+1)
	}
	l, err = Open(fsys, "/p", Options{SegmentMaxBytes: 300, CleanShutdown: true, RecoveryPoint: infos[7].LastOffset + 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 8; i++ {
		dupOf(l, i)
	}

	// Truncating the last two batches: their snapshots go, the state ends
	// at batch 5, and the cut batch 6 is appended anew.
	if err := l.TruncateTo(infos[6].FirstOffset); err != nil {
		t.Fatal(err)
	}
	for _, n := range snapshots(t, fsys, "/p") {
		if o, _ := parseSnapshotName(n); o > infos[6].FirstOffset {
			t.Fatalf("snapshot %s above the truncation at %d", n, infos[6].FirstOffset)
		}
	}
	dupOf(l, 5)
	if v := check(t, l, idemBatch(t, 7, 0, 14, 2)); v.Outcome != producer.OutOfOrder {
		t.Fatalf("batch 7 after the cut: %v, want out of order", v.Outcome)
	}
	re := appendIdem(t, l, 12, 2)
	if re.FirstOffset != infos[6].FirstOffset {
		t.Fatalf("batch 6 appended again at %d, want %d", re.FirstOffset, infos[6].FirstOffset)
	}

	// A full truncation forgets the producer.
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if len(snapshots(t, fsys, "/p")) != 0 || len(l.Producers()) != 0 {
		t.Fatalf("after a full truncation: snapshots %v, producers %+v", snapshots(t, fsys, "/p"), l.Producers())
	}
	if v := check(t, l, idemBatch(t, 7, 0, 12, 2)); v.Outcome != producer.Append {
		t.Fatalf("after a full truncation: %v, want append", v.Outcome)
	}
}

// TestProducerSnapshotDamageAndStaleness: a damaged snapshot is removed
// and the state rebuilt from the log; a snapshot above the LEO (the tail
// it saw was lost in a crash) is removed durably at Open, so the log
// growing past it again cannot pair them after another crash.
func TestProducerSnapshotDamageAndStaleness(t *testing.T) {
	fsys := NewMemFS()
	opts := Options{SegmentMaxBytes: 300}
	l, err := Open(fsys, "/p", opts)
	if err != nil {
		t.Fatal(err)
	}
	var infos []AppendInfo
	for i := range 6 {
		infos = append(infos, appendIdem(t, l, int32(2*i), 2))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	snaps := snapshots(t, fsys, "/p")
	last := "/p/" + snaps[len(snaps)-1]
	data, err := vfs.ReadFile(fsys, last)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := vfs.WriteFileAtomic(fsys, last, data); err != nil {
		t.Fatal(err)
	}
	l, err = Open(fsys, "/p", Options{SegmentMaxBytes: 300, CleanShutdown: true, RecoveryPoint: infos[5].LastOffset + 1})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(snapshots(t, fsys, "/p"), snaps[len(snaps)-1]) {
		t.Fatal("the damaged snapshot is still there")
	}
	v := check(t, l, idemBatch(t, 7, 0, 10, 2))
	if v.Outcome != producer.Duplicate || v.Original.FirstOffset != infos[5].FirstOffset {
		t.Fatalf("retry of the last batch after a damaged snapshot: %v %+v", v.Outcome, v.Original)
	}

	// Unsynced appends that roll write a snapshot above what survives a
	// crash of the data.
	for i := 6; i < 12; i++ {
		appendIdem(t, l, int32(2*i), 2)
	}
	crashed := fsys.CrashClone()
	l2, err := Open(crashed, "/p", opts)
	if err != nil {
		t.Fatal(err)
	}
	leo := l2.LogEndOffset()
	for _, n := range snapshots(t, crashed, "/p") {
		if o, _ := parseSnapshotName(n); o > leo {
			t.Fatalf("snapshot %s above the LEO %d after recovery", n, leo)
		}
	}
	if n := snapshots(t, crashed.CrashClone(), "/p"); !slices.Equal(n, snapshots(t, crashed, "/p")) {
		t.Fatalf("removal of stale snapshots not durable: %v after a crash, %v before", n, snapshots(t, crashed, "/p"))
	}
	// The state ends where the log does.
	ps := l2.Producers()
	if len(ps) != 1 || ps[0].Batches[len(ps[0].Batches)-1].LastOffset != leo-1 {
		t.Fatalf("producers %+v with LEO %d", ps, leo)
	}
}

// TestProducerSnapshotRoundTrip: a snapshot decodes to the state it
// encodes, and any single flipped byte is refused.
func TestProducerSnapshotRoundTrip(t *testing.T) {
	s := producer.New()
	for i := range 7 {
		s.Apply(producer.Batch{ProducerID: 3, Epoch: 1, FirstSeq: int32(i), LastSeq: int32(i), FirstOffset: twinlog.Offset(i), LastOffset: twinlog.Offset(i), MaxTimestamp: 9})
	}
	s.Apply(producer.Batch{ProducerID: 1 << 50, Epoch: 0, FirstSeq: 4, LastSeq: 8, FirstOffset: 10, LastOffset: 14, MaxTimestamp: 11})
	buf := s.MarshalSnapshot()
	got, err := producer.UnmarshalSnapshot(buf)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := got.Producers(), s.Producers(); len(a) != len(b) || !slices.EqualFunc(a, b, func(x, y producer.Producer) bool {
		return x.ID == y.ID && x.Epoch == y.Epoch && slices.Equal(x.Batches, y.Batches)
	}) {
		t.Fatalf("round trip: %+v, want %+v", a, b)
	}
	for i := range buf {
		bad := slices.Clone(buf)
		bad[i] ^= 0x10
		if _, err := producer.UnmarshalSnapshot(bad); err == nil {
			t.Fatalf("byte %d flipped: decoded", i)
		}
	}
}
