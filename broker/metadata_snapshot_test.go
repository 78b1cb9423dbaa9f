package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller"
	"github.com/twinlog/twinlog/metadata"
)

// pageNet is a bufconn address registry for a controller and one broker.
type pageNet struct {
	mu  sync.Mutex
	lis map[string]*bufconn.Listener
}

func (n *pageNet) listen(addr string) net.Listener {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := bufconn.Listen(1 << 20)
	n.lis[addr] = l
	return l
}

func (n *pageNet) dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			n.mu.Lock()
			l := n.lis[addr]
			n.mu.Unlock()
			if l == nil {
				return nil, fmt.Errorf("bufnet: %s unreachable", addr)
			}
			return l.DialContext(ctx)
		})}, opts...)...)
}

// TestMetadataCatchUpThroughSnapshotPages (issue 13): a broker whose
// metadata offset was compacted away catches up through a snapshot sent in
// pages under a small metadata.fetch.max.bytes, and when a newer compaction
// replaces the snapshot halfway, it drops the partial one and starts over on
// the new one instead of joining pages of two snapshots. Before, the broker
// restored the first page as if it were the whole snapshot and went on from
// its offset, missing every topic and partition of the later pages.
func TestMetadataCatchUpThroughSnapshotPages(t *testing.T) {
	const budget = 4 << 10
	nw := &pageNet{lis: map[string]*bufconn.Listener{}}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	const ctlAddr = "controller:9090"
	ctl, err := controller.New(controller.Config{
		DataDir: t.TempDir(), ClusterID: "c", TickInterval: 50 * time.Millisecond, MaxFetchWait: time.Second,
		MaxFetchBytes: budget, RetainDeltas: 1,
		// The fake brokers 2 and 3 heartbeat only at the start: they
		// must stay unfenced, so that partitions do not change under the
		// comparison below.
		ClusterConfigs: map[string]string{"broker.session.timeout.ms": "3600000", "broker.heartbeat.interval.ms": "100"},
	}, controller.Deps{Logger: log, Listener: nw.listen(ctlAddr)})
	if err != nil {
		t.Fatal(err)
	}
	ctlCtx, stopCtl := context.WithCancel(context.Background())
	ctlDone := make(chan error, 1)
	go func() { ctlDone <- ctl.Run(ctlCtx) }()
	t.Cleanup(func() {
		stopCtl()
		if err := <-ctlDone; err != nil {
			t.Errorf("controller Run: %v", err)
		}
	})
	conn, err := nw.dial(ctlAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	cc, admin := pb.NewControllerServiceClient(conn), pb.NewAdminServiceClient(conn)

	ctx := t.Context()
	for id := int32(2); id <= 3; id++ {
		reg, err := cc.RegisterBroker(ctx, &pb.RegisterBrokerRequest{BrokerId: id, IncarnationId: fmt.Sprint("inc-", id),
			Host: fmt.Sprint("b", id), Port: 9092, LogDirs: []string{"/data"}, PreviousBrokerEpoch: -1})
		if err != nil || reg.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("register %d: %v %v", id, reg.GetError(), err)
		}
		hb, err := cc.BrokerHeartbeat(ctx, &pb.BrokerHeartbeatRequest{BrokerId: id, BrokerEpoch: reg.GetBrokerEpoch(), AppliedOffset: ctl.Offset()})
		if err != nil || hb.GetIsFenced() {
			t.Fatalf("heartbeat %d: %v %v", id, hb, err)
		}
	}
	createTopic := func(name string, parts int32) error {
		resp, err := admin.CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: name, NumPartitions: parts, ReplicationFactor: 2}}})
		if err != nil {
			return err
		}
		if e := resp.GetTopics()[0].GetError(); e != pb.ErrorCode_ERROR_CODE_NONE {
			return fmt.Errorf("create %s: %v %s", name, e, resp.GetTopics()[0].GetErrorMessage())
		}
		return nil
	}
	// ref follows the log delta by delta before each compaction: the
	// image the broker must end up with.
	ref := metadata.New("")
	follow := func() error {
		for ref.Offset() < ctl.Offset() {
			resp, err := cc.FetchMetadata(ctx, &pb.FetchMetadataRequest{FromOffset: ref.Offset() + 1})
			if err != nil {
				return err
			}
			if resp.GetSnapshot() != nil || len(resp.GetDeltas()) == 0 {
				return fmt.Errorf("reference follower at %d: snapshot %v, %d deltas", ref.Offset(), resp.GetSnapshot() != nil, len(resp.GetDeltas()))
			}
			for _, d := range resp.GetDeltas() {
				if err := ref.Apply(d); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for i := range 3 {
		if err := createTopic(fmt.Sprint("topic-", i), 100); err != nil {
			t.Fatal(err)
		}
	}
	if err := follow(); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Compact(); err != nil {
		t.Fatal(err)
	}

	// The broker's controller connection records every snapshot page
	// and, after the second one, replaces the snapshot by a newer
	// compaction.
	type pageSeen struct {
		offset, position int64
		items            int
		last             bool
	}
	var (
		mu        sync.Mutex
		seen      []pageSeen
		hookErr   error
		compacted bool
	)
	intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		r, ok := reply.(*pb.FetchMetadataResponse)
		if err != nil || !ok || r.GetSnapshot() == nil {
			return err
		}
		s := r.GetSnapshot()
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, pageSeen{s.GetOffset(), r.GetSnapshotPosition(),
			len(s.GetBrokers()) + len(s.GetTopics()) + len(s.GetPartitions()) + len(s.GetMirrors()), r.GetNextSnapshotCursor() == nil})
		if len(seen) == 2 && !compacted {
			compacted = true
			hookErr = errors.Join(createTopic("late", 50), follow(), ctl.Compact())
		}
		return nil
	}
	b, err := New(Config{
		ID: 1, ClusterID: "c", AdvertisedAddr: "b1:9092", ControllerAddr: ctlAddr, LogDirs: []string{t.TempDir()},
		HeartbeatInterval: 100 * time.Millisecond, TickInterval: 50 * time.Millisecond,
		MetadataMaxWait: time.Second, RPCTimeout: 2 * time.Second,
	}, Deps{
		Dial: func(addr string) (*grpc.ClientConn, error) {
			return nw.dial(addr, grpc.WithUnaryInterceptor(intercept))
		},
		Listener: nw.listen("b1:9092"),
		Logger:   log,
	})
	if err != nil {
		t.Fatal(err)
	}
	bctx, stopBroker := context.WithCancel(context.Background())
	bDone := make(chan error, 1)
	go func() { bDone <- b.Run(bctx) }()
	t.Cleanup(func() {
		stopBroker()
		<-bDone
	})

	// Wait, on the broker's change notifications, until it has applied
	// everything the controller holds.
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		changed := b.Changed()
		mu.Lock()
		refOffset := ref.Offset()
		mu.Unlock()
		if off := b.MetadataOffset(); off > 0 && off == ctl.Offset() && off >= refOffset {
			break
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("broker at metadata offset %d, controller at %d", b.MetadataOffset(), ctl.Offset())
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	t.Logf("pages: %+v", seen)
	// Pages of the first snapshot, then a restart at position 0 of the
	// second, then its pages in order up to the last.
	restart := -1
	for i, p := range seen {
		if i > 0 && p.offset != seen[i-1].offset {
			if restart >= 0 || p.position != 0 {
				t.Fatalf("pages %+v: snapshot changed at %d without a restart", seen, i)
			}
			restart = i
		}
	}
	if restart < 2 || seen[0].position != 0 || seen[len(seen)-1].offset != seen[restart].offset || !seen[len(seen)-1].last {
		t.Fatalf("pages %+v: want two pages of the first snapshot, then the second from position 0 to its end", seen)
	}
	partial := 0
	for i, p := range seen[restart:] {
		if i > 0 && p.position != seen[restart+i-1].position+int64(seen[restart+i-1].items) {
			t.Fatalf("pages %+v: the second snapshot skips or repeats items", seen)
		}
		if !p.last {
			partial++
		}
	}
	if partial < 3 {
		t.Fatalf("pages %+v: the second snapshot took %d partial pages, want several", seen, partial)
	}

	b.metaMu.Lock()
	got := b.image.Snapshot()
	b.metaMu.Unlock()
	want := ref.Snapshot()
	if len(want.GetPartitions()) < 350 || len(got.GetPartitions()) != len(want.GetPartitions()) || len(got.GetTopics()) != len(want.GetTopics()) {
		t.Fatalf("broker image: %d topics, %d partitions; want %d topics, %d partitions",
			len(got.GetTopics()), len(got.GetPartitions()), len(want.GetTopics()), len(want.GetPartitions()))
	}
	for i, tr := range want.GetTopics() {
		if !proto.Equal(tr, got.GetTopics()[i]) {
			t.Fatalf("topic %d: broker %v, controller %v", i, got.GetTopics()[i], tr)
		}
	}
	for i, p := range want.GetPartitions() {
		if !proto.Equal(p, got.GetPartitions()[i]) {
			t.Fatalf("partition %s-%d: broker %v, controller %v", p.GetTopic(), p.GetPartition(), got.GetPartitions()[i], p)
		}
	}
}
