package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/errcode"
)

// topicMeta caches Metadata answers (SPEC §4.6) for one topic.
type topicMeta struct {
	a       *app
	topic   string
	parts   map[int32]*twinlogv1.MetadataPartition
	brokers map[int32]string
}

func (a *app) newTopicMeta(topic string) *topicMeta { return &topicMeta{a: a, topic: topic} }

// refresh asks the bootstrap server for the topic's leaders.
func (m *topicMeta) refresh(ctx context.Context) error {
	ctx, cancel := m.a.rpcCtx(ctx)
	defer cancel()
	resp, err := twinlogv1.NewFetchServiceClient(m.a.bootstrapConn()).Metadata(ctx, &twinlogv1.MetadataRequest{Topics: []string{m.topic}})
	if err != nil {
		return rpcError(err, m.a.bootstrap, "metadata")
	}
	m.brokers = map[int32]string{}
	for _, b := range resp.GetBrokers() {
		m.brokers[b.GetId()] = fmt.Sprintf("%s:%d", b.GetHost(), b.GetPort())
	}
	for _, t := range resp.GetTopics() {
		if t.GetName() != m.topic {
			continue
		}
		if err := protoErr(t.GetError(), "topic "+m.topic, "", m.topic); err != nil {
			return err
		}
		m.parts = map[int32]*twinlogv1.MetadataPartition{}
		for _, p := range t.GetPartitions() {
			m.parts[p.GetIndex()] = p
		}
		return nil
	}
	return protoErr(twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "topic "+m.topic, "", m.topic)
}

func (m *topicMeta) partitionCount(ctx context.Context) (int, error) {
	if m.parts == nil {
		if err := m.refresh(ctx); err != nil {
			return 0, err
		}
	}
	return len(m.parts), nil
}

// errNoLeader is retriable: the partition is between leaders.
var errNoLeader = errors.New("partition has no live leader")

// leader returns the leader's address and epoch, refreshing once if unknown.
func (m *topicMeta) leader(ctx context.Context, p int32) (string, int32, error) {
	if m.parts == nil {
		if err := m.refresh(ctx); err != nil {
			return "", 0, err
		}
	}
	mp, ok := m.parts[p]
	if !ok {
		return "", 0, protoErr(twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
			fmt.Sprintf("partition %s-%d", m.topic, p), "", m.topic)
	}
	if mp.GetLeaderId() < 0 {
		return "", 0, errNoLeader
	}
	addr, ok := m.brokers[mp.GetLeaderId()]
	if !ok {
		return "", 0, errNoLeader
	}
	return addr, mp.GetLeaderEpoch(), nil
}

// retriableRefresh reports whether c is answered by refreshing Metadata and
// retrying (errcode's RefreshMetadata, where each code's entry says why it
// is or is not: a retry after *_AFTER_APPEND or REQUEST_TIMED_OUT can
// duplicate the batch, so those are reported instead).
func retriableRefresh(c twinlogv1.ErrorCode) bool { return errcode.Of(c).RefreshMetadata }

