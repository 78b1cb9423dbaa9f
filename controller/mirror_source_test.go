package controller

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// fakeSource is a mirror source broker: Metadata and DescribeConfigs (a real
// broker forwards the latter to its controller) with fixed answers.
type fakeSource struct {
	twinlogv1.UnimplementedFetchServiceServer
	twinlogv1.UnimplementedAdminServiceServer
	topics  []*twinlogv1.MetadataTopic
	configs map[string][]*twinlogv1.ConfigEntry
	// down makes DescribeConfigs fail (the source's controller unreachable).
	down atomic.Bool
	// space is the producer id space Metadata reports (0: the one derived
	// from the source's cluster id, as a real broker's; -1: none, as a
	// broker older than the field).
	space int32
	// metadataCalls counts Metadata requests.
	metadataCalls atomic.Int64
}

func startFakeSource(t *testing.T, nw *netw, addr string, fs *fakeSource) {
	srv := grpc.NewServer()
	twinlogv1.RegisterFetchServiceServer(srv, fs)
	twinlogv1.RegisterAdminServiceServer(srv, fs)
	lis := nw.listen(addr)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
}

func (fs *fakeSource) Metadata(ctx context.Context, req *twinlogv1.MetadataRequest) (*twinlogv1.MetadataResponse, error) {
	fs.metadataCalls.Add(1)
	space := fs.space
	switch space {
	case 0:
		space = metadata.DerivedProducerIDSpace("cluster-src")
	case -1:
		space = 0
	}
	return &twinlogv1.MetadataResponse{ClusterId: "cluster-src", Topics: fs.topics, ProducerIdSpace: space}, nil
}

