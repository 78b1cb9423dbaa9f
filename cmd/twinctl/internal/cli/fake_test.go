package cli

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
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
	// mirrorOf names the mirror a topic belongs to (DescribeTopicPartitions'
	// mirror_name).
	mirrorOf map[string]string
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
		tr := &twinlogv1.DescribeTopicPartitionsTopicResult{Name: s.name, TopicId: "id-" + s.name, IsInternal: strings.HasPrefix(s.name, "__"), MirrorName: f.mirrorOf[s.name]}
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
// Addresses in routes (fake brokers, startGroups) reach their own server;
// "src:*" addresses reach a source cluster's broker (FetchService, for
// mirrors create --source); every other address reaches the fakeAdmin.
type harness struct {
	fake   *fakeAdmin
	lis    *bufconn.Listener
	srv    *grpc.Server
	srcLis *bufconn.Listener
	mu     sync.Mutex
	dialed []string
	routes map[string]*bufconn.Listener
}

func startFake(t *testing.T, fake *fakeAdmin) *harness {
	t.Helper()
	h := &harness{fake: fake, lis: bufconn.Listen(1 << 20), srv: grpc.NewServer(), srcLis: bufconn.Listen(1 << 20)}
	twinlogv1.RegisterAdminServiceServer(h.srv, fake)
	twinlogv1.RegisterMirrorServiceServer(h.srv, fake)
	go func() { _ = h.srv.Serve(h.lis) }()
	t.Cleanup(h.srv.Stop)
	src := grpc.NewServer()
	twinlogv1.RegisterFetchServiceServer(src, &fakeGroupBroker{f: &fakeGroups{}, id: 1})
	go func() { _ = src.Serve(h.srcLis) }()
	t.Cleanup(src.Stop)
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
			lis := h.routes[addr]
			h.mu.Unlock()
			if lis == nil && strings.HasPrefix(addr, "src:") {
				lis = h.srcLis
			}
			if lis == nil {
				lis = h.lis
			}
			return lis.DialContext(ctx)
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

// fakeGroups is a cluster's consumer groups and the data plane around
// them, as the brokers' GroupService and FetchService answer: every broker
// serves both (fakeGroupBroker); a group's requests are answered by its
// coordinator and NOT_COORDINATOR elsewhere, and ListOffsets by a
// partition's leader and NOT_LEADER_OR_FOLLOWER elsewhere, as
// broker/groups_grpc.go and broker/fetch.go do.
type fakeGroups struct {
	mu      sync.Mutex
	brokers map[int32]string // id → gRPC address
	groups  map[string]*fakeGroup
	logs    map[topicPart]*fakeLog
	// calls records every RPC as "b<id> <RPC> <group or partitions>".
	calls []string
}

type fakeGroup struct {
	coordinator  int32
	state        string
	protocolType string
	protocol     string
	members      []*twinlogv1.GroupMemberDescription
	offsets      map[topicPart]int64
	// staleFinds FindCoordinator answers still name movedFrom (the
	// coordinator moved; movedFrom answers NOT_COORDINATOR).
	staleFinds int
	movedFrom  int32
	// loading requests at the coordinator answer
	// COORDINATOR_LOAD_IN_PROGRESS first.
	loading int
}

// fakeLog is a partition: its leader, log start and high watermark. The
// record at offset o has timestamp fakeTimeBase + o seconds.
type fakeLog struct {
	leader    int32
	start, hw int64
	// end is the log end offset (LATEST); below hw means hw.
	end int64
	// staleMeta Metadata answers still name the previous leader
	// (leader%3+1), which answers NOT_LEADER_OR_FOLLOWER.
	staleMeta int
}

const fakeTimeBase = 1_750_000_000_000 // ms

func (f *fakeGroups) record(id int32, rpc, what string) {
	f.calls = append(f.calls, fmt.Sprintf("b%d %s %s", id, rpc, what))
}

func (f *fakeGroups) callsOf() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// goldenGroups: three brokers (b1..b3:9092), orders (3 partitions) and
// payments (1), and four groups: orders-app (Stable, two members,
// coordinator 2), audit (Empty consumer group, coordinator 1), batch (only
// commits offsets, coordinator 3) and idle (Empty, no offsets,
// coordinator 3).
func goldenGroups() *fakeGroups {
	tp := func(t string, p int32) topicPart { return topicPart{t, p} }
	return &fakeGroups{
		brokers: map[int32]string{1: "b1:9092", 2: "b2:9092", 3: "b3:9092"},
		logs: map[topicPart]*fakeLog{
			tp("orders", 0):   {leader: 1, start: 0, hw: 120},
			tp("orders", 1):   {leader: 2, start: 10, hw: 80},
			tp("orders", 2):   {leader: 3, start: 0, hw: 0},
			tp("payments", 0): {leader: 2, start: 5, hw: 42},
		},
		groups: map[string]*fakeGroup{
			"orders-app": {coordinator: 2, state: "Stable", protocolType: "consumer", protocol: "range",
				members: []*twinlogv1.GroupMemberDescription{
					{MemberId: "c1-7f3a", ClientId: "c1", ClientHost: "/10.0.0.7", Assignment: []*twinlogv1.TopicPartitions{{Topic: "orders", Partitions: []int32{0, 1}}}},
					{MemberId: "c2-9b1e", ClientId: "c2", ClientHost: "/10.0.0.8", Assignment: []*twinlogv1.TopicPartitions{
						{Topic: "orders", Partitions: []int32{2}}, {Topic: "payments", Partitions: []int32{0}}}},
				},
				offsets: map[topicPart]int64{tp("orders", 0): 100, tp("orders", 1): 80, tp("payments", 0): 40}},
			"audit": {coordinator: 1, state: "Empty", protocolType: "consumer",
				offsets: map[topicPart]int64{tp("orders", 0): 5, tp("orders", 1): 12}},
			"batch": {coordinator: 3, state: "Empty", offsets: map[topicPart]int64{tp("payments", 0): 7}},
			"idle":  {coordinator: 3, state: "Empty", protocolType: "consumer", offsets: map[topicPart]int64{}},
		},
	}
}

// startGroups runs f's brokers, each on its own listener, behind a
// fakeAdmin (the --bootstrap controller) whose ListBrokers names them and
// a fenced broker 4 that nothing serves.
func startGroups(t *testing.T, f *fakeGroups) *harness {
	t.Helper()
	admin := newFakeAdmin(nil)
	admin.brokers = []*twinlogv1.BrokerRecord{{BrokerId: 4, Host: "b4", Port: 9092, Fenced: true}}
	h := startFake(t, admin)
	for _, id := range slices.Sorted(maps.Keys(f.brokers)) {
		host, port, _ := net.SplitHostPort(f.brokers[id])
		p, _ := strconv.Atoi(port)
		admin.brokers = append(admin.brokers, &twinlogv1.BrokerRecord{BrokerId: id, Host: host, Port: int32(p)})
	}
	h.serveBrokers(t, f)
	return h
}

// serveBrokers runs f's brokers, each on its own listener routed at its
// address.
func (h *harness) serveBrokers(t *testing.T, f *fakeGroups) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.routes == nil {
		h.routes = map[string]*bufconn.Listener{}
	}
	for _, id := range slices.Sorted(maps.Keys(f.brokers)) {
		srv := grpc.NewServer()
		b := &fakeGroupBroker{f: f, id: id}
		twinlogv1.RegisterGroupServiceServer(srv, b)
		twinlogv1.RegisterFetchServiceServer(srv, b)
		lis := bufconn.Listen(1 << 20)
		h.routes[f.brokers[id]] = lis
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
	}
}

