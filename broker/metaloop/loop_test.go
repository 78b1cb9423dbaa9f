package metaloop_test

import (
	"errors"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/metaloop"
	"github.com/twinlog/twinlog/metadata"
)

const (
	idle    = 40 * time.Millisecond
	backoff = 100 * time.Millisecond
)

// fake is the Loop's Env and Host over a real image: requests and timers
// wait until the test answers or fires them.
type fake struct {
	img      *metadata.Image
	epoch    int64
	reqs     []*pb.FetchMetadataRequest
	dones    []func(*pb.FetchMetadataResponse, error)
	waits    []time.Duration
	timers   []func()
	applied  []int64 // before, per Applied
	reloads  int
	events   []metaloop.Kind
	applyErr error
}

func (f *fake) After(d time.Duration, fn func()) {
	f.waits, f.timers = append(f.waits, d), append(f.timers, fn)
}
func (f *fake) Fetch(req *pb.FetchMetadataRequest, done func(*pb.FetchMetadataResponse, error)) {
	f.reqs, f.dones = append(f.reqs, req), append(f.dones, done)
}
func (f *fake) Position() (int64, int64) { return f.img.Offset(), f.epoch }
func (f *fake) Reload()                  { f.reloads++; f.img = metadata.New("") }
func (f *fake) Apply(resp *pb.FetchMetadataResponse) error {
	if f.applyErr != nil {
		return f.applyErr
	}
	return metadata.ApplyTo(f.img, resp)
}
func (f *fake) Applied(_ *pb.FetchMetadataResponse, before int64) {
	f.applied = append(f.applied, before)
}
func (f *fake) Event(ev metaloop.Event) { f.events = append(f.events, ev.Kind) }

// answer answers the last request.
func (f *fake) answer(t *testing.T, resp *pb.FetchMetadataResponse, err error) {
	t.Helper()
	if len(f.dones) == 0 {
		t.Fatal("no request")
	}
	f.dones[len(f.dones)-1](resp, err)
}

// fire fires the last timer, which must wait d.
func (f *fake) fire(t *testing.T, d time.Duration) {
	t.Helper()
	if len(f.timers) == 0 || f.waits[len(f.waits)-1] != d {
		t.Fatalf("timers %v, want one of %v", f.waits, d)
	}
	f.timers[len(f.timers)-1]()
}

func start(t *testing.T) (*fake, *metaloop.Loop) {
	t.Helper()
	f := &fake{img: metadata.New(""), epoch: 7}
	l := metaloop.New(f, f, metaloop.Config{BrokerID: 2, MaxWait: time.Second, Idle: idle, Backoff: backoff, MaxSnapshotItems: 10})
	l.Start()
	l.Start() // once
	if len(f.reqs) != 1 {
		t.Fatalf("requests %d after Start", len(f.reqs))
	}
	if r := f.reqs[0]; r.GetBrokerId() != 2 || r.GetBrokerEpoch() != 7 || r.GetFromOffset() != 1 || r.GetMaxWaitMs() != 1000 || r.GetSnapshotCursor() != nil {
		t.Fatalf("first request %v", r)
	}
	return f, l
}

func deltas(from, to int64) *pb.FetchMetadataResponse {
	resp := &pb.FetchMetadataResponse{HighOffset: to}
	for o := from; o <= to; o++ {
		resp.Deltas = append(resp.Deltas, &pb.MetadataDelta{Offset: o})
	}
	return resp
}

// TestLoopApplies: deltas are applied and followed at once from the new
// offset; an answer with nothing new waits Idle.
func TestLoopApplies(t *testing.T) {
	f, _ := start(t)
	f.answer(t, deltas(1, 3), nil)
	if f.img.Offset() != 3 || len(f.applied) != 1 || f.applied[0] != 0 {
		t.Fatalf("image at %d, applied %v", f.img.Offset(), f.applied)
	}
	if len(f.reqs) != 2 || f.reqs[1].GetFromOffset() != 4 {
		t.Fatalf("next request %v, want from 4 at once", f.reqs[len(f.reqs)-1])
	}
	f.answer(t, &pb.FetchMetadataResponse{HighOffset: 3}, nil)
	if len(f.reqs) != 2 {
		t.Fatal("an empty answer was followed at once")
	}
	f.fire(t, idle)
	if len(f.reqs) != 3 || f.reqs[2].GetFromOffset() != 4 {
		t.Fatalf("requests %d after the idle pause", len(f.reqs))
	}
}

