package cli

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

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
	offline   []*twinlogv1.BrokerOfflinePartitions // ListBrokers' offline partitions
	configs   []*twinlogv1.ConfigEntry
	mirrors   []*twinlogv1.MirrorDescription

	// StopMirrorTopics puts the named partitions in STOPPING (desired
	// STOPPED), as a controller does before the leaders bump (SPEC §6.7).
	// stoppingPolls is how many DescribeMirrors answers still show them
	// STOPPING before they turn STOPPED; -1 keeps them STOPPING forever.
	stoppingPolls int
	topicErrs     map[string]twinlogv1.ErrorCode // topic → per-topic error of every mirror op
	stopReqs      []*twinlogv1.StopMirrorTopicsRequest
	// mirrorOps records Create/Start/Pause/Resume requests as
	// "op mirror topic,topic".
	mirrorOps []string
	// dropResults makes every mirror op answer no per-topic results (a
	// server that did nothing).
	dropResults   bool
	describeCalls int
	// onDescribeMirrors, if set, runs at the start of each DescribeMirrors.
	onDescribeMirrors func()

	reassignReqs []*twinlogv1.AlterPartitionReassignmentsRequest
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
	return &twinlogv1.ListBrokersResponse{ClusterId: "cluster-a", Brokers: f.brokers, OfflinePartitions: f.offline}, nil
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

func (f *fakeAdmin) DescribeMirrors(_ context.Context, req *twinlogv1.DescribeMirrorsRequest) (*twinlogv1.DescribeMirrorsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.onDescribeMirrors != nil {
		f.onDescribeMirrors()
	}
	f.describeCalls++
	var stopping []*twinlogv1.MirrorPartitionStatus
	for _, m := range f.mirrors {
		for _, p := range m.GetPartitions() {
			if p.GetState() == twinlogv1.MirrorState_MIRROR_STATE_STOPPING {
				stopping = append(stopping, p)
			}
		}
	}
	// Only answers that show a STOPPING partition count against
	// stoppingPolls (a describe before the stop, to list the mirror's
	// topics, does not).
	switch {
	case len(stopping) == 0:
	case f.stoppingPolls == 0:
		for _, p := range stopping {
			p.State = twinlogv1.MirrorState_MIRROR_STATE_STOPPED
		}
	case f.stoppingPolls > 0:
		f.stoppingPolls--
	}
	// As the controller: an unknown name fails the whole call with
	// NotFound.
	for _, n := range req.GetNames() {
		if f.mirror(n) == nil {
			return nil, status.Errorf(codes.NotFound, "unknown mirror %q", n)
		}
	}
	resp := &twinlogv1.DescribeMirrorsResponse{}
	for _, m := range f.mirrors {
		if len(req.GetNames()) == 0 || slices.Contains(req.GetNames(), m.GetName()) {
			// A copy: the next call mutates f.mirrors while this answer may
			// still be marshalled.
			resp.Mirrors = append(resp.Mirrors, proto.CloneOf(m))
		}
	}
	return resp, nil
}

func (f *fakeAdmin) mirror(name string) *twinlogv1.MirrorDescription {
	for _, m := range f.mirrors {
		if m.GetName() == name {
			return m
		}
	}
	return nil
}

// mirrorOp answers a Start/Stop/Pause/Resume as the controller does
// (metastate.mirrorTopicsOp): one result per named topic and none for an
// empty list; an unknown mirror gets UNKNOWN_MIRROR per named topic; a topic
// the mirror does not have gets UNKNOWN_TOPIC_OR_PARTITION; topicErrs
// injects per-topic failures. apply changes the state of a topic's
// partitions that succeeded. Callers hold f.mu.
func (f *fakeAdmin) mirrorOp(mirror string, topics []string, apply func(*twinlogv1.MirrorPartitionStatus)) []*twinlogv1.MirrorTopicResult {
	m := f.mirror(mirror)
	var out []*twinlogv1.MirrorTopicResult
	for _, t := range topics {
		r := &twinlogv1.MirrorTopicResult{Topic: t, Error: f.topicErrs[t]}
		switch {
		case m == nil:
			r.Error = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MIRROR
		case r.Error == twinlogv1.ErrorCode_ERROR_CODE_NONE:
			r.Error = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
			for _, p := range m.GetPartitions() {
				if p.GetTopic() == t {
					apply(p)
					r.Error = twinlogv1.ErrorCode_ERROR_CODE_NONE
				}
			}
		}
		if r.Error != twinlogv1.ErrorCode_ERROR_CODE_NONE {
			r.ErrorMessage = "fake says no to " + t
		}
		out = append(out, r)
	}
	if f.dropResults {
		return nil
	}
	return out
}

func setMirrorState(s twinlogv1.MirrorState) func(*twinlogv1.MirrorPartitionStatus) {
	return func(p *twinlogv1.MirrorPartitionStatus) { p.State, p.DesiredState = s, s }
}

