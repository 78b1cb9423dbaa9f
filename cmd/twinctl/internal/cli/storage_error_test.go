package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

const storageErr = twinlogv1.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR

// dataCluster is a fake two-broker data plane on bufconn for produce and
// consume: every broker answers Metadata with the current leader of
// orders-0; the leader answers Produce, ListOffsets and Fetch with
// KAFKA_STORAGE_ERROR (its copy is offline) failLeft times, after which
// the controller has moved leadership to broker 2 (failLeft < 0: never).
type dataCluster struct {
	lis map[string]*bufconn.Listener

	mu       sync.Mutex
	leader   int32
	failLeft int
	requests map[string]int // per RPC, answered with KAFKA_STORAGE_ERROR
}

type dataBroker struct {
	twinlogv1.UnimplementedFetchServiceServer
	twinlogv1.UnimplementedProduceServiceServer
	c  *dataCluster
	id int32
}

func startDataCluster(t *testing.T, failLeft int) *dataCluster {
	c := &dataCluster{lis: map[string]*bufconn.Listener{}, leader: 1, failLeft: failLeft, requests: map[string]int{}}
	for id := int32(1); id <= 2; id++ {
		srv := grpc.NewServer()
		b := &dataBroker{c: c, id: id}
		twinlogv1.RegisterFetchServiceServer(srv, b)
		twinlogv1.RegisterProduceServiceServer(srv, b)
		lis := bufconn.Listen(1 << 20)
		c.lis[fmt.Sprintf("b%d:9092", id)] = lis
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
	}
	return c
}

// answer is broker id's error code for a partition request of rpc.
func (c *dataCluster) answer(id int32, rpc string) twinlogv1.ErrorCode {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case id != c.leader:
		return twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
	case c.failLeft == 0:
		return twinlogv1.ErrorCode_ERROR_CODE_NONE
	}
	c.requests[rpc]++
	if c.failLeft > 0 {
		if c.failLeft--; c.failLeft == 0 {
			c.leader = 2
		}
	}
	return storageErr
}

func (c *dataCluster) failed(rpc string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests[rpc]
}

func (b *dataBroker) Metadata(context.Context, *twinlogv1.MetadataRequest) (*twinlogv1.MetadataResponse, error) {
	b.c.mu.Lock()
	leader := b.c.leader
	b.c.mu.Unlock()
	return &twinlogv1.MetadataResponse{
		Brokers: []*twinlogv1.MetadataBroker{{Id: 1, Host: "b1", Port: 9092}, {Id: 2, Host: "b2", Port: 9092}},
		Topics: []*twinlogv1.MetadataTopic{{Name: "orders", TopicId: "id-orders", Partitions: []*twinlogv1.MetadataPartition{
			{Index: 0, LeaderId: leader, LeaderEpoch: 3, Replicas: []int32{1, 2}, Isr: []int32{1, 2}},
		}}},
	}, nil
}

func (b *dataBroker) Produce(_ context.Context, req *twinlogv1.ProduceRequest) (*twinlogv1.ProduceResponse, error) {
	pd := req.GetPartitions()[0]
	r := &twinlogv1.ProducePartitionResponse{Topic: pd.GetTopic(), Partition: pd.GetPartition(), BaseOffset: -1, LeaderId: -1,
		Error: b.c.answer(b.id, "produce")}
	if r.Error == twinlogv1.ErrorCode_ERROR_CODE_NONE {
		r.BaseOffset, r.LeaderEpoch, r.LeaderId = 7, 3, b.id
	}
	return &twinlogv1.ProduceResponse{Partitions: []*twinlogv1.ProducePartitionResponse{r}}, nil
}

func (b *dataBroker) ListOffsets(_ context.Context, req *twinlogv1.ListOffsetsRequest) (*twinlogv1.ListOffsetsResponse, error) {
	t := req.GetTopics()[0]
	return &twinlogv1.ListOffsetsResponse{Topics: []*twinlogv1.ListOffsetsTopicResponse{{Name: t.GetName(),
		Partitions: []*twinlogv1.ListOffsetsPartitionResponse{{Index: t.GetPartitions()[0].GetIndex(), Error: b.c.answer(b.id, "list-offsets")}},
	}}}, nil
}

// Fetch answers an empty, caught-up partition (HW 0) when it serves.
func (b *dataBroker) Fetch(_ context.Context, req *twinlogv1.FetchRequest) (*twinlogv1.FetchResponse, error) {
	fp := req.GetPartitions()[0]
	return &twinlogv1.FetchResponse{Partitions: []*twinlogv1.FetchPartitionResponse{{Topic: fp.GetTopic(), Partition: fp.GetPartition(),
		Error: b.c.answer(b.id, "fetch"), LeaderEpoch: 3, LeaderId: b.id}}}, nil
}

func (c *dataCluster) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	opts := Options{
		Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""), HomeDir: t.TempDir(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			lis := c.lis[addr]
			if lis == nil {
				return nil, fmt.Errorf("no fake broker at %s", addr)
			}
			return lis.DialContext(ctx)
		})},
		StderrIsTerminal: func() bool { return false },
		Codec: CodecFuncs{
			EncodeFunc: func([]Record, Producer) ([]byte, error) { return []byte("batch"), nil },
			DecodeFunc: func([]byte) ([]Batch, error) { return nil, nil },
		},
	}
	code = Execute(t.Context(), append([]string{"--bootstrap", "b1:9092"}, args...), opts)
	return out.String(), errb.String(), code
}

// TestStorageErrorRetried: KAFKA_STORAGE_ERROR from the leader (its copy
// of the partition is offline) is retried after a Metadata refresh, like
// NOT_LEADER_OR_FOLLOWER, as Kafka's clients do: produce and consume reach
// the new leader. If it persists, the final error names the partition and
// where the operator looks. Before, the first one ended the command.
func TestStorageErrorRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		rpc  string
	}{
		{"produce", []string{"produce", "--topic", "orders", "--value", "v", "--retries", "3"}, "produce"},
		{"consume list offsets", []string{"consume", "--topic", "orders", "--offset", "earliest", "--retries", "3"}, "list-offsets"},
		{"consume fetch", []string{"consume", "--topic", "orders", "--offset", "0", "--retries", "3"}, "fetch"},
	} {
		t.Run(tc.name+"/leader moves", func(t *testing.T) {
			c := startDataCluster(t, 2)
			stdout, stderr, code := c.run(t, tc.args...)
			if code != ExitOK || c.failed(tc.rpc) != 2 {
				t.Fatalf("exit %d after %d KAFKA_STORAGE_ERROR answers, want 0 after 2; stdout %q stderr %q",
					code, c.failed(tc.rpc), stdout, stderr)
			}
			if tc.rpc == "produce" && !strings.Contains(stdout, "produced 1 record(s) to orders-0 at offset 7") {
				t.Fatalf("stdout %q", stdout)
			}
		})
		t.Run(tc.name+"/persists", func(t *testing.T) {
			c := startDataCluster(t, -1)
			_, stderr, code := c.run(t, tc.args...)
			if code != ExitError || c.failed(tc.rpc) != 4 {
				t.Fatalf("exit %d after %d KAFKA_STORAGE_ERROR answers, want %d after 4 (1 + 3 retries); stderr %q",
					code, c.failed(tc.rpc), ExitError, stderr)
			}
			for _, want := range []string{"gave up after 3 retries", "partition orders-0: KAFKA_STORAGE_ERROR",
				"the leader's copy of the partition is offline", "`twinctl brokers list`"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q lacks %q", stderr, want)
				}
			}
		})
	}
}
