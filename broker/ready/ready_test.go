package ready

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
	"github.com/twinlog/twinlog/storage/epoch"
)

var tp = twinlog.TopicPartition{Topic: "t", Partition: 0}

// host records what Drain handed it.
type host struct {
	err       error
	proposals map[replica.ProposalID]storage.Validated
	fetched   storage.Validated
	calls     []string
	delivered []replica.ProduceResult
	appended  []storage.AppendInfo
	cuts      []replica.LogOp
	alters    int
}

func newHost() *host { return &host{proposals: map[replica.ProposalID]storage.Validated{}} }

func (h *host) Err() error { return h.err }
func (h *host) Fail(err error) {
	h.calls = append(h.calls, "fail")
	if h.err == nil {
		h.err = err
	}
}
func (h *host) NowMs() int64 { return 1000 }
func (h *host) Proposal(id replica.ProposalID) (storage.Validated, bool) {
	v, ok := h.proposals[id]
	delete(h.proposals, id)
	return v, ok
}
func (h *host) Fetched() storage.Validated {
	v := h.fetched
	h.fetched = storage.Validated{}
	return v
}
func (h *host) Appended(_ replica.LogOp, info storage.AppendInfo, _ storage.Validated) {
	h.calls = append(h.calls, "appended")
	h.appended = append(h.appended, info)
}
func (h *host) Cut(op replica.LogOp) {
	h.calls = append(h.calls, "cut")
	h.cuts = append(h.cuts, op)
}
func (h *host) Repaired([]twinlog.BrokerID) { h.calls = append(h.calls, "repaired") }
func (h *host) Deliver(res replica.ProduceResult) {
	h.calls = append(h.calls, "deliver")
	h.delivered = append(h.delivered, res)
}
func (h *host) AlterPartition(replica.AlterPartitionProposal) {
	h.calls = append(h.calls, "alter")
	h.alters++
}
func (h *host) Event(replica.Event) {}