// fakeGroupBroker is broker id of a fakeGroups.
type fakeGroupBroker struct {
	twinlogv1.UnimplementedGroupServiceServer
	twinlogv1.UnimplementedFetchServiceServer
	f  *fakeGroups
	id int32
}

// at answers whether this broker coordinates g now (NONE), or the code it
// answers instead. f.mu is held.
func (b *fakeGroupBroker) at(g *fakeGroup) twinlogv1.ErrorCode {
	switch {
	case g.coordinator != b.id:
		return twinlogv1.ErrorCode_ERROR_CODE_NOT_COORDINATOR
	case g.loading > 0:
		g.loading--
		return twinlogv1.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS
	}
	return twinlogv1.ErrorCode_ERROR_CODE_NONE
}

// lookup is the group named id; one that does not exist is coordinated by
// broker 1 (a new group's coordinator).
func (f *fakeGroups) lookup(id string) (*fakeGroup, bool) {
	if g, ok := f.groups[id]; ok {
		return g, true
	}
	return &fakeGroup{coordinator: 1, state: "Dead"}, false
}

func (b *fakeGroupBroker) FindCoordinator(_ context.Context, req *twinlogv1.FindCoordinatorRequest) (*twinlogv1.FindCoordinatorResponse, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(b.id, "FindCoordinator", req.GetGroupId())
	g, _ := f.lookup(req.GetGroupId())
	id := g.coordinator
	if g.staleFinds > 0 {
		g.staleFinds--
		id = g.movedFrom
	}
	host, port, _ := net.SplitHostPort(f.brokers[id])
	p, _ := strconv.Atoi(port)
	return &twinlogv1.FindCoordinatorResponse{NodeId: id, Host: host, Port: int32(p)}, nil
}

