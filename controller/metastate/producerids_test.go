package metastate

import (
	"strconv"
	"strings"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// producerIDsHarness is seededCluster (brokers 1-3, broker 3 fenced) with
// the producer id allocation stored (nil: none yet).
func producerIDsHarness(t *testing.T, clusterCfg map[string]string, stored *twinlogv1.ProducerIdsRecord) *harness {
	t.Helper()
	h := seededCluster(t, ids(1, 2, 3), ids(3), clusterCfg, nil)
	if stored != nil {
		snap := h.s.Snapshot()
		snap.ProducerIds = stored
		s := FromSnapshot(snap, Config{ClusterID: "a"})
		h = &harness{t: t, s: s, base: s.Snapshot()}
	}
	return h
}

func allocate(h *harness, broker int32, epoch int64) (*twinlogv1.MetadataDelta, *twinlogv1.AllocateProducerIdsResponse) {
	return h.s.AllocateProducerIds(&twinlogv1.AllocateProducerIdsRequest{BrokerId: broker, BrokerEpoch: epoch})
}

// TestAllocateProducerIds: a registered, unfenced broker with its current
// epoch gets the block of ProducerIDBlockSize ids at the stored next id
// (the space's first before any), and the delta moves the next id past it;
// an unknown broker, a stale epoch and a fenced broker are
// STALE_BROKER_EPOCH, an exhausted space or a stored id outside the space
// UNKNOWN_SERVER_ERROR, and a refusal writes nothing.
func TestAllocateProducerIds(t *testing.T) {
	space := metadata.DerivedProducerIDSpace("a")
	first := metadata.FirstProducerID(space)
	last := first + metadata.ProducerIDCounterLimit - ProducerIDBlockSize // start of the last whole block
	rec := func(next int64) *twinlogv1.ProducerIdsRecord {
		return &twinlogv1.ProducerIdsRecord{BrokerId: 2, BrokerEpoch: 12, NextProducerId: next}
	}
	const unknownServer = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR
	for _, tc := range []struct {
		name       string
		clusterCfg map[string]string
		stored     *twinlogv1.ProducerIdsRecord
		broker     int32
		epoch      int64 // 0: the registered one
		want       twinlogv1.ErrorCode
		wantStart  int64
		wantMsg    string
	}{
		{name: "first block", broker: 1, wantStart: first},
		{name: "next block", stored: rec(first + ProducerIDBlockSize), broker: 1, wantStart: first + ProducerIDBlockSize},
		{name: "configured space", clusterCfg: map[string]string{metadata.KeyProducerIDSpace: "2"}, broker: 1, wantStart: 2 << 48},
		{name: "last whole block", stored: rec(last), broker: 1, wantStart: last},
		{name: "unknown broker", broker: 9, want: ecStale, wantMsg: "not registered"},
		{name: "stale epoch", broker: 1, epoch: 5, want: ecStale, wantMsg: "stale broker epoch 5"},
		{name: "fenced broker", broker: 3, want: ecStale, wantMsg: "fenced"},
		{name: "exhausted", stored: rec(last + 1), broker: 1, want: unknownServer, wantMsg: "exhausted"},
		{name: "stored id below the space", stored: rec(first - 1), broker: 1, want: unknownServer, wantMsg: "not in this cluster's producer id space"},
		{name: "stored id of another space", stored: rec(metadata.FirstProducerID(space+1) + ProducerIDBlockSize), broker: 1, want: unknownServer, wantMsg: "not in this cluster's producer id space"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := producerIDsHarness(t, tc.clusterCfg, tc.stored)
			epoch := tc.epoch
			if epoch == 0 {
				epoch = h.epoch(tc.broker)
			}
			before := h.s.ProducerIDs()
			d, resp := allocate(h, tc.broker, epoch)
			if resp.GetError() != tc.want || !strings.Contains(resp.GetErrorMessage(), tc.wantMsg) {
				t.Fatalf("AllocateProducerIds = %v, want %v %q", resp, tc.want, tc.wantMsg)
			}
			if tc.want != ecNone {
				if d != nil || h.s.ProducerIDs() != before {
					t.Fatalf("refusal wrote %v", d)
				}
				return
			}
			if resp.GetProducerIdStart() != tc.wantStart || resp.GetProducerIdLen() != ProducerIDBlockSize {
				t.Fatalf("block [%d, +%d), want [%d, +%d)", resp.GetProducerIdStart(), resp.GetProducerIdLen(), tc.wantStart, ProducerIDBlockSize)
			}
			h.apply(d, false)
			r := h.s.ProducerIDs()
			if r.GetNextProducerId() != tc.wantStart+ProducerIDBlockSize || r.GetBrokerId() != tc.broker || r.GetBrokerEpoch() != epoch {
				t.Fatalf("stored %v after the block at %d", r, tc.wantStart)
			}
		})
	}
}

