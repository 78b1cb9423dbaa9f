package controller

import (
	"strconv"
	"strings"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/memstore"
	"github.com/twinlog/twinlog/controller/metastate"
	"github.com/twinlog/twinlog/metadata"
)

// allocate asks for a block for broker id at epoch and fails the test on
// an error.
func (h *harness) allocate(id int32, epoch int64) int64 {
	h.t.Helper()
	resp, err := h.ctl.AllocateProducerIds(h.t.Context(), &twinlogv1.AllocateProducerIdsRequest{BrokerId: id, BrokerEpoch: epoch})
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.GetError() != ecNone || resp.GetProducerIdLen() != metastate.ProducerIDBlockSize {
		h.t.Fatalf("AllocateProducerIds(%d, %d) = %v", id, epoch, resp)
	}
	return resp.GetProducerIdStart()
}

// TestProducerIdBlocksSurviveRestarts: blocks handed out before a clean
// restart on the same bbolt file, and before a machine crash of the
// in-memory store, are never handed out again, whether the allocation comes
// back from a snapshot (a restart right after a compaction) or from the
// deltas after it: the answer comes once the block is durable.
func TestProducerIdBlocksSurviveRestarts(t *testing.T) {
	for _, kind := range []string{"bbolt", "memstore crash"} {
		t.Run(kind, func(t *testing.T) {
			clock, nw := newClock(), newNet()
			dir := t.TempDir()
			store := memstore.New(memstore.Options{})
			retainOne := func(c *Config) { c.RetainDeltas = 1 }
			start := func() *harness {
				if kind == "bbolt" {
					return startController(t, dir, clock, nw, retainOne)
				}
				return startOnStore(t, store, clock, nw, retainOne)
			}
			restart := func(h *harness) *harness {
				if kind == "bbolt" {
					h.stop()
					return start()
				}
				store = store.CrashClone()
				h.stop()
				return start()
			}
			h := start()
			epochs := h.upBrokers(2)
			seen := map[int64]bool{}
			var last int64 = -1
			take := func(id int32) {
				t.Helper()
				s := h.allocate(id, epochs[id])
				if seen[s] || s <= last {
					t.Fatalf("block at %d handed out again or out of order (last %d)", s, last)
				}
				seen[s], last = true, s
			}
			take(1)
			take(2)
			take(1)
			// Restarted right after a compaction, the allocation comes back
			// from the snapshot alone; the next restart replays deltas.
			if err := h.c.Compact(); err != nil {
				t.Fatal(err)
			}
			h = restart(h)
			take(2)
			take(1)
			h = restart(h)
			take(1)
			if first := metadata.FirstProducerID(metadata.DerivedProducerIDSpace("test-cluster")); last != first+5*metastate.ProducerIDBlockSize {
				t.Fatalf("last block at %d, want the sixth of the space (%d)", last, first+5*metastate.ProducerIDBlockSize)
			}
			// A stale epoch is refused, over the wire too.
			resp, err := h.ctl.AllocateProducerIds(t.Context(), &twinlogv1.AllocateProducerIdsRequest{BrokerId: 1, BrokerEpoch: epochs[1] + 100})
			if err != nil || resp.GetError() != twinlogv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH {
				t.Fatalf("stale epoch = %v, %v", resp, err)
			}
		})
	}
}

// TestCreateMirrorRefusesSourceInOwnSpace: the controller reads the
// source's producer id space from its brokers' Metadata and refuses a
// mirror from a source in its own space (derived or configured) or one
// that reports none; a source in another space is accepted.
func TestCreateMirrorRefusesSourceInOwnSpace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		own     string // producer.id.space here ("": derived)
		space   int32  // the source's (fakeSource.space)
		want    twinlogv1.ErrorCode
		wantMsg string
	}{
		{"derived, equal", "", metadata.DerivedProducerIDSpace("test-cluster"), twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG,
			"allocates producer ids in space " + strconv.Itoa(int(metadata.DerivedProducerIDSpace("test-cluster"))) + ", this cluster's own (producer.id.space)"},
		{"configured, equal", "5", 5, twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG, "space 5, this cluster's own (producer.id.space)"},
		{"none reported", "", -1, twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST, "does not report its producer id space"},
		{"another space", "5", 6, ecNone, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nw := newNet()
			var opts []hopt
			if tc.own != "" {
				opts = append(opts, func(c *Config) { c.ClusterConfigs = map[string]string{metadata.KeyProducerIDSpace: tc.own} })
			}
			h := startController(t, t.TempDir(), newClock(), nw, opts...)
			h.upBrokers(3)
			startFakeSource(t, nw, "src:9092", &fakeSource{space: tc.space, topics: []*twinlogv1.MetadataTopic{srcTopic("s", "sid", 1)},
				configs: map[string][]*twinlogv1.ConfigEntry{"s": nil}})
			resp, err := h.mirror.CreateMirror(t.Context(), &twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"src:9092"}, Topics: []string{"s"}})
			if err != nil || resp.GetError() != tc.want || !strings.Contains(resp.GetErrorMessage(), tc.wantMsg) {
				t.Fatalf("CreateMirror = %v, %v; want %v %q", resp, err, tc.want, tc.wantMsg)
			}
			h.c.mu.RLock()
			created := h.c.state.Mirror("m") != nil
			h.c.mu.RUnlock()
			if created != (tc.want == ecNone) {
				t.Fatalf("mirror created %t after %v", created, resp.GetError())
			}
		})
	}
}