func (f *fakeAdmin) PauseMirrorTopics(_ context.Context, req *twinlogv1.PauseMirrorTopicsRequest) (*twinlogv1.PauseMirrorTopicsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mirrorOps = append(f.mirrorOps, "pause "+req.GetMirror()+" "+strings.Join(req.GetTopics(), ","))
	return &twinlogv1.PauseMirrorTopicsResponse{Topics: f.mirrorOp(req.GetMirror(), req.GetTopics(), setMirrorState(twinlogv1.MirrorState_MIRROR_STATE_PAUSED))}, nil
}

func (f *fakeAdmin) ResumeMirrorTopics(_ context.Context, req *twinlogv1.ResumeMirrorTopicsRequest) (*twinlogv1.ResumeMirrorTopicsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mirrorOps = append(f.mirrorOps, "resume "+req.GetMirror()+" "+strings.Join(req.GetTopics(), ","))
	return &twinlogv1.ResumeMirrorTopicsResponse{Topics: f.mirrorOp(req.GetMirror(), req.GetTopics(), setMirrorState(twinlogv1.MirrorState_MIRROR_STATE_MIRRORING))}, nil
}

func (f *fakeAdmin) StartMirrorTopics(_ context.Context, req *twinlogv1.StartMirrorTopicsRequest) (*twinlogv1.StartMirrorTopicsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mirrorOps = append(f.mirrorOps, "start "+req.GetMirror()+" "+strings.Join(req.GetTopics(), ","))
	return &twinlogv1.StartMirrorTopicsResponse{Topics: f.mirrorOp(req.GetMirror(), req.GetTopics(), setMirrorState(twinlogv1.MirrorState_MIRROR_STATE_MIRRORING))}, nil
}

// CreateMirror defines the mirror with one MIRRORING partition per topic
// that did not fail (as the controller did when this fake was written: the
// mirror exists even if some topics failed).
func (f *fakeAdmin) CreateMirror(_ context.Context, req *twinlogv1.CreateMirrorRequest) (*twinlogv1.CreateMirrorResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mirrorOps = append(f.mirrorOps, "create "+req.GetName()+" "+strings.Join(req.GetTopics(), ","))
	if f.mirror(req.GetName()) != nil {
		return &twinlogv1.CreateMirrorResponse{Error: twinlogv1.ErrorCode_ERROR_CODE_MIRROR_ALREADY_EXISTS, ErrorMessage: "mirror exists"}, nil
	}
	m := &twinlogv1.MirrorDescription{Name: req.GetName(), SourceBootstrap: req.GetSourceBootstrap(), SourceClusterId: "cluster-a"}
	for _, t := range req.GetTopics() {
		if f.topicErrs[t] == twinlogv1.ErrorCode_ERROR_CODE_NONE {
			m.Partitions = append(m.Partitions, &twinlogv1.MirrorPartitionStatus{Mirror: req.GetName(), Topic: t})
		}
	}
	f.mirrors = append(f.mirrors, m)
	return &twinlogv1.CreateMirrorResponse{Topics: f.mirrorOp(req.GetName(), req.GetTopics(), setMirrorState(twinlogv1.MirrorState_MIRROR_STATE_MIRRORING))}, nil
}

// StopMirrorTopics records the request and moves the topics' partitions to
// STOPPING; DescribeMirrors later reports them STOPPED (see stoppingPolls).
// Like the controller it acts only on the topics it is given.
func (f *fakeAdmin) StopMirrorTopics(_ context.Context, req *twinlogv1.StopMirrorTopicsRequest) (*twinlogv1.StopMirrorTopicsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopReqs = append(f.stopReqs, req)
	return &twinlogv1.StopMirrorTopicsResponse{Topics: f.mirrorOp(req.GetMirror(), req.GetTopics(), func(p *twinlogv1.MirrorPartitionStatus) {
		p.DesiredState, p.State = twinlogv1.MirrorState_MIRROR_STATE_STOPPED, twinlogv1.MirrorState_MIRROR_STATE_STOPPING
	})}, nil
}

// AlterPartitionReassignments records the request and accepts every
// partition of a known topic.
func (f *fakeAdmin) AlterPartitionReassignments(_ context.Context, req *twinlogv1.AlterPartitionReassignmentsRequest) (*twinlogv1.AlterPartitionReassignmentsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reassignReqs = append(f.reassignReqs, req)
	resp := &twinlogv1.AlterPartitionReassignmentsResponse{}
	for _, p := range req.GetPartitions() {
		r := &twinlogv1.PartitionResult{Topic: p.GetTopic(), Partition: p.GetPartition()}
		if count, ok := f.topics[p.GetTopic()]; !ok || p.GetPartition() >= count {
			r.Error = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
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

// fakeReportedAtMs is when the fake's mirror statuses were reported; the
// harness's clock reads 1.5 s later.
const fakeReportedAtMs = 1_800_000_000_000

func (h *harness) options() Options {
	return Options{
		Now: func() time.Time { return time.UnixMilli(fakeReportedAtMs + 1500) },
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