// TestLoopSnapshotPages: a snapshot's pages are asked for at once with the
// cursor and the snapshot is applied whole; a failed request keeps the
// cursor and waits Backoff.
func TestLoopSnapshotPages(t *testing.T) {
	f, _ := start(t)
	first := &pb.FetchMetadataResponse{Snapshot: &pb.MetadataSnapshot{Offset: 3, ClusterId: "c",
		Topics: []*pb.TopicRecord{{Name: "t", TopicId: "x", PartitionCount: 1}}},
		NextSnapshotCursor: &pb.SnapshotCursor{Offset: 3, Position: 1}}
	f.answer(t, first, nil)
	if len(f.reqs) != 2 || f.reqs[1].GetSnapshotCursor().GetPosition() != 1 || f.img.Offset() != 0 {
		t.Fatalf("after the first page: requests %v, image at %d", f.reqs, f.img.Offset())
	}
	f.answer(t, nil, errors.New("unavailable"))
	f.fire(t, backoff)
	if len(f.reqs) != 3 || f.reqs[2].GetSnapshotCursor().GetPosition() != 1 {
		t.Fatalf("retry lost the cursor: %v", f.reqs[len(f.reqs)-1])
	}
	last := &pb.FetchMetadataResponse{ClusterId: "c", SnapshotPosition: 1, HighOffset: 3,
		Snapshot: &pb.MetadataSnapshot{Offset: 3, Partitions: []*pb.PartitionRecord{{Topic: "t", TopicId: "x", Partition: 0, Leader: -1}}}}
	f.answer(t, last, nil)
	if f.img.Offset() != 3 || f.img.Partition("t", 0) == nil || len(f.applied) != 1 {
		t.Fatalf("snapshot not applied: image at %d, applied %v", f.img.Offset(), f.applied)
	}
	want := []metaloop.Kind{metaloop.PageGathered, metaloop.FetchFailed, metaloop.SnapshotApplied}
	if len(f.events) != len(want) {
		t.Fatalf("events %v, want %v", f.events, want)
	}
	for i := range want {
		if f.events[i] != want[i] {
			t.Fatalf("events %v, want %v", f.events, want)
		}
	}
}

// TestLoopStartsOver: OFFSET_OUT_OF_RANGE and an answer the image refuses
// reload the image and ask again at once; a refused cursor waits Backoff.
func TestLoopStartsOver(t *testing.T) {
	f, _ := start(t)
	f.answer(t, deltas(1, 5), nil)
	f.answer(t, &pb.FetchMetadataResponse{Error: pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, HighOffset: 2}, nil)
	if f.reloads != 1 || len(f.reqs) != 3 || f.reqs[2].GetFromOffset() != 1 {
		t.Fatalf("reloads %d, next %v", f.reloads, f.reqs[len(f.reqs)-1])
	}
	f.applyErr = errors.New("gap")
	f.answer(t, deltas(1, 2), nil)
	if f.reloads != 2 || len(f.reqs) != 4 || len(f.applied) != 1 {
		t.Fatalf("apply failure: reloads %d requests %d applied %v", f.reloads, len(f.reqs), f.applied)
	}
	f.answer(t, &pb.FetchMetadataResponse{Error: pb.ErrorCode_ERROR_CODE_INVALID_REQUEST}, nil)
	if len(f.reqs) != 4 {
		t.Fatal("a refused cursor was followed at once")
	}
	f.fire(t, backoff)
	if len(f.reqs) != 5 {
		t.Fatalf("requests %d after the backoff", len(f.reqs))
	}
}

// TestLoopStop: after Stop no answer reaches the host and nothing is sent.
func TestLoopStop(t *testing.T) {
	f, l := start(t)
	l.Stop()
	f.answer(t, deltas(1, 3), nil)
	if f.img.Offset() != 0 || len(f.reqs) != 1 || len(f.events) != 0 {
		t.Fatalf("after Stop: image at %d, requests %d, events %v", f.img.Offset(), len(f.reqs), f.events)
	}
}