func (b *fakeGroupBroker) ListGroups(context.Context, *twinlogv1.ListGroupsRequest) (*twinlogv1.ListGroupsResponse, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(b.id, "ListGroups", "")
	resp := &twinlogv1.ListGroupsResponse{}
	for _, id := range slices.Sorted(maps.Keys(f.groups)) {
		g := f.groups[id]
		if g.coordinator != b.id {
			continue
		}
		if g.loading > 0 {
			g.loading--
			return &twinlogv1.ListGroupsResponse{Error: twinlogv1.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS}, nil
		}
		resp.Groups = append(resp.Groups, &twinlogv1.ListedGroup{GroupId: id, ProtocolType: g.protocolType, State: g.state})
	}
	return resp, nil
}

func (b *fakeGroupBroker) DescribeGroups(_ context.Context, req *twinlogv1.DescribeGroupsRequest) (*twinlogv1.DescribeGroupsResponse, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &twinlogv1.DescribeGroupsResponse{}
	for _, id := range req.GetGroupIds() {
		f.record(b.id, "DescribeGroups", id)
		g, _ := f.lookup(id)
		d := &twinlogv1.GroupDescription{GroupId: id, Error: b.at(g)}
		if d.Error == twinlogv1.ErrorCode_ERROR_CODE_NONE {
			d.State, d.ProtocolType, d.Protocol = g.state, g.protocolType, g.protocol
			for _, m := range g.members {
				d.Members = append(d.Members, proto.CloneOf(m))
			}
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp, nil
}

func (b *fakeGroupBroker) FetchOffsets(_ context.Context, req *twinlogv1.FetchOffsetsRequest) (*twinlogv1.FetchOffsetsResponse, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(b.id, "FetchOffsets", req.GetGroupId())
	g, _ := f.lookup(req.GetGroupId())
	resp := &twinlogv1.FetchOffsetsResponse{Error: b.at(g)}
	if resp.Error != twinlogv1.ErrorCode_ERROR_CODE_NONE {
		return resp, nil
	}
	for _, tp := range slices.SortedFunc(maps.Keys(g.offsets), compareTopicPart) {
		resp.Offsets = append(resp.Offsets, &twinlogv1.CommittedOffset{Topic: tp.topic, Partition: tp.partition, Offset: g.offsets[tp], LeaderEpoch: -1})
	}
	return resp, nil
}

// CommitOffsets commits while the group has no members (UNKNOWN_MEMBER_ID
// otherwise) and creates a new group, as an administrator's commit does.
func (b *fakeGroupBroker) CommitOffsets(_ context.Context, req *twinlogv1.CommitOffsetsRequest) (*twinlogv1.CommitOffsetsResponse, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	var what []string
	for _, o := range req.GetOffsets() {
		what = append(what, fmt.Sprintf("%s-%d=%d", o.GetTopic(), o.GetPartition(), o.GetOffset()))
	}
	f.record(b.id, "CommitOffsets", req.GetGroupId()+" "+strings.Join(what, ","))
	g, ok := f.lookup(req.GetGroupId())
	code := b.at(g)
	if code == twinlogv1.ErrorCode_ERROR_CODE_NONE && len(g.members) > 0 {
		code = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID
	}
	if code == twinlogv1.ErrorCode_ERROR_CODE_NONE {
		if !ok {
			g = &fakeGroup{coordinator: g.coordinator, state: "Empty", offsets: map[topicPart]int64{}}
			f.groups[req.GetGroupId()] = g
		}
		for _, o := range req.GetOffsets() {
			g.offsets[topicPart{o.GetTopic(), o.GetPartition()}] = o.GetOffset()
		}
	}
	resp := &twinlogv1.CommitOffsetsResponse{}
	for _, o := range req.GetOffsets() {
		resp.Results = append(resp.Results, &twinlogv1.CommittedOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(), Error: code})
	}
	return resp, nil
}

func (b *fakeGroupBroker) DeleteGroups(_ context.Context, req *twinlogv1.DeleteGroupsRequest) (*twinlogv1.DeleteGroupsResponse, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &twinlogv1.DeleteGroupsResponse{}
	for _, id := range req.GetGroupIds() {
		f.record(b.id, "DeleteGroups", id)
		g, ok := f.lookup(id)
		r := &twinlogv1.GroupResult{GroupId: id, Error: b.at(g)}
		switch {
		case r.Error != twinlogv1.ErrorCode_ERROR_CODE_NONE:
		case !ok:
			r.Error = twinlogv1.ErrorCode_ERROR_CODE_GROUP_ID_NOT_FOUND
		case len(g.members) > 0:
			r.Error = twinlogv1.ErrorCode_ERROR_CODE_NON_EMPTY_GROUP
		default:
			delete(f.groups, id)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func (b *fakeGroupBroker) Metadata(_ context.Context, req *twinlogv1.MetadataRequest) (*twinlogv1.MetadataResponse, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(b.id, "Metadata", strings.Join(req.GetTopics(), ","))
	resp := &twinlogv1.MetadataResponse{}
	for _, id := range slices.Sorted(maps.Keys(f.brokers)) {
		host, port, _ := net.SplitHostPort(f.brokers[id])
		p, _ := strconv.Atoi(port)
		resp.Brokers = append(resp.Brokers, &twinlogv1.MetadataBroker{Id: id, Host: host, Port: int32(p)})
	}
	for _, t := range req.GetTopics() {
		mt := &twinlogv1.MetadataTopic{Name: t}
		for _, tp := range slices.SortedFunc(maps.Keys(f.logs), compareTopicPart) {
			if tp.topic != t {
				continue
			}
			l := f.logs[tp]
			leader := l.leader
			if l.staleMeta > 0 {
				l.staleMeta--
				leader = leader%3 + 1
			}
			mt.Partitions = append(mt.Partitions, &twinlogv1.MetadataPartition{Index: tp.partition, LeaderId: leader, LeaderEpoch: 4})
		}
		if len(mt.Partitions) == 0 {
			mt.Error = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp, nil
}

// ListOffsets answers from the partition's leader: EARLIEST the log
// start, HIGH_WATERMARK the high watermark, LATEST the log end, TIMESTAMP the first offset whose
// record is at least that new (-1 if none is below the high watermark).
func (b *fakeGroupBroker) ListOffsets(_ context.Context, req *twinlogv1.ListOffsetsRequest) (*twinlogv1.ListOffsetsResponse, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &twinlogv1.ListOffsetsResponse{}
	var what []string
	for _, t := range req.GetTopics() {
		tr := &twinlogv1.ListOffsetsTopicResponse{Name: t.GetName()}
		for _, p := range t.GetPartitions() {
			tp := topicPart{t.GetName(), p.GetIndex()}
			what = append(what, tp.String()+":"+strings.TrimPrefix(p.GetSpec().String(), "OFFSET_SPEC_"))
			pr := &twinlogv1.ListOffsetsPartitionResponse{Index: p.GetIndex(), Offset: -1}
			l := f.logs[tp]
			switch {
			case l == nil:
				pr.Error = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
			case l.leader != b.id:
				pr.Error = twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
			case p.GetSpec() == twinlogv1.OffsetSpec_OFFSET_SPEC_EARLIEST:
				pr.Offset = l.start
			case p.GetSpec() == twinlogv1.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK:
				pr.Offset = l.hw
			case p.GetSpec() == twinlogv1.OffsetSpec_OFFSET_SPEC_LATEST:
				pr.Offset = max(l.end, l.hw)
			case p.GetSpec() == twinlogv1.OffsetSpec_OFFSET_SPEC_TIMESTAMP:
				o := max(l.start, (p.GetTimestamp()-fakeTimeBase+999)/1000)
				if o >= l.hw {
					o = -1
				}
				pr.Offset = o
			default:
				pr.Error = twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST
			}
			tr.Partitions = append(tr.Partitions, pr)
		}
		resp.Topics = append(resp.Topics, tr)
	}
	f.record(b.id, "ListOffsets", strings.Join(what, ","))
	return resp, nil
}