func openLog(t *testing.T) *storage.Log {
	t.Helper()
	l, err := storage.Open(storage.NewMemFS(), "/t-0", storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func batch(t *testing.T, values ...string) []byte {
	t.Helper()
	recs := make([]storage.Record, len(values))
	for i, v := range values {
		recs[i] = storage.Record{Value: []byte(v)}
	}
	b, err := storage.EncodeBatch(recs, storage.BatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newReplica is broker 1's replica of a log, in LE le led by leader, with
// replicas isr all in the ISR and m 1.
func newReplica(t *testing.T, l *storage.Log, leader twinlog.BrokerID, le twinlog.Epoch, isr ...twinlog.BrokerID) *replica.Replica {
	t.Helper()
	r, err := replica.New(replica.Config{ID: 1, Partition: tp}, replica.LogState{
		LogEndOffset: l.LogEndOffset(), Epochs: l.Epochs().Entries(), AlignedEpoch: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	brokers := map[twinlog.BrokerID]twinlog.BrokerEpoch{}
	for _, b := range isr {
		brokers[b] = 1
	}
	r.ApplyPartitionState(replica.PartitionState{Leader: leader, LeaderEpoch: le, PartitionEpoch: 1,
		Replicas: isr, ISR: isr, MinISR: 1, Brokers: brokers}, 1000)
	Drain(r, l, "id", newHost())
	return r
}

// TestDrainLeaderAppend: a proposal's validated batch is appended stamped
// with the replica's offsets and epoch, the HW follows, and the produce
// result is delivered after the append; an append and an HW move are
// progress only.
func TestDrainLeaderAppend(t *testing.T) {
	l := openLog(t)
	r := newReplica(t, l, 1, 3, 1)
	h := newHost()
	v, _, err := storage.ValidateProducerBatches(batch(t, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	h.proposals[7] = v
	if d := r.Propose(replica.Proposal{ID: 7, Acks: replica.AcksAll, TimeoutMs: 1000, NumRecords: 2}, 1000); d.Error != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("propose: %v", d.Error)
	}
	sum := Drain(r, l, "id", h)
	if l.LogEndOffset() != 2 || l.HighWatermark() != 2 || r.HighWatermark() != 2 {
		t.Fatalf("log LEO %d HW %d, replica HW %d; want 2, 2, 2", l.LogEndOffset(), l.HighWatermark(), r.HighWatermark())
	}
	if want := []epoch.Entry{{Epoch: 3, StartOffset: 0}}; !slices.Equal(l.Epochs().Entries(), want) {
		t.Fatalf("epochs %v, want %v", l.Epochs().Entries(), want)
	}
	if len(h.delivered) != 1 || h.delivered[0].ID != 7 || h.delivered[0].Error != pb.ErrorCode_ERROR_CODE_NONE || h.delivered[0].BaseOffset != 0 {
		t.Fatalf("delivered %+v", h.delivered)
	}
	if i, j := slices.Index(h.calls, "appended"), slices.Index(h.calls, "deliver"); i < 0 || j < i {
		t.Fatalf("calls %v: the result before the append", h.calls)
	}
	if !sum.Changed || !sum.ProgressOnly {
		t.Fatalf("summary %+v, want a progress-only change", sum)
	}
	if len(h.proposals) != 0 {
		t.Fatal("the proposal was not taken")
	}
}

// TestDrainFetchedMustMatch: a follower append whose fetched bytes are not
// the batches the machine accepted writes nothing and fails the partition.
func TestDrainFetchedMustMatch(t *testing.T) {
	l := openLog(t)
	r := newReplica(t, l, 2, 1, 1, 2)
	ft, ok := r.NextFetch()
	if !ok {
		t.Fatal("no fetch")
	}
	h := newHost()
	one, _ := storage.ValidateBatches(batch(t, "x"))
	// The machine is told of a two-record batch; the host holds a one-record one.
	r.HandleFetchResponse(replica.FetchResponse{Request: ft.Request, LeaderEpoch: 1, HighWatermark: 0, LogEndOffset: 2,
		Batches: []replica.BatchMeta{{BaseOffset: 0, LastOffset: 1, Epoch: 1}}}, 1000)
	h.fetched = one
	sum := Drain(r, l, "id", h)
	if h.err == nil || !strings.Contains(h.err.Error(), "fetched batch") {
		t.Fatalf("err %v, want a fetched-batch mismatch", h.err)
	}
	if l.LogEndOffset() != 0 || len(h.appended) != 0 {
		t.Fatalf("appended %v (log LEO %d) from mismatched bytes", h.appended, l.LogEndOffset())
	}
	if sum.ProgressOnly {
		t.Fatal("a failure counted as progress only")
	}
}

// TestDrainFailedWritesNothing: once the host has failed, Drain writes
// nothing and sends no AlterPartition, but produce results and Advance
// still flow (the request is answered, the machine moves on).
func TestDrainFailedWritesNothing(t *testing.T) {
	l := openLog(t)
	r := newReplica(t, l, 1, 1, 1)
	h := newHost()
	h.err = errors.New("disk gone")
	v, _, _ := storage.ValidateProducerBatches(batch(t, "a"))
	h.proposals[1] = v
	if d := r.Propose(replica.Proposal{ID: 1, Acks: replica.AcksLeader, TimeoutMs: 1000, NumRecords: 1}, 1000); d.Error != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("propose: %v", d.Error)
	}
	sum := Drain(r, l, "id", h)
	if l.LogEndOffset() != 0 || len(h.appended) != 0 || h.alters != 0 {
		t.Fatalf("a failed partition wrote: LEO %d, appended %v, alters %d", l.LogEndOffset(), h.appended, h.alters)
	}
	if len(h.delivered) != 1 {
		t.Fatalf("delivered %+v, want the request answered", h.delivered)
	}
	if r.HasReady() {
		t.Fatal("Drain left a Ready")
	}
	if sum.ProgressOnly {
		t.Fatal("a failed partition's drain counted as progress only")
	}
}

// TestDrainTruncationConfirmsLogEnd: a truncation inside a batch removes
// the whole batch (storage's rule); Drain tells the machine where the log
// really ends, and the host's Cut sees the op.
func TestDrainTruncationConfirmsLogEnd(t *testing.T) {
	l := openLog(t)
	if _, err := l.AppendAsLeader(batch(t, "a", "b", "c", "d"), 1); err != nil {
		t.Fatal(err)
	}
	r := newReplica(t, l, 2, 2, 1, 2)
	ft, ok := r.NextFetch()
	if !ok {
		t.Fatal("no fetch")
	}
	h := newHost()
	// The leader's epoch 1 ended at offset 2: cut there, inside the batch.
	r.HandleFetchResponse(replica.FetchResponse{Request: ft.Request, LeaderEpoch: 2, HighWatermark: 0, LogEndOffset: 5,
		DivergingEpoch: &replica.EpochEndOffset{Epoch: 1, EndOffset: 2}}, 1000)
	sum := Drain(r, l, "id", h)
	if h.err != nil {
		t.Fatal(h.err)
	}
	if l.LogEndOffset() != 0 || r.LogEndOffset() != 0 {
		t.Fatalf("log LEO %d, replica LEO %d; want both 0 (the straddling batch went whole)", l.LogEndOffset(), r.LogEndOffset())
	}
	if len(h.cuts) != 1 || h.cuts[0].Kind != replica.OpTruncate || h.cuts[0].Offset != 2 {
		t.Fatalf("cuts %v, want truncate to 2", h.cuts)
	}
	if !sum.Changed || sum.ProgressOnly {
		t.Fatalf("summary %+v: a truncation is a change, and more than progress", sum)
	}
	if _, ok := r.NextFetch(); !ok {
		t.Fatal("the follower does not fetch again after the confirmed truncation")
	}
}
