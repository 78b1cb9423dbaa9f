package cli

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// fakeAdmin is an in-process AdminService + MirrorService with a static
// topic set. DescribeTopicPartitions pages exactly as SPEC §5 says, so the
// pager is tested against the rule rather than canned pages.
type fakeAdmin struct {
	twinlogv1.UnimplementedAdminServiceServer
	twinlogv1.UnimplementedMirrorServiceServer

	serverLimit int32            // max.request.partition.size.limit
	topics      map[string]int32 // name → partition count

	mu       sync.Mutex
	requests []*twinlogv1.DescribeTopicPartitionsRequest
	// pageHook, if set, rewrites each DescribeTopicPartitions answer (to
	// inject protocol violations).
	pageHook func(*twinlogv1.DescribeTopicPartitionsResponse)

	createErr twinlogv1.ErrorCode
	brokers   []*twinlogv1.BrokerRecord
	configs   []*twinlogv1.ConfigEntry
	mirrors   []*twinlogv1.MirrorDescription
}

func newFakeAdmin(topics map[string]int32) *fakeAdmin {
	return &fakeAdmin{serverLimit: 1000, topics: topics}
}

func (f *fakeAdmin) partition(topic string, i int32) *twinlogv1.DescribeTopicPartitionsPartition {
	leader := i%3 + 1
	return &twinlogv1.DescribeTopicPartitionsPartition{
		PartitionIndex: i, LeaderId: leader, LeaderEpoch: 2,
		Replicas: []int32{leader, leader%3 + 1, (leader+1)%3 + 1}, Isr: []int32{leader, leader%3 + 1},
		EligibleLeaderReplicas: []int32{(leader+1)%3 + 1},
	}
}

func (f *fakeAdmin) DescribeTopicPartitions(_ context.Context, req *twinlogv1.DescribeTopicPartitionsRequest) (*twinlogv1.DescribeTopicPartitionsResponse, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	hook := f.pageHook
	f.mu.Unlock()

	limit := max(min(f.serverLimit, req.GetResponsePartitionLimit()), 1)
	type sel struct {
		name  string
		parts []int32 // nil = all
	}
	var sels []sel
	if len(req.GetTopics()) == 0 {
		for n := range f.topics {
			sels = append(sels, sel{name: n})
		}
	} else {
		for _, t := range req.GetTopics() {
			ps := slices.Clone(t.GetPartitions())
			slices.Sort(ps)
			sels = append(sels, sel{t.GetName(), slices.Compact(ps)})
		}
	}
	slices.SortFunc(sels, func(a, b sel) int { return strings.Compare(a.name, b.name) })
	cur := req.GetCursor()
	if cur != nil {
		if cur.GetPartitionIndex() < 0 {
			return &twinlogv1.DescribeTopicPartitionsResponse{Error: twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST}, nil
		}
		if len(req.GetTopics()) > 0 && !slices.ContainsFunc(sels, func(s sel) bool { return s.name == cur.GetTopicName() }) {
			return &twinlogv1.DescribeTopicPartitionsResponse{Error: twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST}, nil
		}
	}
	resp := &twinlogv1.DescribeTopicPartitionsResponse{}
	n := int32(0)
	for i, s := range sels {
		if cur != nil && s.name < cur.GetTopicName() {
			continue
		}
		count, ok := f.topics[s.name]
		tr := &twinlogv1.DescribeTopicPartitionsTopicResult{Name: s.name, TopicId: "id-" + s.name, IsInternal: strings.HasPrefix(s.name, "__")}
		if !ok {
			tr.Error = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
			resp.Topics = append(resp.Topics, tr)
			continue
		}
		idx := s.parts
		if idx == nil {
			for p := range count {
				idx = append(idx, p)
			}
		}
		if cur != nil && s.name == cur.GetTopicName() {
			idx = slices.DeleteFunc(slices.Clone(idx), func(p int32) bool { return p < cur.GetPartitionIndex() })
		}
		for j, p := range idx {
			if n == limit {
				resp.NextCursor = &twinlogv1.Cursor{TopicName: s.name, PartitionIndex: p}
				resp.Error = twinlogv1.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED
				_ = j
				break
			}
			if p >= count {
				tr.Partitions = append(tr.Partitions, &twinlogv1.DescribeTopicPartitionsPartition{PartitionIndex: p, LeaderId: -1, Error: twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION})
			} else {
				tr.Partitions = append(tr.Partitions, f.partition(s.name, p))
			}
			n++
		}
		if len(tr.Partitions) > 0 {
			resp.Topics = append(resp.Topics, tr)
		}
		if resp.NextCursor != nil {
			break
		}
		if n == limit && i+1 < len(sels) {
			resp.NextCursor = &twinlogv1.Cursor{TopicName: sels[i+1].name, PartitionIndex: 0}
			resp.Error = twinlogv1.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED
			break
		}
	}
	if hook != nil {
		hook(resp)
	}
	return resp, nil
}

