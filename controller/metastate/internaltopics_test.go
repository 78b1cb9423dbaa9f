package metastate

import (
	"strconv"
	"strings"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// TestEnsureInternalTopic: a live broker's first FindCoordinator creates
// __consumer_offsets with offsets.topic.num.partitions partitions of
// offsets.topic.replication.factor replicas on distinct acceptable brokers,
// compacted, internal, min ISR min(2, RF), no unclean recovery; a second
// call writes nothing; another topic name, an unknown, stale or fenced
// requester, and too few acceptable brokers for the RF are refused and
// write nothing. (Seeded cluster: brokers 1-3, broker 3 fenced.)
func TestEnsureInternalTopic(t *testing.T) {
	for _, tc := range []struct {
		name       string
		clusterCfg map[string]string
		broker     int32
		epoch      int64 // 0: the registered one
		topic      string
		want       twinlogv1.ErrorCode
		wantMsg    string
		partitions int
		rf         int
	}{
		{name: "created", clusterCfg: map[string]string{metadata.KeyOffsetsTopicReplication: "2"}, broker: 1, partitions: 50, rf: 2},
		{name: "configured", clusterCfg: map[string]string{metadata.KeyOffsetsTopicReplication: "1", metadata.KeyOffsetsTopicNumPartitions: "7"}, broker: 2, partitions: 7, rf: 1},
		{name: "too few brokers for the default RF", broker: 1,
			want: twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR, wantMsg: "offsets.topic.replication.factor=3 brokers, 2 are available"},
		{name: "another topic", broker: 1, topic: "__mirror_state", want: ecInvalid, wantMsg: "only __consumer_offsets"},
		{name: "unknown broker", broker: 9, want: ecStale, wantMsg: "not registered"},
		{name: "stale epoch", broker: 1, epoch: 5, want: ecStale, wantMsg: "stale broker epoch 5"},
		{name: "fenced broker", broker: 3, want: ecStale, wantMsg: "fenced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := seededCluster(t, ids(1, 2, 3), ids(3), tc.clusterCfg, nil)
			epoch := tc.epoch
			if epoch == 0 {
				epoch = h.epoch(tc.broker)
			}
			topic := tc.topic
			if topic == "" {
				topic = metadata.ConsumerOffsetsTopic
			}
			req := &twinlogv1.EnsureInternalTopicRequest{BrokerId: tc.broker, BrokerEpoch: epoch, Topic: topic}
			d, resp := h.s.EnsureInternalTopic(req)
			if resp.GetError() != tc.want || !strings.Contains(resp.GetErrorMessage(), tc.wantMsg) {
				t.Fatalf("EnsureInternalTopic = %v, want %v %q", resp, tc.want, tc.wantMsg)
			}
			if tc.want != ecNone {
				if d != nil || h.s.Topic(metadata.ConsumerOffsetsTopic) != nil {
					t.Fatalf("refusal wrote %v", d)
				}
				return
			}
			h.apply(d, false)
			tr := h.s.Topic(metadata.ConsumerOffsetsTopic)
			if !tr.GetInternal() || int(tr.GetPartitionCount()) != tc.partitions {
				t.Fatalf("topic %v, want internal with %d partitions", tr, tc.partitions)
			}
			cfg := tr.GetConfigs()
			if cfg[metadata.KeyCleanupPolicy] != "compact" || cfg[metadata.KeyMinInsyncReplicas] != itoa(min(2, tc.rf)) ||
				cfg[metadata.KeyUncleanRecoveryStrategy] != "none" {
				t.Fatalf("configs %v", cfg)
			}
			for p := range int32(tc.partitions) {
				reps := h.s.Partition(metadata.ConsumerOffsetsTopic, p).GetReplicas()
				seen := map[int32]bool{}
				for _, r := range reps {
					if r == 3 || seen[r] {
						t.Fatalf("partition %d replicas %v: fenced or repeated broker", p, reps)
					}
					seen[r] = true
				}
				if len(reps) != tc.rf {
					t.Fatalf("partition %d replicas %v, want %d", p, reps, tc.rf)
				}
			}
			if d, resp := h.s.EnsureInternalTopic(req); d != nil || resp.GetError() != ecNone {
				t.Fatalf("second call: %v, %v; want nothing written", d, resp)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