// TestProducerIdBlocksNeverRepeat: blocks handed to different brokers, to a
// re-registered broker, after a restart from a snapshot and after a replay
// of the deltas are consecutive and disjoint: no id is handed out twice.
func TestProducerIdBlocksNeverRepeat(t *testing.T) {
	h := producerIDsHarness(t, nil, nil)
	first := metadata.FirstProducerID(h.s.ProducerIDSpace())
	var starts []int64
	take := func(b int32) {
		t.Helper()
		d, resp := allocate(h, b, h.epoch(b))
		if resp.GetError() != ecNone {
			t.Fatalf("broker %d: %v", b, resp)
		}
		h.apply(d, false)
		starts = append(starts, resp.GetProducerIdStart())
	}
	take(1)
	take(2)
	old := h.epoch(1)
	h.register(1, true)
	h.unfence(1)
	if _, resp := allocate(h, 1, old); resp.GetError() != ecStale {
		t.Fatalf("re-registered broker's old epoch: %v", resp)
	}
	take(1)
	// A controller restart: the snapshot keeps the allocation.
	snap := h.s.Snapshot()
	if snap.GetProducerIds() == nil {
		t.Fatal("snapshot without the producer id allocation")
	}
	h.s = FromSnapshot(snap, Config{ClusterID: "a"})
	take(2)
	// A restart that replays the deltas from before any block.
	h.s = FromSnapshot(h.base, Config{})
	for _, d := range h.deltas {
		if _, err := h.s.Apply(d); err != nil {
			t.Fatal(err)
		}
	}
	take(1)
	for i, s := range starts {
		if want := first + int64(i)*ProducerIDBlockSize; s != want {
			t.Fatalf("blocks %v: block %d starts at %d, want %d", starts, i, s, want)
		}
	}
}

// TestProducerIDSpaceConfig: producer.id.space is static (AlterConfigs
// may neither set nor delete it) and DescribeConfigs shows the space in
// use, derived from the cluster id when unset.
func TestProducerIDSpaceConfig(t *testing.T) {
	cluster := twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_CLUSTER
	describe := func(h *harness) *twinlogv1.ConfigEntry {
		t.Helper()
		resp := h.s.DescribeConfigs(&twinlogv1.DescribeConfigsRequest{Resources: []*twinlogv1.ConfigResource{{Type: cluster}}})
		for _, e := range resp.GetResults()[0].GetEntries() {
			if e.GetName() == metadata.KeyProducerIDSpace {
				return e
			}
		}
		t.Fatal("DescribeConfigs without producer.id.space")
		return nil
	}
	h := producerIDsHarness(t, nil, nil)
	if e := describe(h); e.GetValue() != strconv.Itoa(int(metadata.DerivedProducerIDSpace("a"))) || e.GetSource() != twinlogv1.ConfigSource_CONFIG_SOURCE_DEFAULT {
		t.Fatalf("derived space described as %v", e)
	}
	if d, r := h.alter(cluster, "", map[string]string{metadata.KeyProducerIDSpace: "3"}); d != nil || r.GetError() != invalidConfig {
		t.Fatalf("set producer.id.space at run time = %v, %v", d, r)
	}
	h = producerIDsHarness(t, map[string]string{metadata.KeyProducerIDSpace: "7"}, nil)
	if e := describe(h); e.GetValue() != "7" || e.GetSource() != twinlogv1.ConfigSource_CONFIG_SOURCE_CLUSTER || h.s.ProducerIDSpace() != 7 {
		t.Fatalf("configured space described as %v (space %d)", e, h.s.ProducerIDSpace())
	}
	if d, r := h.alter(cluster, "", nil, metadata.KeyProducerIDSpace); d != nil || r.GetError() != invalidConfig {
		t.Fatalf("delete producer.id.space at run time = %v, %v", d, r)
	}
	if _, err := New(Config{ClusterID: "a"}).InitialClusterConfigs(map[string]string{metadata.KeyProducerIDSpace: "32768"}); err == nil {
		t.Fatal("producer.id.space 32768 accepted")
	}
}

