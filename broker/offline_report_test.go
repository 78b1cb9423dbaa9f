package broker

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestOfflineReport: the offline partitions a heartbeat carries are sorted,
// with the open error as reason, cut to offlineReasonMaxBytes of valid
// UTF-8. An error naming a file whose name is not UTF-8 must not make the
// heartbeat unmarshalable (a proto string must be valid UTF-8): the broker
// would stop heartbeating and be fenced.
func TestOfflineReport(t *testing.T) {
	badName := "open /data/t-1/\xff\xfe.log: corrupt"
	long := strings.Repeat("é", offlineReasonMaxBytes)
	got := offlineReport(map[twinlog.TopicPartition]error{
		{Topic: "t", Partition: 10}: errors.New("short"),
		{Topic: "t", Partition: 1}:  errors.New(badName),
		{Topic: "a", Partition: 7}:  errors.New(long),
	})
	if len(got) != 3 || got[0].GetTopic() != "a" || got[1].GetPartition() != 1 || got[2].GetPartition() != 10 {
		t.Fatalf("report %v, want a-7, t-1, t-10", got)
	}
	for _, op := range got {
		if r := op.GetReason(); !utf8.ValidString(r) || len(r) > offlineReasonMaxBytes || r == "" {
			t.Errorf("%s-%d reason %q: want valid UTF-8, 1..%d bytes", op.GetTopic(), op.GetPartition(), r, offlineReasonMaxBytes)
		}
	}
	if r := got[1].GetReason(); !strings.HasPrefix(r, "open /data/t-1/") || !strings.HasSuffix(r, ".log: corrupt") {
		t.Errorf("reason %q lost the error around the bad bytes", r)
	}
	if _, err := proto.Marshal(&pb.BrokerHeartbeatRequest{BrokerId: 1, OfflinePartitions: got}); err != nil {
		t.Fatalf("heartbeat with the report does not marshal: %v", err)
	}
}
