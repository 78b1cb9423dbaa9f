package cli

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// partsBroker leads every partition of a 3-partition orders and records
// the partition and record count of each Produce.
type partsBroker struct {
	idemBroker
	mu    sync.Mutex
	sends []string
}

func (b *partsBroker) Metadata(context.Context, *twinlogv1.MetadataRequest) (*twinlogv1.MetadataResponse, error) {
	var ps []*twinlogv1.MetadataPartition
	for i := range int32(3) {
		ps = append(ps, &twinlogv1.MetadataPartition{Index: i, LeaderId: 1, LeaderEpoch: 3, Replicas: []int32{1}, Isr: []int32{1}})
	}
	return &twinlogv1.MetadataResponse{
		Brokers: []*twinlogv1.MetadataBroker{{Id: 1, Host: "b1", Port: 9092}},
		Topics:  []*twinlogv1.MetadataTopic{{Name: "orders", Partitions: ps}},
	}, nil
}

func (b *partsBroker) Produce(_ context.Context, req *twinlogv1.ProduceRequest) (*twinlogv1.ProduceResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pd := req.GetPartitions()[0]
	b.sends = append(b.sends, fmt.Sprintf("%d:%s", pd.GetPartition(), pd.GetRecords()))
	return &twinlogv1.ProduceResponse{Partitions: []*twinlogv1.ProducePartitionResponse{{Topic: pd.GetTopic(), Partition: pd.GetPartition(), BaseOffset: 0, LeaderEpoch: 3, LeaderId: 1}}}, nil
}

// TestProducePartitioner: a keyed record goes where Kafka's Java producer
// puts its key (franz-go's StickyKeyPartitioner, murmur2), and unkeyed
// records go a batch at a time to the partitions in turn.
func TestProducePartitioner(t *testing.T) {
	b := &partsBroker{}
	var keys []string
	for i := range 12 {
		keys = append(keys, fmt.Sprintf("key-%d:v", i))
	}
	// One record per batch: the sends are in input order.
	_, stderr, code := runPartsBroker(t, b, strings.Join(keys, "\n")+"\n", "produce", "--topic", "orders", "--parse-key", "--batch-size", "1")
	if code != ExitOK || len(b.sends) != len(keys) {
		t.Fatalf("keyed: exit %d, %d sends: %s", code, len(b.sends), stderr)
	}
	kafka := kgo.StickyKeyPartitioner(nil).ForTopic("orders")
	used := map[byte]bool{}
	for i, s := range b.sends {
		want := kafka.Partition(&kgo.Record{Key: fmt.Appendf(nil, "key-%d", i)}, 3)
		if int(s[0]-'0') != want {
			t.Fatalf("key-%d went to partition %c, Kafka's partitioner puts it in %d", i, s[0], want)
		}
		used[s[0]] = true
	}
	if len(used) < 2 {
		t.Fatalf("12 keys all in one partition: %v", b.sends)
	}

	b = &partsBroker{}
	_, stderr, code = runPartsBroker(t, b, "a\nb\nc\nd\ne\nf\ng\nh\n", "produce", "--topic", "orders", "--batch-size", "2")
	if code != ExitOK || len(b.sends) != 4 {
		t.Fatalf("unkeyed: exit %d, sends %v: %s", code, b.sends, stderr)
	}
	first := int(b.sends[0][0] - '0')
	for i, s := range b.sends {
		if p := int(s[0] - '0'); p != (first+i)%3 || !strings.HasSuffix(s, "/2") {
			t.Fatalf("unkeyed batches went to %v, want two records each to the partitions in turn", b.sends)
		}
	}
}

func (b *partsBroker) ListOffsets(_ context.Context, req *twinlogv1.ListOffsetsRequest) (*twinlogv1.ListOffsetsResponse, error) {
	t := req.GetTopics()[0]
	return &twinlogv1.ListOffsetsResponse{Topics: []*twinlogv1.ListOffsetsTopicResponse{{Name: t.GetName(),
		Partitions: []*twinlogv1.ListOffsetsPartitionResponse{{Index: t.GetPartitions()[0].GetIndex(), Offset: 0, LeaderEpoch: 3}},
	}}}, nil
}

// Fetch answers partition p's record at the fetch offset while below its
// high watermark p+1 (partition 0 is empty).
func (b *partsBroker) Fetch(_ context.Context, req *twinlogv1.FetchRequest) (*twinlogv1.FetchResponse, error) {
	fp := req.GetPartitions()[0]
	hw := int64(fp.GetPartition())
	r := &twinlogv1.FetchPartitionResponse{Topic: fp.GetTopic(), Partition: fp.GetPartition(), LeaderEpoch: 3, LeaderId: 1, HighWatermark: hw, LogEndOffset: hw}
	if fp.GetFetchOffset() < hw {
		r.Records = fmt.Appendf(nil, "%d@%d", fp.GetPartition(), fp.GetFetchOffset())
	}
	return &twinlogv1.FetchResponse{Partitions: []*twinlogv1.FetchPartitionResponse{r}}, nil
}

// TestConsumeEveryPartition: without --partition consume reads every
// partition in turn up to its high watermark, with a partition column;
// --max-records counts over all of them; --follow needs --partition.
func TestConsumeEveryPartition(t *testing.T) {
	out, stderr, code := runPartsBroker(t, &partsBroker{}, "", "consume", "--topic", "orders")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(l, "\t")
		rows = append(rows, f[0]+"/"+f[1]+"="+f[len(f)-1])
	}
	if want := "[1/0=p1-0 2/0=p2-0 2/1=p2-1]"; fmt.Sprint(rows) != want {
		t.Fatalf("rows %v, want %s (stdout %q)", rows, want, out)
	}
	out, _, code = runPartsBroker(t, &partsBroker{}, "", "consume", "--topic", "orders", "--max-records", "2")
	if n := strings.Count(out, "\n"); code != ExitOK || n != 2 {
		t.Fatalf("--max-records 2 over every partition: exit %d, %d rows", code, n)
	}
	_, stderr, code = runPartsBroker(t, &partsBroker{}, "", "consume", "--topic", "orders", "--follow")
	if code != ExitUsage || !strings.Contains(stderr, "--follow reads one partition") {
		t.Fatalf("--follow without --partition: exit %d, %q", code, stderr)
	}
}
