package brokertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastate"
	"github.com/twinlog/twinlog/metadata"
)

// TestInitProducerIDSpaces: InitProducerId through the Kafka listeners (and
// gRPC) gives every call a new id at epoch 0, from blocks the controller
// hands each broker; the ids carry the cluster's producer id space, 1 for
// cluster a and 2 for cluster b, so the two clusters' ids never meet, and
// each broker's Metadata reports the space. A transactional id is refused
// with TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
func TestInitProducerIDSpaces(t *testing.T) {
	a, b := TwoClusters(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := map[int64]string{}
	for _, tc := range []struct {
		c     *Cluster
		space int32
	}{{a, 1}, {b, 2}} {
		cl := kafkaClient(t, tc.c)
		block := map[twinlog.BrokerID]int64{} // broker → its block's first id
		for _, id := range []twinlog.BrokerID{1, 1, 2} {
			req := kmsg.NewPtrInitProducerIDRequest()
			resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
			if err != nil {
				t.Fatalf("%s-%d: InitProducerId: %v", tc.c.Name, id, err)
			}
			pid := resp.ProducerID
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil || resp.ProducerEpoch != 0 || metadata.ProducerIDSpaceOf(pid) != tc.space {
				t.Fatalf("%s-%d: id %d (space %d) epoch %d, %v; want a new id of space %d at epoch 0",
					tc.c.Name, id, pid, metadata.ProducerIDSpaceOf(pid), resp.ProducerEpoch, err, tc.space)
			}
			if who, ok := seen[pid]; ok {
				t.Fatalf("%s-%d: id %d given before, by %s", tc.c.Name, id, pid, who)
			}
			seen[pid] = tc.c.Name
			if start, ok := block[id]; !ok {
				block[id] = pid
			} else if pid < start || pid >= start+metastate.ProducerIDBlockSize {
				t.Fatalf("%s-%d: id %d outside its block at %d", tc.c.Name, id, pid, start)
			}
		}
		if d := block[1] - block[2]; d%metastate.ProducerIDBlockSize != 0 || d == 0 {
			t.Fatalf("%s: brokers 1 and 2 got blocks at %d and %d", tc.c.Name, block[1], block[2])
		}
		// gRPC: the same allocator, the same space.
		g, err := tc.c.ProduceClient(3).InitProducerId(ctx, &pb.InitProducerIdRequest{})
		if err != nil || g.GetError() != pb.ErrorCode_ERROR_CODE_NONE || metadata.ProducerIDSpaceOf(g.GetProducerId()) != tc.space || seen[g.GetProducerId()] != "" {
			t.Fatalf("%s: gRPC InitProducerId = %v, %v", tc.c.Name, g, err)
		}
		seen[g.GetProducerId()] = tc.c.Name
		md, err := pb.NewFetchServiceClient(tc.c.conn(tc.c.Addr(2))).Metadata(ctx, &pb.MetadataRequest{Topics: []string{}})
		if err != nil || md.GetProducerIdSpace() != tc.space {
			t.Fatalf("%s: Metadata reports producer id space %d (%v), want %d", tc.c.Name, md.GetProducerIdSpace(), err, tc.space)
		}

		txn := kmsg.NewPtrInitProducerIDRequest()
		txn.TransactionalID = kmsg.StringPtr("txn-1")
		resp, err := txn.RequestWith(ctx, cl.Broker(1))
		if err != nil || kerr.ErrorForCode(resp.ErrorCode) != kerr.TransactionalIDAuthorizationFailed {
			t.Fatalf("%s: transactional InitProducerId = %+v, %v; want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", tc.c.Name, resp, err)
		}
	}
}

// TestMirrorRefusesSourceInOwnProducerIDSpace: a cluster whose
// producer.id.space is its source's refuses the mirror (INVALID_CONFIG,
// naming the space and the key) and keeps nothing of it; a cluster in
// another space mirrors the same source.
func TestMirrorRefusesSourceInOwnProducerIDSpace(t *testing.T) {
	a, b := TwoClusters(t)
	same := NewCluster(t, Options{Cluster: "c", Network: a.Net, ClusterConfigs: map[string]string{metadata.KeyProducerIDSpace: "1"}})
	a.CreateTopic("t", 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := same.MirrorAdmin().CreateMirror(ctx, &pb.CreateMirrorRequest{Name: "m", SourceBootstrap: a.BootstrapAddrs(), Topics: []string{"t"}})
	if err != nil || resp.GetError() != pb.ErrorCode_ERROR_CODE_INVALID_CONFIG ||
		!strings.Contains(resp.GetErrorMessage(), "space 1, this cluster's own (producer.id.space)") {
		t.Fatalf("CreateMirror from a cluster of the same space = %v, %v", resp, err)
	}
	d, err := same.MirrorAdmin().DescribeMirrors(ctx, &pb.DescribeMirrorsRequest{})
	if err != nil || len(d.GetMirrors()) != 0 {
		t.Fatalf("refused mirror kept: %v, %v", d, err)
	}
	b.CreateMirror("m", a, "t")
}
