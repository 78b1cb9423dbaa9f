package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// idemBroker is one fake broker leading orders-0 that hands out producer
// id 42 and answers the first Produce with REQUEST_TIMED_OUT (the batch
// may or may not have been appended), then NONE.
type idemBroker struct {
	twinlogv1.UnimplementedFetchServiceServer
	twinlogv1.UnimplementedProduceServiceServer
	mu      sync.Mutex
	batches []string // each Produce's records, as the test codec encodes them
	inits   int
}

func (b *idemBroker) Metadata(context.Context, *twinlogv1.MetadataRequest) (*twinlogv1.MetadataResponse, error) {
	return &twinlogv1.MetadataResponse{
		Brokers: []*twinlogv1.MetadataBroker{{Id: 1, Host: "b1", Port: 9092}},
		Topics: []*twinlogv1.MetadataTopic{{Name: "orders", Partitions: []*twinlogv1.MetadataPartition{
			{Index: 0, LeaderId: 1, LeaderEpoch: 3, Replicas: []int32{1}, Isr: []int32{1}},
		}}},
	}, nil
}

func (b *idemBroker) InitProducerId(context.Context, *twinlogv1.InitProducerIdRequest) (*twinlogv1.InitProducerIdResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inits++
	return &twinlogv1.InitProducerIdResponse{ProducerId: 42, ProducerEpoch: 0}, nil
}

func (b *idemBroker) Produce(_ context.Context, req *twinlogv1.ProduceRequest) (*twinlogv1.ProduceResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pd := req.GetPartitions()[0]
	b.batches = append(b.batches, string(pd.GetRecords()))
	r := &twinlogv1.ProducePartitionResponse{Topic: pd.GetTopic(), Partition: pd.GetPartition(), BaseOffset: 9, LeaderEpoch: 3, LeaderId: 1}
	if len(b.batches) == 1 {
		r.Error, r.BaseOffset = twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT, -1
	}
	return &twinlogv1.ProduceResponse{Partitions: []*twinlogv1.ProducePartitionResponse{r}}, nil
}

func runIdem(t *testing.T, b *idemBroker, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runFake(t, b, b, stdin, args...)
}

func runPartsBroker(t *testing.T, b *partsBroker, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runFake(t, b, b, stdin, args...)
}

// runFake runs twinctl against one fake broker serving fetch and produce.
func runFake(t *testing.T, fetch twinlogv1.FetchServiceServer, produce twinlogv1.ProduceServiceServer, stdin string, args ...string) (string, string, int) {
	t.Helper()
	srv := grpc.NewServer()
	twinlogv1.RegisterFetchServiceServer(srv, fetch)
	twinlogv1.RegisterProduceServiceServer(srv, produce)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	var out, errb bytes.Buffer
	code := Execute(t.Context(), append([]string{"--bootstrap", "b1:9092"}, args...), Options{
		Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin), HomeDir: t.TempDir(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, string string) (net.Conn, error) {
			return lis.DialContext(ctx)
		})},
		StderrIsTerminal: func() bool { return false },
		Codec: CodecFuncs{
			EncodeFunc: func(recs []Record, p Producer) ([]byte, error) {
				return fmt.Appendf(nil, "%d/%d/%d/%d", p.ID, p.Epoch, p.BaseSequence, len(recs)), nil
			},
			DecodeFunc: decodeFake,
		},
	})
	return out.String(), errb.String(), code
}

// decodeFake reads the fake brokers' records: "P@N" is one record at
// offset N with value "pP-N"; anything else is no records.
func decodeFake(b []byte) ([]Batch, error) {
	var p, n int64
	if _, err := fmt.Sscanf(string(b), "%d@%d", &p, &n); err != nil {
		return nil, nil
	}
	return []Batch{{BaseOffset: n, LastOffset: n, LeaderEpoch: 3, Records: []Record{{Offset: n, Timestamp: 0, Value: fmt.Appendf(nil, "p%d-%d", p, n)}}}}, nil
}

// TestProduceIdempotent: with acks all twinctl takes a producer id, numbers
// its batches per partition, and retries REQUEST_TIMED_OUT with the same
// batch (the leader answers it as a duplicate if the first was appended);
// --idempotent=false sends no producer and reports the timeout instead of
// risking a duplicate; --idempotent with acks 1 is a usage error.
func TestProduceIdempotent(t *testing.T) {
	b := &idemBroker{}
	stdout, stderr, code := runIdem(t, b, "", "produce", "--topic", "orders", "--value", "a")
	if code != ExitOK || b.inits != 1 {
		t.Fatalf("exit %d, %d InitProducerId; stdout %q stderr %q", code, b.inits, stdout, stderr)
	}
	if want := []string{"42/0/0/1", "42/0/0/1"}; !slices.Equal(b.batches, want) {
		t.Fatalf("batches %v, want %v (the timed-out batch resent as it was)", b.batches, want)
	}

	b = &idemBroker{}
	// Two batches of two records: sequences 0 and 2.
	if _, stderr, code := runIdem(t, b, "a\nb\nc\nd\n", "produce", "--topic", "orders", "--batch-size", "2"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := []string{"42/0/0/2", "42/0/0/2", "42/0/2/2"}; !slices.Equal(b.batches, want) {
		t.Fatalf("batches %v, want %v", b.batches, want)
	}

	b = &idemBroker{}
	_, stderr, code = runIdem(t, b, "", "produce", "--topic", "orders", "--value", "a", "--idempotent=false")
	if code != ExitError || b.inits != 0 || !slices.Equal(b.batches, []string{"-1/-1/-1/1"}) || !strings.Contains(stderr, "REQUEST_TIMED_OUT") {
		t.Fatalf("not idempotent: exit %d, %d inits, batches %v, stderr %q", code, b.inits, b.batches, stderr)
	}
	_, stderr, code = runIdem(t, &idemBroker{}, "", "produce", "--topic", "orders", "--value", "a", "--acks", "1", "--idempotent")
	if code != ExitUsage || !strings.Contains(stderr, "--idempotent needs --acks all") {
		t.Fatalf("--idempotent with acks 1: exit %d, stderr %q", code, stderr)
	}
}
