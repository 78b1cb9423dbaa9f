package cli

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// DefaultTopicChunk is how many topics one DescribeTopicPartitions request
// names at most; longer lists are split (SPEC §5 "clients split long topic
// lists").
const DefaultTopicChunk = 200

// maxPages stops a pager whose server keeps returning cursors; with a 1-partition
// limit this still covers ten million partitions.
const maxPages = 10_000_000

// TopicSelector picks a topic and optionally some of its partitions (empty =
// all), as DescribeTopicPartitionsTopic does.
type TopicSelector struct {
	Topic      string
	Partitions []int32
}

// parseSelectors parses "topic" and "topic:0,2" arguments.
func parseSelectors(args []string) ([]TopicSelector, error) {
	var out []TopicSelector
	for _, arg := range args {
		name, parts, hasParts := strings.Cut(arg, ":")
		if name == "" {
			return nil, usagef("bad selector %q: want TOPIC or TOPIC:P[,P...]", arg)
		}
		sel := TopicSelector{Topic: name}
		if hasParts {
			for p := range strings.SplitSeq(parts, ",") {
				n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
				if err != nil || n < 0 {
					return nil, usagef("bad partition %q in %q: want a number ≥ 0", p, arg)
				}
				sel.Partitions = append(sel.Partitions, int32(n))
			}
		}
		out = append(out, sel)
	}
	return out, nil
}

// normalizeSelectors merges selectors of the same topic (a whole-topic
// selector wins), dedupes and sorts partitions, and sorts topics byte-wise as
// the server does, so chunked output comes out in one global order.
func normalizeSelectors(sels []TopicSelector) []TopicSelector {
	byName := map[string]*TopicSelector{}
	whole := map[string]bool{}
	var names []string
	for _, s := range sels {
		cur, ok := byName[s.Topic]
		if !ok {
			cur = &TopicSelector{Topic: s.Topic}
			byName[s.Topic] = cur
			names = append(names, s.Topic)
		}
		if len(s.Partitions) == 0 {
			whole[s.Topic] = true
		}
		cur.Partitions = append(cur.Partitions, s.Partitions...)
	}
	slices.Sort(names)
	out := make([]TopicSelector, 0, len(names))
	for _, n := range names {
		s := byName[n]
		if whole[n] {
			s.Partitions = nil
		} else {
			slices.Sort(s.Partitions)
			s.Partitions = slices.Compact(s.Partitions)
		}
		out = append(out, *s)
	}
	return out
}

// Pager runs DescribeTopicPartitions to completion.
type Pager struct {
	Client twinlogv1.AdminServiceClient
	// Call wraps each RPC with its deadline; nil calls directly.
	Call func(ctx context.Context, f func(ctx context.Context) error) error
	// Limit is response_partition_limit. ≤ 0 sends math.MaxInt32, which the
	// server caps at max.request.partition.size.limit; sending 0 would give
	// pages of one partition (SPEC §5: limit = max(min(server, requested), 1)).
	Limit int32
	// Chunk is the number of topics per request (≤ 0: DefaultTopicChunk).
	Chunk int
	// OnPage is told about every page after the first request that needs
	// another one (for a progress bar): partitions so far, requests so far.
	OnPage func(partitions, requests int)
}

