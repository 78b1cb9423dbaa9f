package controller

import (
	"testing"

	"github.com/twinlog/twinlog/controller/memstore"
)

// TestControllerOnMemStore runs a controller end to end on the in-memory
// store (no DataDir), crashes the store under it, and restarts a controller
// on what the crash kept: every acknowledged change is there, replayed from
// the snapshot and the deltas after it, and a follower starting from
// scratch pages the snapshot out of memory.
func TestControllerOnMemStore(t *testing.T) {
	clock, nw := newClock(), newNet()
	store := memstore.New(memstore.Options{})
	retainOne := func(c *Config) { c.RetainDeltas = 1 }
	h := startOnStore(t, store, clock, nw, retainOne)
	epochs := h.upBrokers(3)
	h.createTopic("t", 3, 3, nil)
	if err := h.c.Compact(); err != nil {
		t.Fatal(err)
	}
	h.createTopic("u", 2, 3, nil)
	head := h.c.Offset()

	// A machine crash: the running controller does not get to stop first.
	crashed := store.CrashClone()
	h.stop()
	if _, err := store.Load(); err == nil {
		t.Fatal("the stopped controller left its store open")
	}

	h = startOnStore(t, crashed, clock, nw, retainOne)
	if got := h.c.Offset(); got != head {
		t.Fatalf("restarted on the crash clone at offset %d, want %d", got, head)
	}
	if got := h.c.ClusterID(); got != "test-cluster" {
		t.Fatalf("cluster id %q after the crash", got)
	}
	for _, tp := range []struct {
		topic string
		parts int32
	}{{"t", 3}, {"u", 2}} {
		for p := range tp.parts {
			if r := h.partition(tp.topic, p); r == nil || len(r.GetReplicas()) != 3 || r.GetLeader() < 1 {
				t.Fatalf("%s-%d after the crash: %v", tp.topic, p, r)
			}
		}
	}
	// The brokers' registrations survived: their epochs are still current.
	for id, epoch := range epochs {
		if r := h.heartbeat(id, epoch); r.GetError() != ecNone {
			t.Fatalf("broker %d heartbeat with epoch %d after the crash: %v", id, epoch, r.GetError())
		}
	}
	f := newFollower(t)
	if n := f.catchUp(h.ctl); n != 1 || !f.topics["t"] || !f.topics["u"] || len(f.image) != 5 || f.applied != head {
		t.Fatalf("fresh follower: %d snapshots, topics %v, %d partitions, at %d (head %d)", n, f.topics, len(f.image), f.applied, head)
	}
	l, err := crashed.Load()
	if err != nil {
		t.Fatal(err)
	}
	if l.ControllerEpoch != 2 {
		t.Fatalf("controller epoch %d after one restart, want 2", l.ControllerEpoch)
	}
}