func (f *fakeAdmin) CreateTopics(_ context.Context, req *twinlogv1.CreateTopicsRequest) (*twinlogv1.CreateTopicsResponse, error) {
	resp := &twinlogv1.CreateTopicsResponse{}
	for _, t := range req.GetTopics() {
		r := &twinlogv1.TopicResult{Name: t.GetName(), TopicId: "id-" + t.GetName(), Error: f.createErr}
		if _, ok := f.topics[t.GetName()]; ok {
			r.Error = twinlogv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS
		}
		resp.Topics = append(resp.Topics, r)
	}
	return resp, nil
}

func (f *fakeAdmin) ListBrokers(context.Context, *twinlogv1.ListBrokersRequest) (*twinlogv1.ListBrokersResponse, error) {
	return &twinlogv1.ListBrokersResponse{ClusterId: "cluster-a", Brokers: f.brokers}, nil
}

func (f *fakeAdmin) DescribeConfigs(_ context.Context, req *twinlogv1.DescribeConfigsRequest) (*twinlogv1.DescribeConfigsResponse, error) {
	resp := &twinlogv1.DescribeConfigsResponse{}
	for _, r := range req.GetResources() {
		res := &twinlogv1.DescribeConfigsResult{Resource: r, Entries: f.configs}
		if r.GetType() == twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC {
			if _, ok := f.topics[r.GetName()]; !ok {
				res = &twinlogv1.DescribeConfigsResult{Resource: r, Error: twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func (f *fakeAdmin) DescribeMirrors(context.Context, *twinlogv1.DescribeMirrorsRequest) (*twinlogv1.DescribeMirrorsResponse, error) {
	return &twinlogv1.DescribeMirrorsResponse{Mirrors: f.mirrors}, nil
}

// harness runs a fakeAdmin on bufconn and records every address dialed.
type harness struct {
	fake   *fakeAdmin
	lis    *bufconn.Listener
	srv    *grpc.Server
	mu     sync.Mutex
	dialed []string
}

func startFake(t *testing.T, fake *fakeAdmin) *harness {
	t.Helper()
	h := &harness{fake: fake, lis: bufconn.Listen(1 << 20), srv: grpc.NewServer()}
	twinlogv1.RegisterAdminServiceServer(h.srv, fake)
	twinlogv1.RegisterMirrorServiceServer(h.srv, fake)
	go func() { _ = h.srv.Serve(h.lis) }()
	t.Cleanup(h.srv.Stop)
	return h
}

func (h *harness) options() Options {
	return Options{
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			h.mu.Lock()
			h.dialed = append(h.dialed, addr)
			h.mu.Unlock()
			return h.lis.DialContext(ctx)
		})},
		StderrIsTerminal: func() bool { return false },
	}
}

// run executes twinctl in-process; HOME points at an empty dir so a real
// ~/.twinctl.yaml cannot leak in.
func (h *harness) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	opts := h.options()
	opts.Stdout, opts.Stderr, opts.Stdin = &out, &errb, strings.NewReader("")
	if opts.HomeDir == "" {
		opts.HomeDir = t.TempDir()
	}
	code = Execute(t.Context(), append([]string{"--bootstrap", "fake:1"}, args...), opts)
	return out.String(), errb.String(), code
}