// Describe returns the merged topics, in byte-wise name order, for sels
// (empty = all topics). It follows nextCursor while the page error is
// REQUEST_LIMIT_REACHED, and fails on any other page error or on a cursor
// that does not advance (SPEC §5, §8 invariant 14).
func (p *Pager) Describe(ctx context.Context, sels []TopicSelector) ([]*twinlogv1.DescribeTopicPartitionsTopicResult, error) {
	chunk := p.Chunk
	if chunk <= 0 {
		chunk = DefaultTopicChunk
	}
	var chunks [][]*twinlogv1.DescribeTopicPartitionsTopic
	if len(sels) == 0 {
		chunks = append(chunks, nil) // one request for all topics
	} else {
		norm := normalizeSelectors(sels)
		for c := range slices.Chunk(norm, chunk) {
			req := make([]*twinlogv1.DescribeTopicPartitionsTopic, len(c))
			for i, s := range c {
				req[i] = &twinlogv1.DescribeTopicPartitionsTopic{Name: s.Topic, Partitions: s.Partitions}
			}
			chunks = append(chunks, req)
		}
	}

	limit := p.Limit
	if limit <= 0 {
		limit = math.MaxInt32
	}
	m := &merger{index: map[string]int{}}
	requests, partitions := 0, 0
	for _, topics := range chunks {
		var cursor *twinlogv1.Cursor
		for {
			req := &twinlogv1.DescribeTopicPartitionsRequest{Topics: topics, ResponsePartitionLimit: limit, Cursor: cursor}
			var resp *twinlogv1.DescribeTopicPartitionsResponse
			err := p.call(ctx, func(ctx context.Context) error {
				var err error
				resp, err = p.Client.DescribeTopicPartitions(ctx, req)
				return err
			})
			if err != nil {
				return nil, err
			}
			requests++
			for _, t := range resp.GetTopics() {
				partitions += len(t.GetPartitions())
				m.add(t)
			}
			next := resp.GetNextCursor()
			switch resp.GetError() {
			case twinlogv1.ErrorCode_ERROR_CODE_NONE:
				if next != nil {
					return nil, fmt.Errorf("describe partitions: server sent nextCursor %s with error NONE (SPEC §5: a page is cut iff REQUEST_LIMIT_REACHED); report this server bug", cursorString(next))
				}
			case twinlogv1.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED:
				if next == nil {
					return nil, fmt.Errorf("describe partitions: server sent REQUEST_LIMIT_REACHED without nextCursor; report this server bug")
				}
				if cursor != nil && !cursorLess(cursor, next) {
					return nil, fmt.Errorf("describe partitions: cursor did not advance (%s → %s); report this server bug", cursorString(cursor), cursorString(next))
				}
				if requests >= maxPages {
					return nil, fmt.Errorf("describe partitions: gave up after %d pages", requests)
				}
			default:
				return nil, &ProtocolError{Code: resp.GetError(), Subject: "describe partitions", Message: resp.GetErrorMessage(), Hint: "check the topic selectors; run `twinctl topics list`"}
			}
			if p.OnPage != nil && (requests > 1 || next != nil || len(chunks) > 1) {
				p.OnPage(partitions, requests)
			}
			if next == nil {
				break
			}
			cursor = next
		}
	}
	return m.topics, nil
}

func (p *Pager) call(ctx context.Context, f func(ctx context.Context) error) error {
	if p.Call == nil {
		return f(ctx)
	}
	return p.Call(ctx, f)
}

// merger concatenates the per-topic pieces of consecutive pages. Pages are
// not mutually consistent (SPEC §5): a partition seen twice keeps the later
// answer.
type merger struct {
	topics []*twinlogv1.DescribeTopicPartitionsTopicResult
	index  map[string]int
}

func (m *merger) add(t *twinlogv1.DescribeTopicPartitionsTopicResult) {
	i, ok := m.index[t.GetName()]
	if !ok {
		m.index[t.GetName()] = len(m.topics)
		cp := &twinlogv1.DescribeTopicPartitionsTopicResult{
			Error: t.GetError(), Name: t.GetName(), TopicId: t.GetTopicId(), IsInternal: t.GetIsInternal(), MirrorName: t.GetMirrorName(),
			Partitions: slices.Clone(t.GetPartitions()),
		}
		m.topics = append(m.topics, cp)
		return
	}
	cur := m.topics[i]
	if t.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
		cur.Error = t.GetError()
	}
	if t.GetTopicId() != "" {
		cur.TopicId = t.GetTopicId()
	}
	for _, np := range t.GetPartitions() {
		j := slices.IndexFunc(cur.Partitions, func(x *twinlogv1.DescribeTopicPartitionsPartition) bool {
			return x.GetPartitionIndex() == np.GetPartitionIndex()
		})
		if j >= 0 {
			cur.Partitions[j] = np
		} else {
			cur.Partitions = append(cur.Partitions, np)
		}
	}
	slices.SortStableFunc(cur.Partitions, func(x, y *twinlogv1.DescribeTopicPartitionsPartition) int {
		return cmp.Compare(x.GetPartitionIndex(), y.GetPartitionIndex())
	})
}

// cursorLess orders cursors as the server walks them: topic byte-wise, then partition.
func cursorLess(a, b *twinlogv1.Cursor) bool {
	if c := strings.Compare(a.GetTopicName(), b.GetTopicName()); c != 0 {
		return c < 0
	}
	return a.GetPartitionIndex() < b.GetPartitionIndex()
}

func cursorString(c *twinlogv1.Cursor) string {
	return fmt.Sprintf("(%s,%d)", c.GetTopicName(), c.GetPartitionIndex())
}
