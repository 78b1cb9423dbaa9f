package brokertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/storage"
)

// kafkaClient is a franz-go client on c's Kafka listeners.
func kafkaClient(t *testing.T, c *Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(c.KafkaAddrs()...),
		kgo.Dialer(c.KafkaDialer()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.MetadataMinAge(50 * time.Millisecond),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// kafkaTopicID is topic's id as cl's Metadata answers it (raw Produce
// v13+ and Fetch v13+ requests name topics by id).
func kafkaTopicID(ctx context.Context, t testing.TB, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata %s: %v %+v", topic, err, resp)
	}
	return resp.Topics[0].TopicID
}

// TestKafkaClientProducesAndConsumes: a franz-go producer (acks=all, no
// compression, not idempotent: idempotent_test.go has those) writes keyed
// records over three partitions through the Kafka listeners; a franz-go
// consumer reads every one back at the offset its produce was
// acknowledged with, and twinlog's own gRPC read of the same partitions
// returns the same values: both APIs front the same logs. Both clients
// refuse anything older than the newest versions twinlog serves of
// Produce (v13: topics by id), Fetch and Metadata, which franz-go sends.
func TestKafkaClientProducesAndConsumes(t *testing.T) {
	c := NewCluster(t, Options{MinISR: 2})
	c.CreateTopic("k", 3, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	newest := new(kversion.Versions)
	newest.SetMaxKeyVersion(0, 13) // Produce
	newest.SetMaxKeyVersion(1, 16) // Fetch
	newest.SetMaxKeyVersion(3, 12) // Metadata
	prod := kafkaClient(t, c, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DefaultProduceTopic("k"), kgo.MinVersions(newest))
	const n = 600
	type acked struct {
		p      int32
		offset int64
	}
	want := map[string]acked{}
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i%17), Value: fmt.Appendf(nil, "value-%d", i)})
	}
	res := prod.ProduceSync(ctx, recs...)
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("produce %s: %v", r.Record.Value, r.Err)
		}
		want[string(r.Record.Value)] = acked{r.Record.Partition, r.Record.Offset}
	}
	// Offsets per partition are dense from 0, in the order acknowledged.
	perPart := map[int32][]int64{}
	for _, a := range want {
		perPart[a.p] = append(perPart[a.p], a.offset)
	}
	if len(perPart) != 3 {
		t.Fatalf("records went to %d partitions, want 3 (keys hash over all)", len(perPart))
	}
	for p, offs := range perPart {
		slices.Sort(offs)
		for i, o := range offs {
			if o != int64(i) {
				t.Fatalf("partition %d: acknowledged offsets %v are not 0..%d", p, offs, len(offs)-1)
			}
		}
	}

	cons := kafkaClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"k": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()},
	}), kgo.MinVersions(newest))
	got := map[string]acked{}
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if _, dup := got[string(r.Value)]; dup {
				t.Fatalf("record %s consumed twice", r.Value)
			}
			got[string(r.Value)] = acked{r.Partition, r.Offset}
			if w := want[string(r.Value)]; w != (acked{r.Partition, r.Offset}) {
				t.Fatalf("record %s at %d/%d, acknowledged at %d/%d", r.Value, r.Partition, r.Offset, w.p, w.offset)
			}
		})
	}

	// The gRPC API reads the same records at the same offsets.
	for p := range int32(3) {
		grpcRecs, _ := c.ConsumeAll(ctx, "k", p)
		if len(grpcRecs) != len(perPart[p]) {
			t.Fatalf("partition %d: gRPC reads %d records, Kafka acknowledged %d", p, len(grpcRecs), len(perPart[p]))
		}
		for _, r := range grpcRecs {
			if w := want[string(r.Value)]; w.p != p || w.offset != int64(r.Offset) {
				t.Fatalf("partition %d offset %d: gRPC reads %q, acknowledged at %d/%d", p, r.Offset, r.Value, w.p, w.offset)
			}
		}
	}
}