func backoff(ctx context.Context, attempt int) error {
	d := min(50*time.Millisecond<<attempt, 2*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func parseAcks(s string) (int32, error) {
	switch s {
	case "all", "-1":
		return -1, nil
	case "0":
		return 0, nil
	case "1":
		return 1, nil
	}
	return 0, usagef("--acks must be all, -1, 0 or 1, got %q", s)
}

type producer struct {
	a           *app
	meta        *topicMeta
	acks        int32
	timeoutMs   int32
	retries     int
	now         func() time.Time
	partition   int32 // -1: by key hash, else 0
	partitioned bool

	// id is the idempotent producer (NoProducer: not idempotent); next
	// is each partition's next sequence.
	id   Producer
	next map[int32]int32

	keyed       kgo.TopicPartitioner
	unkeyedNext int32 // next unkeyed batch's partition; -1: not chosen yet
	randN       func(n int) int32
}

// initIdempotence asks the bootstrap broker for a producer id
// (InitProducerId), as Kafka's idempotent producer does before its first
// batch. required: --idempotent was given; otherwise a broker that does
// not serve it leaves the producer not idempotent, with a note.
func (pr *producer) initIdempotence(ctx context.Context, required bool) error {
	a := pr.a
	rctx, cancel := a.rpcCtx(ctx)
	defer cancel()
	resp, err := twinlogv1.NewProduceServiceClient(a.bootstrapConn()).InitProducerId(rctx, &twinlogv1.InitProducerIdRequest{})
	if status.Code(err) == codes.Unimplemented && !required {
		fmt.Fprintf(a.opts.Stderr, "note: %s does not serve InitProducerId; producing without idempotence (a retry may duplicate a batch)\n", a.bootstrap)
		return nil
	}
	if err != nil {
		return rpcError(err, a.bootstrap, "init producer id")
	}
	if err := protoErr(resp.GetError(), "producer id", resp.GetErrorMessage(), ""); err != nil {
		return err
	}
	pr.id = Producer{ID: resp.GetProducerId(), Epoch: int16(resp.GetProducerEpoch())}
	pr.next = map[int32]int32{}
	return nil
}

// batch encodes records for partition p: with the producer's next
// sequence there when idempotent. A retry of the batch sends the same
// bytes, so the leader answers it as the original (a duplicate) if that
// was appended.
func (pr *producer) batch(p int32, recs []Record) ([]byte, error) {
	id := pr.id
	if pr.next != nil {
		id.BaseSequence = pr.next[p]
	} else {
		id = NoProducer
	}
	return pr.a.opts.Codec.Encode(recs, id)
}

// acked moves partition p's sequence past an acknowledged batch of n
// records (wrapping past MaxInt32 to 0, as Kafka's producer).
func (pr *producer) acked(p int32, n int) {
	if pr.next != nil {
		pr.next[p] = int32((int64(pr.next[p]) + int64(n)) % (math.MaxInt32 + 1))
	}
}

type produceResult struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	BaseOffset  int64  `json:"base_offset"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Records     int    `json:"records"`
}

// pick chooses the partition of a record: --partition if given, else for
// a keyed record the partition Kafka's Java producer picks (murmur2 of the
// key, high bit masked, modulo the partition count; franz-go's
// StickyKeyPartitioner computes it), so twinctl and Kafka clients put a key
// in the same partition; an unkeyed record goes to the batch's partition
// (unkeyed), as Kafka's sticky partitioner keeps a batch together.
func (pr *producer) pick(ctx context.Context, key []byte, unkeyed int32) (int32, error) {
	if pr.partitioned {
		return max(pr.partition, 0), nil
	}
	if key == nil {
		return unkeyed, nil
	}
	n, err := pr.meta.partitionCount(ctx)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	if pr.keyed == nil {
		pr.keyed = kgo.StickyKeyPartitioner(nil).ForTopic(pr.meta.topic)
	}
	return int32(pr.keyed.Partition(&kgo.Record{Key: key}, n)), nil
}

// nextUnkeyed is the partition of the next batch's unkeyed records: the
// partitions in turn from a random one, so unkeyed records spread over
// every partition a batch at a time.
func (pr *producer) nextUnkeyed(ctx context.Context) (int32, error) {
	n, err := pr.meta.partitionCount(ctx)
	if err != nil || n == 0 {
		return 0, err
	}
	if pr.unkeyedNext < 0 {
		pr.unkeyedNext = pr.randN(n)
	}
	p := pr.unkeyedNext % int32(n)
	pr.unkeyedNext = (p + 1) % int32(n)
	return p, nil
}

// send produces one batch to partition p, following leadership changes.
func (pr *producer) send(ctx context.Context, p int32, batch []byte, count int) (*produceResult, error) {
	a := pr.a
	subject := fmt.Sprintf("partition %s-%d", pr.meta.topic, p)
	var lastErr error
	for attempt := 0; attempt <= pr.retries; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt-1); err != nil {
				return nil, err
			}
			if err := pr.meta.refresh(ctx); err != nil {
				lastErr = err
				continue
			}
		}
		addr, _, err := pr.meta.leader(ctx, p)
		if errors.Is(err, errNoLeader) {
			lastErr = fmt.Errorf("%s: %w", subject, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		c, err := a.conn(addr)
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, a.timeout+time.Duration(pr.timeoutMs)*time.Millisecond)
		resp, err := twinlogv1.NewProduceServiceClient(c).Produce(rctx, &twinlogv1.ProduceRequest{
			Acks: pr.acks, TimeoutMs: pr.timeoutMs,
			Partitions: []*twinlogv1.ProducePartitionData{{Topic: pr.meta.topic, Partition: p, Records: batch}},
		})
		cancel()
		if err != nil {
			if status.Code(err) == codes.Unavailable {
				lastErr = rpcError(err, addr, "produce")
				continue
			}
			return nil, rpcError(err, addr, "produce")
		}
		if pr.acks == 0 {
			return &produceResult{Topic: pr.meta.topic, Partition: p, BaseOffset: -1, LeaderEpoch: -1, Records: count}, nil
		}
		var ppr *twinlogv1.ProducePartitionResponse
		for _, x := range resp.GetPartitions() {
			if x.GetTopic() == pr.meta.topic && x.GetPartition() == p {
				ppr = x
			}
		}
		if ppr == nil {
			return nil, fmt.Errorf("produce: %s answered without %s; report this server bug", addr, subject)
		}
		if ppr.GetError() == twinlogv1.ErrorCode_ERROR_CODE_NONE {
			return &produceResult{Topic: pr.meta.topic, Partition: p, BaseOffset: ppr.GetBaseOffset(), LeaderEpoch: ppr.GetLeaderEpoch(), Records: count}, nil
		}
		perr := protoErr(ppr.GetError(), subject, ppr.GetErrorMessage(), pr.meta.topic)
		// An idempotent batch may also be retried where a plain one could
		// be appended twice (REQUEST_TIMED_OUT, *_AFTER_APPEND): the
		// leader answers a retry of an appended batch as a duplicate.
		if !retriableRefresh(ppr.GetError()) && !(pr.next != nil && errcode.Of(ppr.GetError()).Retriable) {
			return nil, perr
		}
		lastErr = perr
	}
	return nil, fmt.Errorf("gave up after %d retries: %w", pr.retries, lastErr)
}

func (a *app) produceCommand() *cobra.Command {
	var (
		topic      string
		partition  int32
		value      string
		key        string
		parseKey   bool
		sep        string
		acks       string
		timeoutMs  int32
		retries    int
		batchLimit int
		idempotent bool
	)
	c := &cobra.Command{
		Use:   "produce --topic T [--value V | < lines]",
		Short: "Produce records: --value, or one record per stdin line",
		Long: `Each stdin line becomes one record (with --parse-key, "key<sep>value").
The leader is found with the Metadata RPC on --bootstrap (a broker, or
one that a controller given there lists);
NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
NOT_ENOUGH_REPLICAS and KAFKA_STORAGE_ERROR (the leader's copy is offline)
are retried after a Metadata refresh (SPEC §1.4).
Without --partition, a keyed record goes to the partition Kafka's Java
producer picks for its key (murmur2), and unkeyed records are spread a batch
(--batch-size lines) at a time over the partitions in turn.
With acks all, the producer is idempotent unless --idempotent=false (as
Kafka's since 3.0): it takes a producer id from the broker (InitProducerId)
and numbers its batches, so the retries above, and those of
REQUEST_TIMED_OUT and NOT_ENOUGH_REPLICAS_AFTER_APPEND, never append a
batch twice; a batch the leader cannot place in sequence fails with
OUT_OF_ORDER_SEQUENCE_NUMBER.`,
		Example: `  twinctl --bootstrap 127.0.0.1:9091 produce --topic orders --value hello
  printf 'k1:v1\nk2:v2\n' | twinctl --bootstrap 127.0.0.1:9091 produce --topic orders --parse-key --acks all`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if topic == "" {
				return usagef("--topic is required")
			}
			ack, err := parseAcks(acks)
			if err != nil {
				return err
			}
			if sep == "" {
				return usagef("--key-separator must not be empty")
			}
			if batchLimit < 1 {
				return usagef("--batch-size must be ≥ 1")
			}
			if a.opts.Codec == nil {
				return errNoCodec
			}
			explicit := cmd.Flags().Changed("idempotent")
			if idempotent && explicit && ack != -1 {
				return usagef("--idempotent needs --acks all (a producer that does not wait for the ISR cannot know what to retry)")
			}
			pr := &producer{a: a, meta: a.newTopicMeta(topic), acks: ack, timeoutMs: timeoutMs, retries: retries,
				now: time.Now, partition: partition, partitioned: cmd.Flags().Changed("partition"), id: NoProducer,
				unkeyedNext: -1, randN: func(n int) int32 { return int32(rand.IntN(n)) }}
			ctx := cmd.Context()
			if idempotent && ack == -1 {
				if err := pr.initIdempotence(ctx, explicit); err != nil {
					return err
				}
			}
			var staticKey []byte
			if cmd.Flags().Changed("key") {
				staticKey = []byte(key)
			}
			p := a.printer()
			total := 0
			flush := func(recs []Record) error {
				byPart := map[int32][]Record{}
				var order []int32
				unkeyed := int32(0)
				if !pr.partitioned && slices.ContainsFunc(recs, func(r Record) bool { return r.Key == nil }) {
					var err error
					if unkeyed, err = pr.nextUnkeyed(ctx); err != nil {
						return err
					}
				}
				for _, r := range recs {
					pn, err := pr.pick(ctx, r.Key, unkeyed)
					if err != nil {
						return err
					}
					if _, ok := byPart[pn]; !ok {
						order = append(order, pn)
					}
					byPart[pn] = append(byPart[pn], r)
				}
				for _, pn := range order {
					batch, err := pr.batch(pn, byPart[pn])
					if err != nil {
						return fmt.Errorf("encode batch: %w", err)
					}
					res, err := pr.send(ctx, pn, batch, len(byPart[pn]))
					if err != nil {
						return err
					}
					pr.acked(pn, len(byPart[pn]))
					total += res.Records
					if p.json {
						if err := p.emitJSON(res); err != nil {
							return err
						}
					} else if ack == 0 {
						fmt.Fprintf(p.w, "sent %d record(s) to %s-%d (acks=0, not confirmed)\n", res.Records, topic, pn)
					} else {
						fmt.Fprintf(p.w, "produced %d record(s) to %s-%d at offset %d (leader epoch %d)\n", res.Records, topic, pn, res.BaseOffset, res.LeaderEpoch)
					}
				}
				return nil
			}
			if cmd.Flags().Changed("value") {
				return flush([]Record{{Timestamp: pr.now().UnixMilli(), Key: staticKey, Value: []byte(value)}})
			}
			return readLines(a.opts.Stdin, batchLimit, func(lines []string) error {
				recs := make([]Record, 0, len(lines))
				for _, l := range lines {
					r := Record{Timestamp: pr.now().UnixMilli(), Key: staticKey, Value: []byte(l)}
					if parseKey {
						k, v, ok := strings.Cut(l, sep)
						if !ok {
							return usagef("line %q has no key separator %q (drop --parse-key or fix the input)", l, sep)
						}
						r.Key, r.Value = []byte(k), []byte(v)
					}
					recs = append(recs, r)
				}
				return flush(recs)
			})
		},
	}
	f := c.Flags()
	f.StringVar(&topic, "topic", "", "topic to produce to (required)")
	f.Int32Var(&partition, "partition", 0, "partition (default: hash of the key, else 0)")
	f.StringVar(&value, "value", "", "produce this single value instead of reading stdin")
	f.StringVar(&key, "key", "", "key for every record")
	f.BoolVar(&parseKey, "parse-key", false, "split each stdin line into key and value at --key-separator")
	f.StringVar(&sep, "key-separator", ":", "separator used by --parse-key")
	f.StringVar(&acks, "acks", "all", "acks: all (-1), 1 or 0")
	f.Int32Var(&timeoutMs, "request-timeout-ms", 5000, "server-side wait for acks=all")
	f.IntVar(&retries, "retries", 5, "retries on leader changes")
	f.IntVar(&batchLimit, "batch-size", 100, "max records per batch")
	f.BoolVar(&idempotent, "idempotent", true, "idempotent producer (with --acks all): retries never duplicate a batch")
	return c
}

// readLines calls flush with up to limit lines at a time, and early whenever
// the input would block, so interactive input is sent line by line.
func readLines(r io.Reader, limit int, flush func([]string) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			lines = append(lines, strings.TrimRight(line, "\r\n"))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		if len(lines) >= limit || br.Buffered() == 0 {
			if err := flush(lines); err != nil {
				return err
			}
			lines = nil
		}
	}
	if len(lines) > 0 {
		return flush(lines)
	}
	return nil
}
