package metastate

import (
	"strings"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// TestMinInsyncAboveReplicationFactor: a topic-level min.insync.replicas
// above the topic's replication factor is refused at create and at alter
// (issue 18), with a message that names the largest value that fits; a
// value that fits, and a cluster-wide one (capped per SPEC §1.2), pass.
func TestMinInsyncAboveReplicationFactor(t *testing.T) {
	h := newHarness(t)
	for _, b := range ids(1, 2, 3) {
		h.register(b, false)
		h.unfence(b)
	}
	mir := func(v string) map[string]string { return map[string]string{metadata.KeyMinInsyncReplicas: v} }
	d, resp := h.s.CreateTopics(&twinlogv1.CreateTopicsRequest{Topics: []*twinlogv1.CreatableTopic{
		{Name: "two", NumPartitions: 2, ReplicationFactor: 2, Configs: mir("2")},
		{Name: "over", NumPartitions: 1, ReplicationFactor: 2, Configs: mir("3")},
		{Name: "pinned", Assignments: []*twinlogv1.ReplicaAssignment{{Replicas: ids(1, 2, 3)}, {Replicas: ids(2)}}, Configs: mir("2")},
	}})
	want := []twinlogv1.ErrorCode{ecNone, twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG, twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG}
	for i, w := range want {
		if got := resp.GetTopics()[i].GetError(); got != w {
			t.Errorf("topic %s: %v (%s), want %v", resp.GetTopics()[i].GetName(), got, resp.GetTopics()[i].GetErrorMessage(), w)
		}
	}
	if msg := resp.GetTopics()[1].GetErrorMessage(); !strings.Contains(msg, "above the replication factor 2") || !strings.Contains(msg, "at most 2") {
		t.Errorf("message %q does not name the replication factor and the limit", msg)
	}
	h.apply(d, false)

	alter := func(typ twinlogv1.ConfigResourceType, name, v string) *twinlogv1.AlterConfigsResult {
		d, r := h.s.AlterConfigs(&twinlogv1.AlterConfigsRequest{Resources: []*twinlogv1.AlterConfigsResource{{
			Resource: &twinlogv1.ConfigResource{Type: typ, Name: name}, Set: mir(v)}}})
		h.apply(d, false)
		return r.GetResults()[0]
	}
	if r := alter(topicRes, "two", "3"); r.GetError() != twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG || !strings.Contains(r.GetErrorMessage(), "replication factor 2") {
		t.Errorf("alter two to 3: %v", r)
	}
	if got := h.s.TopicConfig("two", metadata.KeyMinInsyncReplicas); got != "2" {
		t.Errorf("refused alter changed the config to %q", got)
	}
	if r := alter(topicRes, "two", "1"); r.GetError() != ecNone {
		t.Errorf("alter two to 1: %v", r)
	}
	if r := alter(clusterRes, "", "3"); r.GetError() != ecNone {
		t.Errorf("cluster-wide 3: %v", r)
	}
}