func (fs *fakeSource) DescribeConfigs(ctx context.Context, req *twinlogv1.DescribeConfigsRequest) (*twinlogv1.DescribeConfigsResponse, error) {
	if fs.down.Load() {
		return nil, status.Error(codes.Unavailable, "no controller")
	}
	resp := &twinlogv1.DescribeConfigsResponse{}
	for _, r := range req.GetResources() {
		res := &twinlogv1.DescribeConfigsResult{Resource: r}
		if es, ok := fs.configs[r.GetName()]; ok {
			res.Entries = es
		} else {
			res.Error = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func srcTopic(name, id string, parts int) *twinlogv1.MetadataTopic {
	t := &twinlogv1.MetadataTopic{Name: name, TopicId: id}
	for i := range parts {
		t.Partitions = append(t.Partitions, &twinlogv1.MetadataPartition{Index: int32(i), LeaderId: 1, Replicas: []int32{1, 2, 3}})
	}
	return t
}

// TestCreateMirrorCopiesSourceConfigs: a mirror topic created from the source
// takes the source topic's own settings of the MirroredTopicConfigs keys
// (read with DescribeConfigs through a source broker); the source's
// defaults, min.insync.replicas and the unclean election settings are not
// copied. With the source's configs unreadable the topic is refused (not
// created without them) and so is the mirror (all or nothing); a later
// CreateMirror creates both.
func TestCreateMirrorCopiesSourceConfigs(t *testing.T) {
	nw := newNet()
	h := startController(t, t.TempDir(), newClock(), nw)
	h.upBrokers(3)
	topic := func(k, v string, src twinlogv1.ConfigSource) *twinlogv1.ConfigEntry {
		return &twinlogv1.ConfigEntry{Name: k, Value: v, Source: src}
	}
	fs := &fakeSource{
		topics: []*twinlogv1.MetadataTopic{srcTopic("s", "sid", 2), srcTopic("d", "did", 1), srcTopic("gone", "gid", 1)},
		configs: map[string][]*twinlogv1.ConfigEntry{
			"s": {
				topic(metadata.KeyMirrorSupportUnclean, "true", twinlogv1.ConfigSource_CONFIG_SOURCE_TOPIC),
				topic(metadata.KeyMinInsyncReplicas, "2", twinlogv1.ConfigSource_CONFIG_SOURCE_TOPIC),
				topic(metadata.KeyUncleanLeaderElection, "true", twinlogv1.ConfigSource_CONFIG_SOURCE_TOPIC),
				topic(metadata.KeyUncleanRecoveryStrategy, "none", twinlogv1.ConfigSource_CONFIG_SOURCE_TOPIC),
			},
			// Only defaults: nothing is pinned on the mirror topic.
			"d": {
				topic(metadata.KeyMirrorSupportUnclean, "false", twinlogv1.ConfigSource_CONFIG_SOURCE_DEFAULT),
				topic(metadata.KeyMinInsyncReplicas, "2", twinlogv1.ConfigSource_CONFIG_SOURCE_CLUSTER),
			},
			// "gone" was deleted between Metadata and DescribeConfigs.
		},
	}
	startFakeSource(t, nw, "src:9092", fs)
	topicRec := func(name string) *twinlogv1.TopicRecord {
		h.c.mu.RLock()
		defer h.c.mu.RUnlock()
		return h.c.state.Topic(name)
	}

	fs.down.Store(true)
	cm, err := h.mirror.CreateMirror(t.Context(), &twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"src:9092"}, Topics: []string{"s"}})
	if err != nil || cm.GetError() != twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE || len(cm.GetTopics()) != 1 ||
		cm.GetTopics()[0].GetError() != twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE {
		t.Fatalf("CreateMirror with the source's configs unreadable = %v, %v", cm, err)
	}
	if tr := topicRec("s"); tr != nil {
		t.Fatalf("topic created without the source's configs: %v", tr)
	}
	h.c.mu.RLock()
	half := h.c.state.Mirror("m")
	h.c.mu.RUnlock()
	if half != nil {
		t.Fatalf("refused CreateMirror left a mirror behind: %v", half)
	}

	fs.down.Store(false)
	// "gone" was deleted between Metadata and DescribeConfigs: the source
	// no longer has it, and the whole CreateMirror is refused.
	cm, err = h.mirror.CreateMirror(t.Context(), &twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"src:9092"}, Topics: []string{"s", "d", "gone"}})
	if err != nil || cm.GetError() != twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION ||
		cm.GetTopics()[2].GetError() != twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("CreateMirror with a topic the source lost = %v, %v", cm, err)
	}
	if tr := topicRec("s"); tr != nil {
		t.Fatalf("refused CreateMirror created a topic: %v", tr)
	}
	cm, err = h.mirror.CreateMirror(t.Context(), &twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"src:9092"}, Topics: []string{"s", "d"}})
	if err != nil || cm.GetError() != ecNone {
		t.Fatalf("CreateMirror = %v, %v", cm, err)
	}
	for _, r := range cm.GetTopics() {
		if r.GetError() != ecNone {
			t.Fatalf("CreateMirror %s: %v %s", r.GetTopic(), r.GetError(), r.GetErrorMessage())
		}
	}
	st, err := h.mirror.StartMirrorTopics(t.Context(), &twinlogv1.StartMirrorTopicsRequest{Mirror: "m", Topics: []string{"gone"}})
	if err != nil || len(st.GetTopics()) != 1 || st.GetTopics()[0].GetError() != twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("StartMirrorTopics of a topic the source lost = %v, %v", st, err)
	}
	s := topicRec("s")
	if s.GetTopicId() != "sid" || s.GetPartitionCount() != 2 || s.GetMirrorName() != "m" {
		t.Fatalf("mirror topic s: %v", s)
	}
	if cfg := s.GetConfigs(); len(cfg) != 1 || cfg[metadata.KeyMirrorSupportUnclean] != "true" {
		t.Fatalf("mirror topic s configs %v, want only %s=true", cfg, metadata.KeyMirrorSupportUnclean)
	}
	if d := topicRec("d"); d.GetTopicId() != "did" || len(d.GetConfigs()) != 0 {
		t.Fatalf("mirror topic d: %v (source defaults must not be pinned)", d)
	}
	if g := topicRec("gone"); g != nil {
		t.Fatalf("topic the source lost was created: %v", g)
	}
	// DescribeConfigs on the destination shows the copy as a topic setting.
	dc, err := h.admin.DescribeConfigs(t.Context(), &twinlogv1.DescribeConfigsRequest{Resources: []*twinlogv1.ConfigResource{
		{Type: twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "s"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range dc.GetResults()[0].GetEntries() {
		want := twinlogv1.ConfigSource_CONFIG_SOURCE_DEFAULT
		if e.GetName() == metadata.KeyMirrorSupportUnclean {
			want = twinlogv1.ConfigSource_CONFIG_SOURCE_TOPIC
		}
		if e.GetSource() != want {
			t.Fatalf("destination %s: source %v, want %v", e.GetName(), e.GetSource(), want)
		}
	}
}
