package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// recordView is the JSON shape of one consumed record. Key and value are
// strings when they are valid UTF-8, else base64 under *_base64; null stays
// null.
type recordView struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Offset      int64   `json:"offset"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Timestamp   string  `json:"timestamp"`
	Key         *string `json:"key"`
	KeyBase64   []byte  `json:"key_base64,omitempty"`
	Value       *string `json:"value"`
	ValueBase64 []byte  `json:"value_base64,omitempty"`
}

func bytesField(b []byte) (*string, []byte) {
	if b == nil {
		return nil, nil
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	return nil, b
}

func formatTimestamp(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func showBytes(b []byte) string {
	if b == nil {
		return "null"
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return fmt.Sprintf("%q", b)
}

func (p *printer) record(topic string, part int32, epoch int32, r Record) error {
	if p.json {
		v := recordView{Topic: topic, Partition: part, Offset: r.Offset, LeaderEpoch: epoch, Timestamp: formatTimestamp(r.Timestamp)}
		v.Key, v.KeyBase64 = bytesField(r.Key)
		v.Value, v.ValueBase64 = bytesField(r.Value)
		// One object per line (NDJSON) so --follow output streams.
		enc := jsonLine{w: p.w}
		return enc.write(v)
	}
	if p.partitionColumn {
		_, err := fmt.Fprintf(p.w, "%d\t%d\t%d\t%s\t%s\t%s\n", part, r.Offset, epoch, formatTimestamp(r.Timestamp), showBytes(r.Key), showBytes(r.Value))
		return err
	}
	_, err := fmt.Fprintf(p.w, "%d\t%d\t%s\t%s\t%s\n", r.Offset, epoch, formatTimestamp(r.Timestamp), showBytes(r.Key), showBytes(r.Value))
	return err
}

type consumer struct {
	a         *app
	meta      *topicMeta
	partition int32
	maxWait   time.Duration
	maxBytes  int32
	retries   int
	warn      func(format string, args ...any)
	// printed counts the records run printed, over every call.
	printed int
}

// listOffset resolves earliest/latest (HW: consumers read below it, SPEC §4.2).
func (c *consumer) listOffset(ctx context.Context, spec twinlogv1.OffsetSpec) (int64, error) {
	subject := fmt.Sprintf("partition %s-%d", c.meta.topic, c.partition)
	var lastErr error
	for attempt := 0; attempt <= c.retries; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt-1); err != nil {
				return 0, err
			}
			if err := c.meta.refresh(ctx); err != nil {
				lastErr = err
				continue
			}
		}
		addr, epoch, err := c.meta.leader(ctx, c.partition)
		if errors.Is(err, errNoLeader) {
			lastErr = fmt.Errorf("%s: %w", subject, err)
			continue
		}
		if err != nil {
			return 0, err
		}
		cc, err := c.a.conn(addr)
		if err != nil {
			return 0, err
		}
		rctx, cancel := c.a.rpcCtx(ctx)
		resp, err := twinlogv1.NewFetchServiceClient(cc).ListOffsets(rctx, &twinlogv1.ListOffsetsRequest{Topics: []*twinlogv1.ListOffsetsTopic{{
			Name: c.meta.topic, Partitions: []*twinlogv1.ListOffsetsPartition{{Index: c.partition, CurrentLeaderEpoch: epoch, Spec: spec}},
		}}})
		cancel()
		if err != nil {
			if status.Code(err) == codes.Unavailable {
				lastErr = rpcError(err, addr, "list offsets")
				continue
			}
			return 0, rpcError(err, addr, "list offsets")
		}
		for _, t := range resp.GetTopics() {
			for _, p := range t.GetPartitions() {
				if p.GetIndex() != c.partition {
					continue
				}
				if p.GetError() == twinlogv1.ErrorCode_ERROR_CODE_NONE {
					return p.GetOffset(), nil
				}
				lastErr = protoErr(p.GetError(), subject, "", c.meta.topic)
				if !retriableRefresh(p.GetError()) {
					return 0, lastErr
				}
			}
		}
		if lastErr == nil {
			return 0, fmt.Errorf("list offsets: %s answered without %s; report this server bug", addr, subject)
		}
	}
	return 0, fmt.Errorf("gave up after %d retries: %w", c.retries, lastErr)
}

// run fetches from pos, printing records, until caught up with the HW
// (unless follow), max records were printed, or ctx ends.
func (c *consumer) run(ctx context.Context, pos int64, follow bool, maxRecords int, p *printer) error {
	subject := fmt.Sprintf("partition %s-%d", c.meta.topic, c.partition)
	lastEpoch := int32(-1) // epoch of the last record printed, for OffsetForLeaderEpoch
	printed, failures := 0, 0
	for {
		if maxRecords > 0 && printed >= maxRecords {
			return nil
		}
		addr, epoch, err := c.meta.leader(ctx, c.partition)
		if errors.Is(err, errNoLeader) {
			if failures++; failures > c.retries {
				return fmt.Errorf("%s: %w; check `twinctl partitions describe %s`", subject, err, c.meta.topic)
			}
			if err := c.retryAfterRefresh(ctx, failures); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		cc, err := c.a.conn(addr)
		if err != nil {
			return err
		}
		wait := int32(0)
		if follow {
			wait = int32(c.maxWait / time.Millisecond)
		}
		rctx, cancel := context.WithTimeout(ctx, c.a.timeout+time.Duration(wait)*time.Millisecond)
		resp, err := twinlogv1.NewFetchServiceClient(cc).Fetch(rctx, &twinlogv1.FetchRequest{
			ReplicaId: -1, ReplicaBrokerEpoch: -1, FetcherType: twinlogv1.FetcherType_FETCHER_TYPE_CONSUMER,
			MaxWaitMs: wait, MinBytes: 1, MaxBytes: c.maxBytes,
			Partitions: []*twinlogv1.FetchPartition{{Topic: c.meta.topic, Partition: c.partition, FetchOffset: pos,
				CurrentLeaderEpoch: epoch, LastFetchedEpoch: -1, PartitionMaxBytes: c.maxBytes}},
		})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: a clean stop for --follow
			}
			if status.Code(err) == codes.Unavailable {
				if failures++; failures <= c.retries {
					if err := c.retryAfterRefresh(ctx, failures); err != nil {
						return err
					}
					continue
				}
			}
			return rpcError(err, addr, "fetch")
		}
		var fp *twinlogv1.FetchPartitionResponse
		for _, x := range resp.GetPartitions() {
			if x.GetTopic() == c.meta.topic && x.GetPartition() == c.partition {
				fp = x
			}
		}
		if fp == nil {
			return fmt.Errorf("fetch: %s answered without %s; report this server bug", addr, subject)
		}
		switch code := fp.GetError(); code {
		case twinlogv1.ErrorCode_ERROR_CODE_NONE:
			failures = 0
			batches, err := c.a.opts.Codec.Decode(fp.GetRecords())
			if err != nil {
				return fmt.Errorf("%s: decode records at offset %d: %w", subject, pos, err)
			}
			for _, b := range batches {
				for _, r := range b.Records {
					if r.Offset < pos {
						continue // a batch may start before the fetch offset
					}
					if maxRecords > 0 && printed >= maxRecords {
						return nil
					}
					if err := p.record(c.meta.topic, c.partition, b.LeaderEpoch, r); err != nil {
						return err
					}
					printed++
					c.printed++
				}
				if b.LastOffset+1 > pos {
					pos = b.LastOffset + 1 // mirror partitions may have gaps (SPEC §6.2b)
					lastEpoch = b.LeaderEpoch
				}
			}
			if len(batches) == 0 && !follow && pos >= fp.GetHighWatermark() {
				return nil
			}
		case twinlogv1.ErrorCode_ERROR_CODE_LOG_TRUNCATED:
			// SPEC §4.3 step 2 / §4.4: the records we read past o were
			// removed by a truncation newer than our epoch; reposition to o.
			o := fp.GetTruncationOffset()
			c.warn("%s: log truncated at offset %d (records from %d that were read may be gone); repositioning from %d to %d", subject, o, o, pos, o)
			pos, lastEpoch = o, -1
			if err := c.meta.refresh(ctx); err != nil {
				return err
			}
		case twinlogv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:
			switch {
			case pos < fp.GetLogStartOffset():
				c.warn("%s: offset %d is below the log start %d (deleted); repositioning to %d", subject, pos, fp.GetLogStartOffset(), fp.GetLogStartOffset())
				pos = fp.GetLogStartOffset()
			default:
				hw, err := c.listOffset(ctx, twinlogv1.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK)
				if err != nil {
					return err
				}
				c.warn("%s: offset %d is past the end of the log; repositioning to the high watermark %d", subject, pos, hw)
				pos = hw
			}
		case twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH:
			// A newer leader epoch exists: adopt it only after checking our
			// position with OffsetForLeaderEpoch (SPEC §4.4).
			if err := c.meta.refresh(ctx); err != nil {
				return err
			}
			if lastEpoch >= 0 {
				end, err := c.epochEnd(ctx, lastEpoch)
				if err != nil {
					return err
				}
				if end >= 0 && end < pos {
					c.warn("%s: leader epoch %d ends at %d on the new leader, below our position %d: records were truncated; repositioning to %d", subject, lastEpoch, end, pos, end)
					pos, lastEpoch = end, -1
				}
			}
		default:
			perr := protoErr(code, subject, fp.GetErrorMessage(), c.meta.topic)
			if !retriableRefresh(code) && code != twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT {
				return perr
			}
			if failures++; failures > c.retries {
				return fmt.Errorf("gave up after %d retries: %w", c.retries, perr)
			}
			if err := c.retryAfterRefresh(ctx, failures); err != nil {
				return err
			}
		}
	}
}

func (c *consumer) retryAfterRefresh(ctx context.Context, failures int) error {
	if err := backoff(ctx, failures-1); err != nil {
		return nil // interrupted
	}
	if err := c.meta.refresh(ctx); err != nil {
		var perr *ProtocolError
		if errors.As(err, &perr) {
			return err
		}
		// transport trouble with the bootstrap: keep the old metadata
	}
	return nil
}

// epochEnd asks the leader where epoch ends (OffsetForLeaderEpoch, SPEC §4.4).
func (c *consumer) epochEnd(ctx context.Context, epoch int32) (int64, error) {
	addr, cur, err := c.meta.leader(ctx, c.partition)
	if err != nil {
		return -1, nil // let the fetch loop deal with leadership
	}
	cc, err := c.a.conn(addr)
	if err != nil {
		return -1, err
	}
	rctx, cancel := c.a.rpcCtx(ctx)
	defer cancel()
	resp, err := twinlogv1.NewFetchServiceClient(cc).OffsetForLeaderEpoch(rctx, &twinlogv1.OffsetForLeaderEpochRequest{
		Partitions: []*twinlogv1.OffsetForLeaderEpochPartition{{Topic: c.meta.topic, Partition: c.partition, CurrentLeaderEpoch: cur, LeaderEpoch: epoch}},
	})
	if err != nil {
		return -1, nil // best effort; the next fetch retries
	}
	for _, p := range resp.GetPartitions() {
		if p.GetPartition() == c.partition && p.GetError() == twinlogv1.ErrorCode_ERROR_CODE_NONE {
			return p.GetEndOffset(), nil
		}
	}
	return -1, nil
}

func (a *app) consumeCommand() *cobra.Command {
	var (
		topic     string
		partition int32
		offset    string
		follow    bool
		max       int
		maxWait   time.Duration
		maxBytes  int32
		retries   int
	)
	c := &cobra.Command{
		Use:   "consume --topic T [--partition P] [--offset earliest|latest|N] [--follow]",
		Short: "Read records: offset, leader epoch, timestamp, key, value",
		Long: `Reads committed records (below the high watermark) from the partition