// TestKafkaMetadataAndOffsets: Metadata lists every broker's Kafka
// listener, the topic's leaders and leader epochs as the controller has
// them; ListOffsets answers earliest and latest (the HW);
// OffsetForLeaderEpoch answers the end offset of the leader's epoch and
// fences a current epoch it has not reached; an
// unknown topic is UNKNOWN_TOPIC_OR_PARTITION; an unsupported version of
// a served API is UNSUPPORTED_VERSION.
func TestKafkaMetadataAndOffsets(t *testing.T) {
	c := NewCluster(t, Options{})
	c.CreateTopic("m", 2, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.MustProduce(ctx, "m", 1, -1, []byte("a"), []byte("b"), []byte("c"))
	cl := kafkaClient(t, c)

	mreq := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"m", "absent"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		mreq.Topics = append(mreq.Topics, rt)
	}
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(mresp.Brokers) != 3 {
		t.Fatalf("metadata lists %d brokers, want 3: %+v", len(mresp.Brokers), mresp.Brokers)
	}
	for _, b := range mresp.Brokers {
		if want := c.kafkaAddr(twinlog.BrokerID(b.NodeID)); fmt.Sprintf("%s:%d", b.Host, b.Port) != want {
			t.Errorf("broker %d at %s:%d, want %s", b.NodeID, b.Host, b.Port, want)
		}
	}
	if len(mresp.Topics) != 2 {
		t.Fatalf("metadata answers %d topics, want 2", len(mresp.Topics))
	}
	m, absent := mresp.Topics[0], mresp.Topics[1]
	if err := kerr.ErrorForCode(absent.ErrorCode); err != kerr.UnknownTopicOrPartition {
		t.Errorf("absent topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if m.ErrorCode != 0 || len(m.Partitions) != 2 || m.TopicID == [16]byte{} {
		t.Fatalf("topic m: error %d, %d partitions, id %x", m.ErrorCode, len(m.Partitions), m.TopicID)
	}
	// By topic id (Metadata v10+): a known id names its topic, an unknown
	// one is UNKNOWN_TOPIC_ID with the id echoed.
	idReq := kmsg.NewPtrMetadataRequest()
	for _, id := range [][16]byte{m.TopicID, {1, 2, 3}} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		idReq.Topics = append(idReq.Topics, rt)
	}
	idResp, err := idReq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(idResp.Topics) != 2 || idResp.Topics[0].Topic == nil || *idResp.Topics[0].Topic != "m" ||
		kerr.ErrorForCode(idResp.Topics[1].ErrorCode) != kerr.UnknownTopicID || idResp.Topics[1].TopicID != [16]byte{1, 2, 3} {
		t.Fatalf("metadata by id: %+v", idResp.Topics)
	}
	leader, le := c.Leader("m", 1)
	for _, p := range m.Partitions {
		if p.Partition == 1 && (p.Leader != int32(leader) || p.LeaderEpoch != int32(le) || len(p.ISR) != 3) {
			t.Fatalf("m-1: leader %d LE %d ISR %v, want leader %d LE %d and 3 in the ISR", p.Leader, p.LeaderEpoch, p.ISR, leader, le)
		}
	}

	// ListOffsets and OffsetForLeaderEpoch go to the leader.
	var offs []int64
	var lreq *kmsg.ListOffsetsRequest
	for _, ts := range []int64{-2, -1} {
		lreq = kmsg.NewPtrListOffsetsRequest()
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "m"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.CurrentLeaderEpoch, lp.Timestamp = 1, int32(le), ts
		lt.Partitions = append(lt.Partitions, lp)
		lreq.Topics = append(lreq.Topics, lt)
		lresp, err := lreq.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			t.Fatal(err)
		}
		p := lresp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("ListOffsets(%d): %v", ts, kerr.ErrorForCode(p.ErrorCode))
		}
		offs = append(offs, p.Offset)
	}
	if !slices.Equal(offs, []int64{0, 3}) {
		t.Fatalf("ListOffsets earliest, latest = %v, want [0 3]", offs)
	}

	oreq := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "m"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.Partition, op.CurrentLeaderEpoch, op.LeaderEpoch = 1, int32(le), int32(le)
	ot.Partitions = append(ot.Partitions, op)
	oreq.Topics = append(oreq.Topics, ot)
	oresp, err := oreq.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		t.Fatal(err)
	}
	if p := oresp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderEpoch != int32(le) || p.EndOffset != 3 {
		t.Fatalf("OffsetForLeaderEpoch(%d) = error %d, epoch %d, end %d; want epoch %d end 3", le, p.ErrorCode, p.LeaderEpoch, p.EndOffset, le)
	}
	// A current leader epoch the leader has not reached is
	// UNKNOWN_LEADER_EPOCH, as Kafka's leader answers. (A stale one, which
	// this fresh topic in LE 0 cannot have, is fenced in
	// TestKafkaConsumerAcrossFailbackTruncation.)
	op.CurrentLeaderEpoch = int32(le) + 1
	ot.Partitions[0] = op
	oreq.Topics[0] = ot
	oresp, err = oreq.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(oresp.Topics[0].Partitions[0].ErrorCode); err != kerr.UnknownLeaderEpoch {
		t.Fatalf("newer current leader epoch: %v, want UNKNOWN_LEADER_EPOCH", err)
	}

	// A served API at a version beyond the advertised range.
	vreq := kmsg.NewPtrListOffsetsRequest()
	vreq.Topics = lreq.Topics
	raw := &versioned{Request: vreq, version: 7}
	vresp, err := cl.Broker(int(leader)).RetriableRequest(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if code := vresp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode; kerr.ErrorForCode(code) != kerr.UnsupportedVersion {
		t.Fatalf("ListOffsets v7: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(code))
	}
}

// versioned pins a request's version: kgo would otherwise pick the
// highest both sides support.
type versioned struct {
	kmsg.Request
	version int16
}

func (v *versioned) SetVersion(int16)  { v.Request.SetVersion(v.version) }
func (v *versioned) MaxVersion() int16 { return v.version }
func (v *versioned) GetVersion() int16 { return v.version }
func (v *versioned) IsFlexible() bool  { v.Request.SetVersion(v.version); return v.Request.IsFlexible() }
func (v *versioned) AppendTo(b []byte) []byte {
	v.Request.SetVersion(v.version)
	return v.Request.AppendTo(b)
}

// TestKafkaCompressionCodecs: a franz-go producer with each of Kafka's
// codecs writes records that a franz-go consumer reads back, that
// twinlog's gRPC read decodes, and that the leader stores and serves
// compressed: the batches a follower fetch returns carry the codec, as
// the producer sent them.
func TestKafkaCompressionCodecs(t *testing.T) {
	c := NewCluster(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, tc := range []struct {
		codec kgo.CompressionCodec
		want  storage.Codec
	}{
		{kgo.GzipCompression(), storage.CodecGzip},
		{kgo.SnappyCompression(), storage.CodecSnappy},
		{kgo.Lz4Compression(), storage.CodecLZ4},
		{kgo.ZstdCompression(), storage.CodecZstd},
	} {
		topic := fmt.Sprintf("z%d", i)
		c.CreateTopic(topic, 1, 3, nil)
		prod := kafkaClient(t, c, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchCompression(tc.codec), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
		var recs []*kgo.Record
		for j := range 200 {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%s record %d %s", tc.want, j, strings.Repeat("x", 100))})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("%v: produce: %v", tc.want, err)
		}
		cons := kafkaClient(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		var got []string
		for len(got) < len(recs) {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%v: consumed %d of %d", tc.want, len(got), len(recs))
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("%v: fetch: %v", tc.want, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if want := string(recs[len(got)].Value); string(r.Value) != want || r.Offset != int64(len(got)) {
					t.Fatalf("%v: offset %d %q, want offset %d %q", tc.want, r.Offset, r.Value, len(got), want)
				}
				got = append(got, string(r.Value))
			})
		}
		grpcRecs, _ := c.ConsumeAll(ctx, topic, 0)
		if len(grpcRecs) != len(recs) || string(grpcRecs[199].Value) != string(recs[199].Value) {
			t.Fatalf("%v: gRPC reads %d records", tc.want, len(grpcRecs))
		}
		// The stored batches are the producer's, compressed.
		leader, le := c.Leader(topic, 0)
		resp, err := c.FetchClient(leader).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER,
			MaxBytes: 8 << 20, Partitions: []*pb.FetchPartition{{Topic: topic, FetchOffset: 0, CurrentLeaderEpoch: int32(le), LastFetchedEpoch: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for bv, err := range storage.Batches(resp.GetPartitions()[0].GetRecords()) {
			if err != nil {
				t.Fatal(err)
			}
			if bv.Codec() != tc.want {
				t.Fatalf("stored batch at %d has codec %v, want %v", bv.BaseOffset(), bv.Codec(), tc.want)
			}
			n++
		}
		if n == 0 {
			t.Fatalf("%v: no batches served", tc.want)
		}
	}
}

// TestKafkaAdmin: franz-go's kadm (an admin client nobody here wrote)
// creates a topic with the broker defaults and a config, is told
// TOPIC_ALREADY_EXISTS the second time, describes and incrementally alters
// the topic's configs, pages DescribeTopicPartitions (KIP-966) one
// partition at a time with the cursor, describes the cluster, and deletes
// the topic: all through the brokers' Kafka listeners, which forward to
// the controller.
func TestKafkaAdmin(t *testing.T) {
	c := NewCluster(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, c)
	adm := kadm.NewClient(cl)

	ct, err := adm.CreateTopic(ctx, 2, -1, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, "adm")
	if err != nil || ct.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, ct.Err)
	}
	if ct.ID == [16]byte{} || ct.NumPartitions != 2 || ct.ReplicationFactor != 3 {
		t.Fatalf("CreateTopic answered id %x, %d partitions, RF %d; want an id, 2, 3 (the default RF on 3 brokers)", ct.ID, ct.NumPartitions, ct.ReplicationFactor)
	}
	c.WaitFor("adm's partitions led", func() bool { return c.leaderReady("adm", 0) && c.leaderReady("adm", 1) })
	if again, _ := adm.CreateTopic(ctx, 2, -1, nil, "adm"); !errors.Is(again.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("second CreateTopic: %v, want TOPIC_ALREADY_EXISTS", again.Err)
	}

	configValue := func(key string) (string, kmsg.ConfigSource) {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "adm")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("adm", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("DescribeTopicConfigs: %v %v", err, rc.Err)
		}
		for _, cfg := range rc.Configs {
			if cfg.Key == key {
				return cfg.MaybeValue(), cfg.Source
			}
		}
		return "", 0
	}
	if v, src := configValue("min.insync.replicas"); v != "2" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("min.insync.replicas = %q from %v, want 2 from DYNAMIC_TOPIC_CONFIG", v, src)
	}
	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "unclean.leader.election.enable", Value: kmsg.StringPtr("true")},
		{Op: kadm.DeleteConfig, Name: "min.insync.replicas"}}, "adm")
	if err != nil || alter[0].Err != nil {
		t.Fatalf("AlterTopicConfigs: %v %+v", err, alter)
	}
	if v, _ := configValue("unclean.leader.election.enable"); v != "true" {
		t.Fatalf("unclean.leader.election.enable = %q after the alter, want true", v)
	}
	if v, src := configValue("min.insync.replicas"); src == kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("min.insync.replicas = %q still a topic config after DELETE", v)
	}
	bad, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "min.insync.replicas", Value: kmsg.StringPtr("1")}}, "adm")
	if err != nil || !errors.Is(bad[0].Err, kerr.InvalidConfig) {
		t.Fatalf("APPEND: %v %+v, want INVALID_CONFIG", err, bad)
	}

	// DescribeTopicPartitions one partition per page.
	var pages [][2]any
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = 1
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = "adm"
	req.Topics = append(req.Topics, rt)
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("DescribeTopicPartitions page %d: %+v", len(pages), resp.Topics)
		}
		p := resp.Topics[0].Partitions[0]
		if len(p.ISR) != 3 || p.LeaderID < 1 {
			t.Fatalf("partition %d: leader %d ISR %v", p.Partition, p.LeaderID, p.ISR)
		}
		pages = append(pages, [2]any{p.Partition, resp.NextCursor != nil})
		if resp.NextCursor == nil {
			break
		}
		req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	if fmt.Sprint(pages) != "[[0 true] [1 false]]" {
		t.Fatalf("pages %v, want partition 0 with a cursor, then partition 1 without", pages)
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dresp, err := dc.RequestWith(ctx, cl)
	if err != nil || dresp.ErrorCode != 0 || len(dresp.Brokers) != 3 || dresp.ClusterID != "cluster-"+c.Name {
		t.Fatalf("DescribeCluster: %v, %+v", err, dresp)
	}

	del, err := adm.DeleteTopics(ctx, "adm")
	if err != nil || del["adm"].Err != nil {
		t.Fatalf("DeleteTopics: %v %+v", err, del)
	}
	if del2, _ := adm.DeleteTopics(ctx, "adm"); !errors.Is(del2["adm"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("second DeleteTopics: %+v, want UNKNOWN_TOPIC_OR_PARTITION", del2)
	}
}

// TestKafkaConsumerAcrossFailbackTruncation: a franz-go consumer read a
// record on A that A's failback then replaces (the seed's rows 1-5: A
// wrote 2@2a while cut off, B failed over and wrote 2@2b in its own epoch
// 2, A mirrors B and truncates to the LMLE, dropping 2@2a). It resumes at
// offset 3 with the epoch of the last record it read (2), as a consumer
// group commits them, after the failback has copied B's records; it checks
// the position with OffsetForLeaderEpoch, is told the truncation point 2
// and reads B's 2@2b and 3@3b. The epochs collide (both clusters wrote
// epoch 2): with the plain end offset of epoch 2 (3) the consumer would
// keep a2 and never see b2.
func TestKafkaConsumerAcrossFailbackTruncation(t *testing.T) {
	a, b := TwoClusters(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a.CreateTopic("t", 1, 3, nil)
	writes(ctx, a, "t", "a0")
	leaderChange(a, "t")
	writes(ctx, a, "t", "a1")
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	waitLog(b, "t", "0@0a 1@1a")

	// consume reads n records of t on A from offset at, whose previous
	// record has epoch epoch (−1: none), and reports the truncations the
	// client saw.
	consume := func(ctx context.Context, at int64, epoch int32, n int) (got []string, last *kgo.Record, losses []string) {
		t.Helper()
		cons := kafkaClient(t, a, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().At(at).WithEpoch(epoch)}}))
		defer cons.Close()
		for len(got) < n {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %v, want %d records", got, n)
			}
			fs.EachError(func(_ string, _ int32, err error) {
				var loss *kgo.ErrDataLoss
				if !errors.As(err, &loss) {
					t.Fatalf("fetch: %v", err)
				}
				losses = append(losses, err.Error())
			})
			fs.EachRecord(func(r *kgo.Record) {
				got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Value))
				last = r
			})
		}
		return got, last, losses
	}

	// A, cut off from B, writes a2 in its epoch 2; a consumer on A reads
	// everything.
	a.Unreachable(b)
	if le := leaderChange(a, "t"); le != 2 {
		t.Fatalf("LE_A %d, want 2", le)
	}
	writes(ctx, a, "t", "a2")
	got, last, _ := consume(ctx, 0, -1, 3)
	if fmt.Sprint(got) != "[0:a0 1:a1 2:a2]" || last.LeaderEpoch != 2 {
		t.Fatalf("first read %v, last epoch %d", got, last.LeaderEpoch)
	}

	// B fails over (LMLE 1) and writes b2 in its epoch 2, b3 in epoch 3;
	// A fails back: it mirrors B, truncates to 2 and copies b2 and b3.
	mustStop(b, "m", "t")
	writes(ctx, b, "t", "b2")
	leaderChange(b, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)
	writes(ctx, b, "t", "b3")
	waitLog(b, "t", "0@0a 1@1a 2@2b 3@3b")
	a.Reachable(b)
	a.CreateMirror("m", b, "t")
	a.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	waitLog(a, "t", "0@0a 1@1a 2@2b 3@3b")

	// (Without the truncation point in the answer it reads 3:b3 and then
	// waits for records that never come: 20 s, not the test's 90.)
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	got, _, losses := consume(rctx, last.Offset+1, last.LeaderEpoch, 2)
	if fmt.Sprint(got) != "[2:b2 3:b3]" || len(losses) != 1 {
		t.Fatalf("resumed at 3 (epoch 2): read %v, losses %v; want [2:b2 3:b3] after one reported truncation", got, losses)
	}
	t.Logf("consumer: %s", losses[0])
}

// TestKafkaMetadataTopicLists: Metadata with a null topic list answers
// every topic, with an empty one (v1+) only the brokers, as Kafka; over
// gRPC no_topics is the empty list.
func TestKafkaMetadataTopicLists(t *testing.T) {
	c := NewCluster(t, Options{})
	c.CreateTopic("a", 1, 3, nil)
	c.CreateTopic("b", 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kafkaClient(t, c)
	for _, tc := range []struct {
		name   string
		topics []kmsg.MetadataRequestTopic
		want   int
	}{{"null", nil, 2}, {"empty", []kmsg.MetadataRequestTopic{}, 0}} {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = tc.topics
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != tc.want || len(resp.Brokers) != 3 {
			t.Fatalf("%s topic list: %d topics and %d brokers, want %d and 3", tc.name, len(resp.Topics), len(resp.Brokers), tc.want)
		}
	}
	md, err := c.FetchClient(1).Metadata(ctx, &pb.MetadataRequest{NoTopics: true})
	if err != nil || len(md.GetTopics()) != 0 || len(md.GetBrokers()) != 3 {
		t.Fatalf("gRPC no_topics: %v, %d topics, %d brokers", err, len(md.GetTopics()), len(md.GetBrokers()))
	}
}