// TestMirrorProducerIDSpace: CreateMirror refuses a source in this
// cluster's producer id space (INVALID_CONFIG) or one that reports none
// (INVALID_REQUEST), writing nothing; StartMirrorTopics applies the rule
// to new source addresses only.
func TestMirrorProducerIDSpace(t *testing.T) {
	src := map[string]SourceTopic{"t": {TopicID: "tid", Partitions: 1}}
	create := func(h *harness, sc SourceCluster) (*twinlogv1.MetadataDelta, *twinlogv1.CreateMirrorResponse) {
		return h.s.CreateMirror(&twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"a:1"}, Topics: []string{"t"}}, sc, src)
	}
	for _, tc := range []struct {
		name    string
		own     map[string]string
		source  SourceCluster
		want    twinlogv1.ErrorCode
		wantMsg string
	}{
		{"another space", nil, SourceCluster{ID: "B", ProducerIDSpace: 2}, ecNone, ""},
		{"the derived space of this cluster", nil, SourceCluster{ID: "B", ProducerIDSpace: metadata.DerivedProducerIDSpace("a")},
			twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG, "space " + strconv.Itoa(int(metadata.DerivedProducerIDSpace("a"))) + ", this cluster's own (producer.id.space)"},
		{"the configured space of this cluster", map[string]string{metadata.KeyProducerIDSpace: "2"}, SourceCluster{ID: "B", ProducerIDSpace: 2},
			twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG, "space 2, this cluster's own (producer.id.space)"},
		{"configured apart", map[string]string{metadata.KeyProducerIDSpace: "1"}, SourceCluster{ID: "B", ProducerIDSpace: 2}, ecNone, ""},
		{"no space reported", nil, SourceCluster{ID: "B"}, ecInvalid, "does not report its producer id space"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := seededCluster(t, ids(1, 2, 3), nil, tc.own, nil, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
			d, resp := create(h, tc.source)
			if resp.GetError() != tc.want || !strings.Contains(resp.GetErrorMessage(), tc.wantMsg) {
				t.Fatalf("CreateMirror = %v, want %v %q", resp, tc.want, tc.wantMsg)
			}
			if tc.want == ecNone {
				h.apply(d, false)
				return
			}
			if d != nil || h.s.Mirror("m") != nil || h.s.Topic(mirrorStateTopic) != nil {
				t.Fatalf("refused CreateMirror wrote %v", d)
			}
		})
	}

	h := seededCluster(t, ids(1, 2, 3), nil, map[string]string{metadata.KeyProducerIDSpace: "1"}, nil, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
	d, resp := create(h, SourceCluster{ID: "B", ProducerIDSpace: 2})
	if resp.GetError() != ecNone {
		t.Fatal(resp)
	}
	h.apply(d, false)
	d, _ = h.s.SetMirrorTopicsDesiredState("m", []string{"t"}, MirrorStop, nil)
	h.apply(d, false)
	for _, sc := range []SourceCluster{{ID: "B", ProducerIDSpace: 1}, {ID: "B"}} {
		d, res := h.s.StartMirrorTopics("m", []string{"t"}, []string{"b:2"}, sc, src)
		if d != nil || res[0].GetError() == ecNone || !strings.Contains(res[0].GetErrorMessage(), "new source addresses are refused") {
			t.Fatalf("re-point to addresses reporting space %d = %v, %v", sc.ProducerIDSpace, d, res)
		}
		if m := h.s.Mirror("m"); m.GetSourceBootstrap()[0] != "a:1" {
			t.Fatalf("refused re-point changed the mirror: %v", m)
		}
	}
	// Without new addresses the source is the one checked at creation.
	d, res := h.s.StartMirrorTopics("m", []string{"t"}, nil, SourceCluster{ID: "B"}, src)
	if res[0].GetError() != ecNone {
		t.Fatalf("restart without new addresses = %v", res)
	}
	h.apply(d, false)
	d, res = h.s.StartMirrorTopics("m", []string{"t"}, []string{"b:2"}, SourceCluster{ID: "B", ProducerIDSpace: 2}, src)
	if res[0].GetError() != ecNone {
		t.Fatalf("re-point to addresses of another space = %v", res)
	}
	h.apply(d, false)
}