leader, found with the Metadata RPC on --bootstrap (a broker, or one that a
controller given there lists). Without
--follow it stops once caught up. LOG_TRUNCATED and OFFSET_OUT_OF_RANGE are
reported on stderr and the position is moved (SPEC §4.3, §4.4). Leader
changes, and KAFKA_STORAGE_ERROR (the leader's copy is offline), are retried
after a Metadata refresh, up to --retries times in a row.
Without --partition it reads every partition in turn, each from --offset
(earliest, latest or N in each) up to its high watermark; --follow needs
--partition.
Table output columns: OFFSET, LEADER-EPOCH, TIMESTAMP, KEY, VALUE
(tab-separated), after PARTITION when reading every partition.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if topic == "" {
				return usagef("--topic is required")
			}
			if partition < 0 {
				return usagef("--partition must be ≥ 0")
			}
			var (
				spec twinlogv1.OffsetSpec
				pos  int64
			)
			switch offset {
			case "earliest":
				spec = twinlogv1.OffsetSpec_OFFSET_SPEC_EARLIEST
			case "latest":
				spec = twinlogv1.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK
			default:
				n, err := strconv.ParseInt(offset, 10, 64)
				if err != nil || n < 0 {
					return usagef("--offset must be earliest, latest or a number ≥ 0, got %q", offset)
				}
				pos = n
			}
			if a.opts.Codec == nil {
				return errNoCodec
			}
			cons := &consumer{a: a, meta: a.newTopicMeta(topic), partition: partition, maxWait: maxWait, maxBytes: maxBytes, retries: retries,
				warn: func(format string, args ...any) {
					fmt.Fprintf(a.opts.Stderr, "twinctl: warning: "+format+"\n", args...)
				}}
			ctx := cmd.Context()
			parts := []int32{partition}
			if !cmd.Flags().Changed("partition") {
				// Every partition in turn, each up to its HW, as a Kafka
				// consumer assigned the whole topic reads it (a partition
				// column tells them apart).
				if follow {
					return usagef("--follow reads one partition: give --partition (without it consume reads every partition once, up to its high watermark)")
				}
				n, err := cons.meta.partitionCount(ctx)
				if err != nil {
					return err
				}
				parts = parts[:0]
				for i := range int32(n) {
					parts = append(parts, i)
				}
			}
			p := a.printer()
			p.partitionColumn = !cmd.Flags().Changed("partition")
			start := pos
			for _, part := range parts {
				if max > 0 && cons.printed >= max {
					break
				}
				cons.partition, pos = part, start
				if spec != twinlogv1.OffsetSpec_OFFSET_SPEC_UNSPECIFIED {
					var err error
					if pos, err = cons.listOffset(ctx, spec); err != nil {
						return err
					}
				}
				left := 0
				if max > 0 {
					left = max - cons.printed
				}
				if err := cons.run(ctx, pos, follow, left, p); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&topic, "topic", "", "topic to read (required)")
	f.Int32Var(&partition, "partition", 0, "partition to read (default: every partition, once)")
	f.StringVar(&offset, "offset", "earliest", "start: earliest, latest (high watermark) or an offset")
	f.BoolVarP(&follow, "follow", "f", false, "keep waiting for new records (Ctrl-C stops)")
	f.IntVar(&max, "max-records", 0, "stop after this many records (0: no limit)")
	f.DurationVar(&maxWait, "max-wait", 500*time.Millisecond, "long-poll wait per fetch with --follow")
	f.Int32Var(&maxBytes, "max-bytes", 1<<20, "max bytes per fetch")
	f.IntVar(&retries, "retries", 10, "consecutive retries on leader changes before giving up")
	return c
}
