package brokertest

import (
	"context"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// topicConfigs returns topic's DescribeConfigs entries on c by name.
func topicConfigs(t *testing.T, ctx context.Context, c *Cluster, topic string) map[string]*pb.ConfigEntry {
	t.Helper()
	dc, err := c.Admin().DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.ConfigResource{
		{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: topic}}})
	if err != nil || len(dc.GetResults()) != 1 || dc.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("DescribeConfigs %s on %s: %v %v", topic, c.Name, dc, err)
	}
	out := map[string]*pb.ConfigEntry{}
	for _, e := range dc.GetResults()[0].GetEntries() {
		out[e.GetName()] = e
	}
	return out
}

// TestMirrorTopicCopiesSourceConfigs: a mirror that creates its local topic
// takes the source topic's mirrored settings
// (mirror.support.unclean.leader.election, read from the source over its
// admin API) and leaves the cluster-local ones (min.insync.replicas,
// unclean.leader.election.enable) at the destination's own values.
func TestMirrorTopicCopiesSourceConfigs(t *testing.T) {
	a, b := TwoClusters(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// CreateTopic waits for full ISRs: every source broker knows "t"
	// before the mirror asks one of them for it.
	a.CreateTopic("t", 2, 3, map[string]string{
		"mirror.support.unclean.leader.election": "true",
		"min.insync.replicas":                    "2",
		"unclean.leader.election.enable":         "true",
	})
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	b.WaitMirrorState("t", 1, pb.MirrorState_MIRROR_STATE_MIRRORING)

	got := topicConfigs(t, ctx, b, "t")
	if e := got["mirror.support.unclean.leader.election"]; e.GetValue() != "true" || e.GetSource() != pb.ConfigSource_CONFIG_SOURCE_TOPIC {
		t.Fatalf("mirror topic mirror.support.unclean.leader.election = %v, want true (topic)", e)
	}
	for _, k := range []string{"min.insync.replicas", "unclean.leader.election.enable"} {
		if e := got[k]; e.GetSource() == pb.ConfigSource_CONFIG_SOURCE_TOPIC {
			t.Fatalf("mirror topic %s copied from the source: %v", k, e)
		}
	}
	if _, _, _, rs, ok := b.PartitionInfo("t", 1); !ok || len(rs) != 3 {
		t.Fatalf("mirror topic partition 1 replicas %v", rs)
	}
}
