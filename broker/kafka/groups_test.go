package kafka

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/group"
)

// findCall is one FindCoordinator key as Groups got it.
type findCall struct {
	keyType int8
	key     string
}

// describeCall and deleteCall are the group ids of a DescribeGroups or
// DeleteGroups call.
type (
	describeCall []string
	deleteCall   []string
)

// fakeGroups records every call (with the time its context had left) and
// answers with the canned answers set through set; err fails every call,
// superseded makes JoinGroup and SyncGroup answer nothing.
type fakeGroups struct {
	mu         sync.Mutex
	calls      []any
	timeLeft   []time.Duration
	err        error
	superseded bool

	coordinator  func(keyType int8, key string) Coordinator
	join         group.JoinGroupResponse
	sync         group.SyncGroupResponse
	heartbeat    group.HeartbeatResponse
	leave        group.LeaveGroupResponse
	commit       group.OffsetCommitResponse
	fetch        map[string]group.OffsetFetchResponse // by group id
	list         group.ListGroupsResponse
	described    []group.DescribedGroup
	deleted      group.DeleteGroupsResponse
	offsetDelete group.OffsetDeleteResponse
}

// set changes the fake's answers (under its lock: the server reads them
// on its connections' goroutines).
func (f *fakeGroups) set(change func(f *fakeGroups)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// take returns the calls recorded since the last take, and the time each
// one's context had left.
func (f *fakeGroups) take() ([]any, []time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	calls, left := f.calls, f.timeLeft
	f.calls, f.timeLeft = nil, nil
	return calls, left
}

// record notes a call; the caller holds f.mu.
func (f *fakeGroups) record(ctx context.Context, call any) {
	f.calls = append(f.calls, call)
	var left time.Duration
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	f.timeLeft = append(f.timeLeft, left)
}

func (f *fakeGroups) FindCoordinator(ctx context.Context, keyType int8, key string) (Coordinator, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, findCall{keyType, key})
	if f.err != nil {
		return Coordinator{}, f.err
	}
	if f.coordinator == nil {
		return Coordinator{ErrorCode: group.CoordinatorNotAvailable, NodeID: -1, Port: -1}, nil
	}
	return f.coordinator(keyType, key), nil
}

func (f *fakeGroups) JoinGroup(ctx context.Context, req group.JoinGroupRequest) (*group.JoinGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, req)
	if f.err != nil || f.superseded {
		return nil, f.err
	}
	resp := f.join
	return &resp, nil
}

func (f *fakeGroups) SyncGroup(ctx context.Context, req group.SyncGroupRequest) (*group.SyncGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, req)
	if f.err != nil || f.superseded {
		return nil, f.err
	}
	resp := f.sync
	return &resp, nil
}

func (f *fakeGroups) Heartbeat(ctx context.Context, req group.HeartbeatRequest) (*group.HeartbeatResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, req)
	if f.err != nil {
		return nil, f.err
	}
	resp := f.heartbeat
	return &resp, nil
}

func (f *fakeGroups) LeaveGroup(ctx context.Context, req group.LeaveGroupRequest) (*group.LeaveGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, req)
	if f.err != nil {
		return nil, f.err
	}
	resp := f.leave
	return &resp, nil
}

func (f *fakeGroups) StartOffsetCommit(req group.OffsetCommitRequest, done func(*group.OffsetCommitResponse, error)) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(context.Background(), req)
	if f.err != nil {
		done(nil, f.err)
	} else {
		resp := f.commit
		done(&resp, nil)
	}
	return func() {}
}

func (f *fakeGroups) OffsetFetch(ctx context.Context, req group.OffsetFetchRequest) (*group.OffsetFetchResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, req)
	if f.err != nil {
		return nil, f.err
	}
	resp := f.fetch[req.GroupID]
	resp.GroupID = req.GroupID
	return &resp, nil
}

func (f *fakeGroups) ListGroups(ctx context.Context, req group.ListGroupsRequest) (*group.ListGroupsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, req)
	if f.err != nil {
		return nil, f.err
	}
	resp := f.list
	return &resp, nil
}

func (f *fakeGroups) DescribeGroups(ctx context.Context, groupIDs []string) ([]group.DescribedGroup, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, describeCall(groupIDs))
	if f.err != nil {
		return nil, f.err
	}
	return f.described, nil
}

func (f *fakeGroups) DeleteGroups(ctx context.Context, groupIDs []string) (*group.DeleteGroupsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, deleteCall(groupIDs))
	if f.err != nil {
		return nil, f.err
	}
	resp := f.deleted
	return &resp, nil
}

func (f *fakeGroups) OffsetDelete(ctx context.Context, req group.OffsetDeleteRequest) (*group.OffsetDeleteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(ctx, req)
	if f.err != nil {
		return nil, f.err
	}
	resp := f.offsetDelete
	return &resp, nil
}

// listenerBackend is a fakeBackend whose Metadata names one broker, id 1,
// at the test listener's address, so that a real client finds it.
type listenerBackend struct {
	fakeBackend
	host string
	port int32
}

func (b *listenerBackend) Metadata(context.Context, *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	return &pb.MetadataResponse{ClusterId: "c", Brokers: []*pb.MetadataBroker{{Id: 1, KafkaHost: b.host, KafkaPort: b.port}}}, nil
}

// startGroupServer serves fg (and a listenerBackend) on a loopback
// listener and returns its address.
func startGroupServer(t *testing.T, fg *fakeGroups) (host string, port int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().(*net.TCPAddr)
	b := &listenerBackend{host: a.IP.String(), port: int32(a.Port)}
	s := NewServer(Config{BrokerID: 1, Logger: slog.New(slog.DiscardHandler), Groups: fg}, b, nil)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return b.host, b.port
}

// dialGroups starts a server on a new fakeGroups and connects to it.
func dialGroups(t *testing.T) (*client, *fakeGroups) {
	t.Helper()
	fg := &fakeGroups{}
	host, port := startGroupServer(t, fg)
	return dial(t, net.JoinHostPort(host, strconv.Itoa(int(port)))), fg
}

// roundTrip sends req and returns its response, at req's version.
func (c *client) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	c.recv(c.send(req), resp, req.IsFlexible())
	return resp
}

// one returns the single call recorded, failing the test otherwise.
func one[T any](t *testing.T, fg *fakeGroups) T {
	t.Helper()
	calls, _ := fg.take()
	if len(calls) != 1 {
		t.Fatalf("Groups got %d calls (%v), want 1", len(calls), calls)
	}
	c, ok := calls[0].(T)
	if !ok {
		t.Fatalf("Groups got %T, want %T", calls[0], c)
	}
	return c
}

// groupAPIs is every group API key with its served versions.
var groupAPIs = map[int16][2]int16{
	10: {0, 5}, 8: {2, 9}, 9: {1, 9}, 11: {0, 9}, 14: {0, 5}, 12: {0, 4},
	13: {0, 5}, 15: {0, 6}, 16: {0, 5}, 42: {0, 2}, 47: {0, 0},
}

// groupRequest is a request of the group API key at version v with every
// field set, in a known shape: wantCodes says how many error codes a
// response that fails it has.
func groupRequest(key, v int16) kmsg.Request {
	var req kmsg.Request
	switch key {
	case 10:
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKey, r.CoordinatorKeys = "g1", []string{"g1", "g2"}
		req = r
	case 8:
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation, r.MemberID, r.InstanceID, r.RetentionTimeMillis = "g", 3, "m1", new("i1"), 5000
		for i, name := range []string{"t1", "t2"} {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic, t.TopicID = name, [16]byte{byte(i + 1)}
			for p := range 2 - i {
				tp := kmsg.NewOffsetCommitRequestTopicPartition()
				tp.Partition, tp.Offset, tp.LeaderEpoch, tp.Metadata = int32(p), int64(10+p), 7, new("md")
				t.Partitions = append(t.Partitions, tp)
			}
			r.Topics = append(r.Topics, t)
		}
		req = r
	case 9:
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Group, r.RequireStable = "g1", true
		for i, name := range []string{"t1", "t2"} {
			t := kmsg.NewOffsetFetchRequestTopic()
			t.Topic, t.Partitions = name, []int32{0, 1}[:2-i]
			r.Topics = append(r.Topics, t)
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.TopicID, gt.Partitions = name, [16]byte{byte(i + 1)}, t.Partitions
			if len(r.Groups) == 0 {
				g := kmsg.NewOffsetFetchRequestGroup()
				g.Group, g.MemberID, g.MemberEpoch = "g1", new("m1"), 3
				r.Groups = append(r.Groups, g)
			}
			r.Groups[0].Topics = append(r.Groups[0].Topics, gt)
		}
		g2 := kmsg.NewOffsetFetchRequestGroup()
		g2.Group = "g2" // null topics: all
		r.Groups = append(r.Groups, g2)
		req = r
	case 11:
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = "g", 10_000, 60_000
		r.MemberID, r.InstanceID, r.ProtocolType, r.Reason = "m1", new("i1"), "consumer", new("why")
		for _, name := range []string{"range", "roundrobin"} {
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name, p.Metadata = name, []byte(name)
			r.Protocols = append(r.Protocols, p)
		}
		req = r
	case 14:
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group, r.Generation, r.MemberID, r.InstanceID = "g", 4, "m1", new("i1")
		r.ProtocolType, r.Protocol = new("consumer"), new("range")
		for _, m := range []string{"m1", "m2"} {
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment = m, []byte(m)
			r.GroupAssignment = append(r.GroupAssignment, a)
		}
		req = r
	case 12:
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.Generation, r.MemberID, r.InstanceID = "g", 4, "m1", new("i1")
		req = r
	case 13:
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Group, r.MemberID = "g", "m1"
		m1, m2 := kmsg.NewLeaveGroupRequestMember(), kmsg.NewLeaveGroupRequestMember()
		m1.MemberID, m1.Reason = "m1", new("bye")
		m2.InstanceID = new("i2")
		r.Members = []kmsg.LeaveGroupRequestMember{m1, m2}
		req = r
	case 15:
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups, r.IncludeAuthorizedOperations = []string{"g1", "g2"}, true
		req = r
	case 16:
		r := kmsg.NewPtrListGroupsRequest()
		r.StatesFilter, r.TypesFilter = []string{"Stable"}, []string{"classic"}
		req = r
	case 42:
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups = []string{"g1", "g2"}
		req = r
	case 47:
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = "g"
		for i, name := range []string{"t1", "t2"} {
			t := kmsg.NewOffsetDeleteRequestTopic()
			t.Topic = name
			for p := range 2 - i {
				t.Partitions = append(t.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: int32(p)})
			}
			r.Topics = append(r.Topics, t)
		}
		req = r
	}
	req.SetVersion(v)
	return req
}

// wantCodes is how many error codes a response failing groupRequest(key,
// v) carries: one per entry (key, member, partition, group) and the
// top-level one where the version has it.
func wantCodes(key, v int16) int {
	switch key {
	case 10:
		if v < 4 {
			return 1
		}
		return 2
	case 8:
		return 3
	case 9:
		switch {
		case v < 2:
			return 3
		case v < 8:
			return 1 + 3
		}
		return 2 + 3 // two groups, the second with null topics
	case 13:
		if v < 3 {
			return 1
		}
		return 1 + 2
	case 15, 42:
		return 2
	case 47:
		return 1 + 3
	}
	return 1 // JoinGroup, SyncGroup, Heartbeat, ListGroups
}

// errorCodes is every error code of a group API response at its version.
func errorCodes(resp kmsg.Response) []int16 {
	v := resp.GetVersion()
	var out []int16
	switch r := resp.(type) {
	case *kmsg.FindCoordinatorResponse:
		if v < 4 {
			return []int16{r.ErrorCode}
		}
		for _, c := range r.Coordinators {
			out = append(out, c.ErrorCode)
		}
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				out = append(out, p.ErrorCode)
			}
		}
	case *kmsg.OffsetFetchResponse:
		if v >= 2 && v < 8 {
			out = append(out, r.ErrorCode)
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				out = append(out, p.ErrorCode)
			}
		}
		for _, g := range r.Groups {
			out = append(out, g.ErrorCode)
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					out = append(out, p.ErrorCode)
				}
			}
		}
	case *kmsg.JoinGroupResponse:
		return []int16{r.ErrorCode}
	case *kmsg.SyncGroupResponse:
		return []int16{r.ErrorCode}
	case *kmsg.HeartbeatResponse:
		return []int16{r.ErrorCode}
	case *kmsg.ListGroupsResponse:
		return []int16{r.ErrorCode}
	case *kmsg.LeaveGroupResponse:
		out = append(out, r.ErrorCode)
		for _, m := range r.Members {
			out = append(out, m.ErrorCode)
		}
	case *kmsg.DescribeGroupsResponse:
		for _, g := range r.Groups {
			out = append(out, g.ErrorCode)
		}
	case *kmsg.DeleteGroupsResponse:
		for _, g := range r.Groups {
			out = append(out, g.ErrorCode)
		}
	case *kmsg.OffsetDeleteResponse:
		out = append(out, r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				out = append(out, p.ErrorCode)
			}
		}
	}
	return out
}

// checkFailed checks that resp fails every entry of groupRequest(key, v)
// with code.
func checkFailed(t *testing.T, key, v int16, resp kmsg.Response, code int16) {
	t.Helper()
	got := errorCodes(resp)
	if len(got) != wantCodes(key, v) {
		t.Errorf("%s v%d: %d codes %v, want %d", kmsg.NameForKey(key), v, len(got), got, wantCodes(key, v))
	}
	for _, c := range got {
		if c != code {
			t.Errorf("%s v%d: codes %v, want all %v", kmsg.NameForKey(key), v, got, kerr.ErrorForCode(code))
			break
		}
	}
}

// TestGroupAPIVersions: ApiVersions lists the group APIs at exactly the
// served versions, and only with Config.Groups; a version next to the
// range (that kmsg can decode) is UNSUPPORTED_VERSION for every entry and
// never reaches Groups.
func TestGroupAPIVersions(t *testing.T) {
	advertised := func(c *client) map[int16][2]int16 {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(3)
		c.recv(c.send(req), resp, false)
		out := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			if _, ok := groupAPIs[k.ApiKey]; ok {
				out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
			}
		}
		return out
	}
	_, _, addr := startServer(t, Config{BrokerID: 1})
	if got := advertised(dial(t, addr)); len(got) != 0 {
		t.Errorf("without Groups, group APIs advertised: %v", got)
	}
	c, fg := dialGroups(t)
	if got := advertised(c); !reflect.DeepEqual(got, groupAPIs) {
		t.Errorf("group APIs advertised %v, want %v", got, groupAPIs)
	}
	for key, r := range groupAPIs {
		for _, v := range []int16{r[0] - 1, r[1] + 1} {
			if v < 0 || v > kmsg.RequestForKey(key).MaxVersion() {
				continue
			}
			resp := c.roundTrip(groupRequest(key, v))
			checkFailed(t, key, v, resp, unsupportedVersion)
			// OffsetCommit v10 names topics by id: the refusal too.
			if r, ok := resp.(*kmsg.OffsetCommitResponse); ok && v == 10 && (len(r.Topics) != 2 || r.Topics[1].TopicID != [16]byte{2}) {
				t.Errorf("OffsetCommit v10 refusal: topics %+v, want the request's ids", r.Topics)
			}
		}
	}
	if calls, _ := fg.take(); len(calls) != 0 {
		t.Errorf("unsupported versions reached Groups: %v", calls)
	}
}

// TestGroupErrorsFailTheRequest: a Groups call that returns an error (its
// time ran out) fails every entry of the request with REQUEST_TIMED_OUT,
// at every served version of every API.
func TestGroupErrorsFailTheRequest(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) { f.err = context.DeadlineExceeded })
	for key, r := range groupAPIs {
		for v := r[0]; v <= r[1]; v++ {
			checkFailed(t, key, v, c.roundTrip(groupRequest(key, v)), requestTimedOut)
		}
	}
}

// TestSupersededGetsNoAnswer: a JoinGroup and a SyncGroup that Groups
// answers with nothing (superseded) get no response; the next request on
// the connection gets its own, under its own correlation id (recv checks
// that the next frame is it).
func TestSupersededGetsNoAnswer(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) {
		f.superseded = true
		f.heartbeat.ErrorCode = group.RebalanceInProgress
	})
	c.send(groupRequest(11, 9))
	c.send(groupRequest(14, 5))
	if resp := c.roundTrip(groupRequest(12, 4)).(*kmsg.HeartbeatResponse); resp.ErrorCode != int16(group.RebalanceInProgress) {
		t.Fatalf("heartbeat after superseded requests: %v, want REBALANCE_IN_PROGRESS", kerr.ErrorForCode(resp.ErrorCode))
	}
	if calls, _ := fg.take(); len(calls) != 3 {
		t.Fatalf("Groups got %d calls, want 3 (join, sync, heartbeat)", len(calls))
	}
}

// TestFindCoordinator: one key before v4 (v0 without a key type, so a
// group), a batch from v4; each key's coordinator or code and message
// come from Groups, a transaction key's refusal included.
func TestFindCoordinator(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) {
		f.coordinator = func(keyType int8, key string) Coordinator {
			if keyType != 0 {
				return Coordinator{NodeID: -1, Port: -1, ErrorCode: group.ErrorCode(invalidRequest), Message: "no transactions"}
			}
			return Coordinator{NodeID: 3, Host: key + ".host", Port: 9000 + int32(len(key))}
		}
	})
	for _, v := range []int16{0, 3} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(v)
		req.CoordinatorKey, req.CoordinatorKeys = "grp", []string{"x"}
		resp := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode != 0 || resp.NodeID != 3 || resp.Host != "grp.host" || resp.Port != 9003 || len(resp.Coordinators) != 0 {
			t.Errorf("v%d: %+v, want node 3 at grp.host:9003, no batch", v, resp)
		}
		if got := one[findCall](t, fg); got != (findCall{0, "grp"}) {
			t.Errorf("v%d: Groups asked %+v, want group key grp", v, got)
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(3)
	req.CoordinatorKey, req.CoordinatorType = "tx", 1
	resp := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if resp.ErrorCode != invalidRequest || resp.ErrorMessage == nil || *resp.ErrorMessage != "no transactions" || resp.NodeID != -1 {
		t.Errorf("v3 transaction key: %+v, want INVALID_REQUEST with Groups' message", resp)
	}
	if got := one[findCall](t, fg); got != (findCall{1, "tx"}) {
		t.Errorf("v3: Groups asked %+v, want transaction key tx", got)
	}

	for _, v := range []int16{4, 5} {
		for _, keyType := range []int8{0, 1} {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.SetVersion(v)
			req.CoordinatorKey, req.CoordinatorKeys, req.CoordinatorType = "ignored", []string{"a", "bb"}, keyType
			resp := c.roundTrip(req).(*kmsg.FindCoordinatorResponse)
			if len(resp.Coordinators) != 2 || resp.NodeID != 0 || resp.Host != "" {
				t.Fatalf("v%d: %+v, want two coordinators and no top-level answer", v, resp)
			}
			for i, key := range []string{"a", "bb"} {
				rc := resp.Coordinators[i]
				want := kmsg.FindCoordinatorResponseCoordinator{Key: key, NodeID: 3, Host: key + ".host", Port: 9000 + int32(len(key))}
				if keyType != 0 {
					want = kmsg.FindCoordinatorResponseCoordinator{Key: key, NodeID: -1, Port: -1, ErrorCode: invalidRequest, ErrorMessage: new("no transactions")}
				}
				if !reflect.DeepEqual(rc, want) {
					t.Errorf("v%d key type %d, key %s: %+v, want %+v", v, keyType, key, rc, want)
				}
			}
			calls, _ := fg.take()
			if want := []any{findCall{keyType, "a"}, findCall{keyType, "bb"}}; !reflect.DeepEqual(calls, want) {
				t.Errorf("v%d: Groups asked %v, want %v", v, calls, want)
			}
		}
	}
}

// TestJoinGroup: the request's fields, with the header's client id and the
// connection's host, reach Groups (v0 without a rebalance timeout, v5+
// with the instance id); the answer goes back at the version's fields
// (protocol type and instance ids from v7 and v5, skip-assignment at v9);
// the handler's time is the rebalance timeout (v0: the session timeout)
// and the request margin.
func TestJoinGroup(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) {
		f.join = group.JoinGroupResponse{GenerationID: 4, ProtocolType: new("consumer"), ProtocolName: new("range"),
			Leader: "m1", SkipAssignment: true, MemberID: "m2",
			Members: []group.JoinGroupMember{{MemberID: "m1", GroupInstanceID: new("i1"), Metadata: []byte{1}}, {MemberID: "m2", Metadata: []byte{2}}}}
	})
	for _, v := range []int16{0, 9} {
		resp := c.roundTrip(groupRequest(11, v)).(*kmsg.JoinGroupResponse)
		calls, left := fg.take()
		if len(calls) != 1 {
			t.Fatalf("v%d: %d calls", v, len(calls))
		}
		want := group.JoinGroupRequest{Version: v, GroupID: "g", SessionTimeoutMs: 10_000, RebalanceTimeoutMs: 60_000,
			MemberID: "m1", GroupInstanceID: new("i1"), ProtocolType: "consumer",
			Protocols:  []group.Protocol{{Name: "range", Metadata: []byte("range")}, {Name: "roundrobin", Metadata: []byte("roundrobin")}},
			ClientID:   "test",
			ClientHost: "/127.0.0.1"}
		wantTime := 90 * time.Second
		wantResp := kmsg.JoinGroupResponse{Version: v, Generation: 4, ProtocolType: new("consumer"), Protocol: new("range"),
			LeaderID: "m1", SkipAssignment: true, MemberID: "m2",
			Members: []kmsg.JoinGroupResponseMember{{MemberID: "m1", InstanceID: new("i1"), ProtocolMetadata: []byte{1}}, {MemberID: "m2", ProtocolMetadata: []byte{2}}}}
		if v == 0 {
			want.RebalanceTimeoutMs, want.GroupInstanceID = 0, nil
			wantTime = 40 * time.Second
			wantResp.ProtocolType, wantResp.SkipAssignment, wantResp.Members[0].InstanceID = nil, false, nil
		}
		if !reflect.DeepEqual(calls[0], want) {
			t.Errorf("v%d: Groups got %+v, want %+v", v, calls[0], want)
		}
		if left[0] > wantTime || left[0] < wantTime-10*time.Second {
			t.Errorf("v%d: handler had %v, want about %v", v, left[0], wantTime)
		}
		if !reflect.DeepEqual(*resp, wantResp) {
			t.Errorf("v%d: response %+v, want %+v", v, *resp, wantResp)
		}
	}
}

// TestSyncGroup: the leader's assignments and the v3 instance id and v5
// protocol reach Groups; the member's assignment and (v5) protocol come
// back; the handler has syncGroupTimeout.
func TestSyncGroup(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) {
		f.sync = group.SyncGroupResponse{ProtocolType: new("consumer"), ProtocolName: new("range"), Assignment: []byte{9, 9}}
	})
	for _, v := range []int16{0, 5} {
		resp := c.roundTrip(groupRequest(14, v)).(*kmsg.SyncGroupResponse)
		calls, left := fg.take()
		want := group.SyncGroupRequest{GroupID: "g", GenerationID: 4, MemberID: "m1", GroupInstanceID: new("i1"),
			ProtocolType: new("consumer"), ProtocolName: new("range"),
			Assignments: []group.SyncAssignment{{MemberID: "m1", Assignment: []byte("m1")}, {MemberID: "m2", Assignment: []byte("m2")}}}
		wantResp := kmsg.SyncGroupResponse{Version: v, ProtocolType: new("consumer"), Protocol: new("range"), MemberAssignment: []byte{9, 9}}
		if v == 0 {
			want.GroupInstanceID, want.ProtocolType, want.ProtocolName = nil, nil, nil
			wantResp.ProtocolType, wantResp.Protocol = nil, nil
		}
		if len(calls) != 1 || !reflect.DeepEqual(calls[0], want) {
			t.Errorf("v%d: Groups got %+v, want %+v", v, calls, want)
		}
		if len(left) == 1 && (left[0] > syncGroupTimeout || left[0] < syncGroupTimeout-10*time.Second) {
			t.Errorf("v%d: handler had %v, want about %v", v, left[0], syncGroupTimeout)
		}
		if !reflect.DeepEqual(*resp, wantResp) {
			t.Errorf("v%d: response %+v, want %+v", v, *resp, wantResp)
		}
	}
}

// TestHeartbeat: the member's fields (v3+ instance id) reach Groups, its
// code comes back; the handler has the fixed request timeout.
func TestHeartbeat(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) { f.heartbeat.ErrorCode = group.RebalanceInProgress })
	for _, v := range []int16{0, 4} {
		resp := c.roundTrip(groupRequest(12, v)).(*kmsg.HeartbeatResponse)
		calls, left := fg.take()
		want := group.HeartbeatRequest{GroupID: "g", GenerationID: 4, MemberID: "m1", GroupInstanceID: new("i1")}
		if v == 0 {
			want.GroupInstanceID = nil
		}
		if len(calls) != 1 || !reflect.DeepEqual(calls[0], want) {
			t.Errorf("v%d: Groups got %+v, want %+v", v, calls, want)
		}
		if len(left) == 1 && (left[0] > requestTimeout || left[0] < requestTimeout-10*time.Second) {
			t.Errorf("v%d: handler had %v, want about %v", v, left[0], requestTimeout)
		}
		if resp.ErrorCode != int16(group.RebalanceInProgress) {
			t.Errorf("v%d: %v, want REBALANCE_IN_PROGRESS", v, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
}

// TestLeaveGroup: a v0–2 request's member id is a batch of one, and its
// one code is the group's, else the member's; from v3 the members (by id
// or instance id) and their codes map one to one.
func TestLeaveGroup(t *testing.T) {
	c, fg := dialGroups(t)
	for _, v := range []int16{0, 2} {
		for _, tc := range []struct{ top, member, want group.ErrorCode }{
			{group.None, group.UnknownMemberID, group.UnknownMemberID},
			{group.NotCoordinator, group.UnknownMemberID, group.NotCoordinator},
			{group.None, group.None, group.None},
		} {
			fg.set(func(f *fakeGroups) {
				f.leave = group.LeaveGroupResponse{ErrorCode: tc.top, Members: []group.LeaveMemberResponse{{MemberID: "m1", ErrorCode: tc.member}}}
			})
			resp := c.roundTrip(groupRequest(13, v)).(*kmsg.LeaveGroupResponse)
			want := group.LeaveGroupRequest{GroupID: "g", Members: []group.LeaveMember{{MemberID: "m1"}}}
			if got := one[group.LeaveGroupRequest](t, fg); !reflect.DeepEqual(got, want) {
				t.Errorf("v%d: Groups got %+v, want %+v", v, got, want)
			}
			if resp.ErrorCode != int16(tc.want) || len(resp.Members) != 0 {
				t.Errorf("v%d, group %v member %v: %v with %d members, want %v alone", v, tc.top, tc.member, kerr.ErrorForCode(resp.ErrorCode), len(resp.Members), tc.want)
			}
		}
	}
	fg.set(func(f *fakeGroups) {
		f.leave = group.LeaveGroupResponse{Members: []group.LeaveMemberResponse{
			{MemberID: "m1"}, {GroupInstanceID: new("i2"), ErrorCode: group.UnknownMemberID}}}
	})
	for _, v := range []int16{3, 5} {
		resp := c.roundTrip(groupRequest(13, v)).(*kmsg.LeaveGroupResponse)
		want := group.LeaveGroupRequest{GroupID: "g", Members: []group.LeaveMember{{MemberID: "m1"}, {GroupInstanceID: new("i2")}}}
		if got := one[group.LeaveGroupRequest](t, fg); !reflect.DeepEqual(got, want) {
			t.Errorf("v%d: Groups got %+v, want %+v", v, got, want)
		}
		wantMembers := []kmsg.LeaveGroupResponseMember{{MemberID: "m1"}, {InstanceID: new("i2"), ErrorCode: int16(group.UnknownMemberID)}}
		if resp.ErrorCode != 0 || !reflect.DeepEqual(resp.Members, wantMembers) {
			t.Errorf("v%d: %v, members %+v; want NONE, %+v", v, kerr.ErrorForCode(resp.ErrorCode), resp.Members, wantMembers)
		}
	}
}

// TestOffsetCommit: the commit reaches Groups with the version, the v2–4
// retention (−1 from v5), the v6 leader epoch (−1 before) and the v7
// instance id; the partitions' codes come back.
func TestOffsetCommit(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) {
		f.commit = group.OffsetCommitResponse{Topics: []group.TopicResult{
			{Name: "t1", Partitions: []group.PartitionResult{{Partition: 0}, {Partition: 1, ErrorCode: group.OffsetMetadataTooLarge}}},
			{Name: "t2", Partitions: []group.PartitionResult{{Partition: 0, ErrorCode: group.IllegalGeneration}}}}}
	})
	for _, v := range []int16{2, 4, 5, 6, 9} {
		resp := c.roundTrip(groupRequest(8, v)).(*kmsg.OffsetCommitResponse)
		epoch, retention, instance := int32(7), int64(-1), new("i1")
		if v < 6 {
			epoch = -1
		}
		if v < 5 {
			retention = 5000
		}
		if v < 7 {
			instance = nil
		}
		want := group.OffsetCommitRequest{Version: v, GroupID: "g", GenerationID: 3, MemberID: "m1", GroupInstanceID: instance, RetentionTimeMs: retention,
			Topics: []group.CommitTopic{
				{Name: "t1", Partitions: []group.CommitPartition{{Partition: 0, Offset: 10, LeaderEpoch: epoch, Metadata: new("md")}, {Partition: 1, Offset: 11, LeaderEpoch: epoch, Metadata: new("md")}}},
				{Name: "t2", Partitions: []group.CommitPartition{{Partition: 0, Offset: 10, LeaderEpoch: epoch, Metadata: new("md")}}}}}
		if got := one[group.OffsetCommitRequest](t, fg); !reflect.DeepEqual(got, want) {
			t.Errorf("v%d: Groups got %+v, want %+v", v, got, want)
		}
		wantTopics := []kmsg.OffsetCommitResponseTopic{
			{Topic: "t1", Partitions: []kmsg.OffsetCommitResponseTopicPartition{{Partition: 0}, {Partition: 1, ErrorCode: int16(group.OffsetMetadataTooLarge)}}},
			{Topic: "t2", Partitions: []kmsg.OffsetCommitResponseTopicPartition{{Partition: 0, ErrorCode: int16(group.IllegalGeneration)}}}}
		if !reflect.DeepEqual(resp.Topics, wantTopics) {
			t.Errorf("v%d: response %+v, want %+v", v, resp.Topics, wantTopics)
		}
	}
}

// offsetFetchAnswers are the fake's committed offsets: g1 has t1/0 at 5
// (epoch 2, metadata) and none at t1/1 or t2/0; g2 is not coordinated.
var offsetFetchAnswers = map[string]group.OffsetFetchResponse{
	"g1": {Topics: []group.FetchedTopic{
		{Name: "t1", Partitions: []group.FetchedPartition{{Partition: 0, Offset: 5, LeaderEpoch: 2, Metadata: "md"}, {Partition: 1, Offset: -1, LeaderEpoch: -1}}},
		{Name: "t2", Partitions: []group.FetchedPartition{{Partition: 0, Offset: -1, LeaderEpoch: -1}}}}},
	"g2": {ErrorCode: group.NotCoordinator},
}

// TestOffsetFetch: v1 always names its topics (an empty list is none,
// not all) and has no group code, so a group's error goes on every
// partition; v2+ passes a null list as "all" and answers the group's
// code at the top; the leader epoch goes out from v5; from v8 each group
// of the batch is one Groups call with its own code.
func TestOffsetFetch(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) { f.fetch = offsetFetchAnswers })
	wantTopics := func(epoch int32) []kmsg.OffsetFetchResponseTopic {
		return []kmsg.OffsetFetchResponseTopic{
			{Topic: "t1", Partitions: []kmsg.OffsetFetchResponseTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: epoch, Metadata: new("md")}, {Partition: 1, Offset: -1, LeaderEpoch: -1, Metadata: new("")}}},
			{Topic: "t2", Partitions: []kmsg.OffsetFetchResponseTopicPartition{{Partition: 0, Offset: -1, LeaderEpoch: -1, Metadata: new("")}}}}
	}
	named := []group.FetchTopic{{Name: "t1", Partitions: []int32{0, 1}}, {Name: "t2", Partitions: []int32{0}}}
	for _, v := range []int16{1, 4, 5, 7} {
		resp := c.roundTrip(groupRequest(9, v)).(*kmsg.OffsetFetchResponse)
		if got := one[group.OffsetFetchRequest](t, fg); !reflect.DeepEqual(got, group.OffsetFetchRequest{GroupID: "g1", Topics: named}) {
			t.Errorf("v%d: Groups got %+v", v, got)
		}
		epoch := int32(2)
		if v < 5 {
			epoch = -1 // not sent: the client's default
		}
		if resp.ErrorCode != 0 || !reflect.DeepEqual(resp.Topics, wantTopics(epoch)) {
			t.Errorf("v%d: %v, %+v; want NONE, %+v", v, kerr.ErrorForCode(resp.ErrorCode), resp.Topics, wantTopics(epoch))
		}
	}

	// v1: an empty list asks for nothing; a group's error is every
	// partition's.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(1)
	req.Group, req.Topics = "g1", []kmsg.OffsetFetchRequestTopic{}
	c.roundTrip(req)
	if got := one[group.OffsetFetchRequest](t, fg); got.Topics == nil || len(got.Topics) != 0 {
		t.Errorf("v1 empty topics: Groups got %+v, want an empty, non-nil list", got.Topics)
	}
	// From v2 too, and for a group of a v8 batch, while a null list is
	// all (below).
	for _, v := range []int16{2, 8} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(v)
		req.Group, req.Topics = "g1", []kmsg.OffsetFetchRequestTopic{}
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group, g.Topics = "g1", []kmsg.OffsetFetchRequestGroupTopic{}
		req.Groups = append(req.Groups, g)
		c.roundTrip(req)
		if got := one[group.OffsetFetchRequest](t, fg); got.Topics == nil || len(got.Topics) != 0 {
			t.Errorf("v%d empty topics: Groups got %+v, want an empty, non-nil list", v, got.Topics)
		}
	}
	req = groupRequest(9, 1).(*kmsg.OffsetFetchRequest)
	req.Group = "g2"
	resp := c.roundTrip(req).(*kmsg.OffsetFetchResponse)
	fg.take()
	checkFailed(t, 9, 1, resp, int16(group.NotCoordinator))
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.Offset != -1 {
				t.Errorf("v1 group error: %s/%d at offset %d, want -1", rt.Topic, rp.Partition, rp.Offset)
			}
		}
	}

	// v2–7: null topics are all; the group's code is the top-level one.
	for _, v := range []int16{2, 7} {
		for _, id := range []string{"g1", "g2"} {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.SetVersion(v)
			req.Group = id
			resp := c.roundTrip(req).(*kmsg.OffsetFetchResponse)
			if got := one[group.OffsetFetchRequest](t, fg); got.Topics != nil || got.GroupID != id {
				t.Errorf("v%d null topics: Groups got %+v, want all of %s", v, got, id)
			}
			if resp.ErrorCode != int16(offsetFetchAnswers[id].ErrorCode) || len(resp.Topics) != len(offsetFetchAnswers[id].Topics) {
				t.Errorf("v%d %s: %v with %d topics", v, id, kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
			}
		}
	}

	// v8+: one call per group, each answer with its group.
	for _, v := range []int16{8, 9} {
		resp := c.roundTrip(groupRequest(9, v)).(*kmsg.OffsetFetchResponse)
		calls, _ := fg.take()
		if want := []any{group.OffsetFetchRequest{GroupID: "g1", Topics: named}, group.OffsetFetchRequest{GroupID: "g2"}}; !reflect.DeepEqual(calls, want) {
			t.Errorf("v%d: Groups got %+v, want %+v", v, calls, want)
		}
		var groupTopics []kmsg.OffsetFetchResponseGroupTopic
		for _, rt := range wantTopics(2) {
			gt := kmsg.OffsetFetchResponseGroupTopic{Topic: rt.Topic}
			for _, p := range rt.Partitions {
				gt.Partitions = append(gt.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition(p))
			}
			groupTopics = append(groupTopics, gt)
		}
		want := []kmsg.OffsetFetchResponseGroup{{Group: "g1", Topics: groupTopics}, {Group: "g2", ErrorCode: int16(group.NotCoordinator)}}
		if !reflect.DeepEqual(resp.Groups, want) || len(resp.Topics) != 0 {
			t.Errorf("v%d: groups %+v, want %+v", v, resp.Groups, want)
		}
	}
}

// TestListGroups: the v4 state and v5 type filters reach Groups, the
// groups come back with the fields of the version.
func TestListGroups(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) {
		f.list = group.ListGroupsResponse{Groups: []group.ListedGroup{
			{GroupID: "g1", ProtocolType: "consumer", GroupState: "Stable", GroupType: "classic"},
			{GroupID: "g2", GroupState: "Empty", GroupType: "classic"}}}
	})
	for _, v := range []int16{0, 4, 5} {
		resp := c.roundTrip(groupRequest(16, v)).(*kmsg.ListGroupsResponse)
		want := group.ListGroupsRequest{StatesFilter: []string{"Stable"}, TypesFilter: []string{"classic"}}
		wantGroups := []kmsg.ListGroupsResponseGroup{{Group: "g1", ProtocolType: "consumer", GroupState: "Stable", GroupType: "classic"}, {Group: "g2", GroupState: "Empty", GroupType: "classic"}}
		if v < 5 {
			want.TypesFilter = nil
			wantGroups[0].GroupType, wantGroups[1].GroupType = "", ""
		}
		if v < 4 {
			want.StatesFilter = nil
			wantGroups[0].GroupState, wantGroups[1].GroupState = "", ""
		}
		if got := one[group.ListGroupsRequest](t, fg); !reflect.DeepEqual(got, want) {
			t.Errorf("v%d: Groups got %+v, want %+v", v, got, want)
		}
		if resp.ErrorCode != 0 || !reflect.DeepEqual(resp.Groups, wantGroups) {
			t.Errorf("v%d: %+v, want %+v", v, resp.Groups, wantGroups)
		}
	}
}

// describedGroups is the fake's DescribeGroups answer.
var describedGroups = []group.DescribedGroup{
	{GroupID: "g1", GroupState: "Stable", ProtocolType: "consumer", ProtocolData: "range",
		Members: []group.DescribedMember{{MemberID: "m1", GroupInstanceID: new("i1"), ClientID: "c1", ClientHost: "/10.0.0.1",
			MemberMetadata: []byte{1}, MemberAssignment: []byte{2}}}},
	{GroupID: "g2", ErrorCode: group.NotCoordinator},
}

// TestDescribeGroups: the ids reach Groups in order; groups and members
// come back (instance ids from v4), authorized operations (v3+) as "not
// requested" even when asked.
func TestDescribeGroups(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) { f.described = describedGroups })
	for _, v := range []int16{0, 5} {
		resp := c.roundTrip(groupRequest(15, v)).(*kmsg.DescribeGroupsResponse)
		if got := one[describeCall](t, fg); !reflect.DeepEqual(got, describeCall{"g1", "g2"}) {
			t.Errorf("v%d: Groups got %v", v, got)
		}
		want := []kmsg.DescribeGroupsResponseGroup{
			{Group: "g1", State: "Stable", ProtocolType: "consumer", Protocol: "range", AuthorizedOperations: authorizedOperationsOmitted,
				Members: []kmsg.DescribeGroupsResponseGroupMember{{MemberID: "m1", InstanceID: new("i1"), ClientID: "c1", ClientHost: "/10.0.0.1",
					ProtocolMetadata: []byte{1}, MemberAssignment: []byte{2}}}},
			{Group: "g2", ErrorCode: int16(group.NotCoordinator), AuthorizedOperations: authorizedOperationsOmitted}}
		if v < 4 {
			want[0].Members[0].InstanceID = nil
		}
		if !reflect.DeepEqual(resp.Groups, want) {
			t.Errorf("v%d: %+v, want %+v", v, resp.Groups, want)
		}
	}
}

// TestDeleteGroups: the ids reach Groups in order, each result comes back.
func TestDeleteGroups(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) {
		f.deleted = group.DeleteGroupsResponse{Results: []group.DeletedGroup{{GroupID: "g1"}, {GroupID: "g2", ErrorCode: group.NonEmptyGroup}}}
	})
	for _, v := range []int16{0, 2} {
		resp := c.roundTrip(groupRequest(42, v)).(*kmsg.DeleteGroupsResponse)
		if got := one[deleteCall](t, fg); !reflect.DeepEqual(got, deleteCall{"g1", "g2"}) {
			t.Errorf("v%d: Groups got %v", v, got)
		}
		want := []kmsg.DeleteGroupsResponseGroup{{Group: "g1"}, {Group: "g2", ErrorCode: int16(group.NonEmptyGroup)}}
		if !reflect.DeepEqual(resp.Groups, want) {
			t.Errorf("v%d: %+v, want %+v", v, resp.Groups, want)
		}
	}
}

// TestOffsetDelete: the partitions reach Groups, the group's and each
// partition's codes come back.
func TestOffsetDelete(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) {
		f.offsetDelete = group.OffsetDeleteResponse{Topics: []group.TopicResult{
			{Name: "t1", Partitions: []group.PartitionResult{{Partition: 0}, {Partition: 1, ErrorCode: group.GroupSubscribedToTopic}}}}}
	})
	resp := c.roundTrip(groupRequest(47, 0)).(*kmsg.OffsetDeleteResponse)
	want := group.OffsetDeleteRequest{GroupID: "g", Topics: []group.FetchTopic{{Name: "t1", Partitions: []int32{0, 1}}, {Name: "t2", Partitions: []int32{0}}}}
	if got := one[group.OffsetDeleteRequest](t, fg); !reflect.DeepEqual(got, want) {
		t.Errorf("Groups got %+v, want %+v", got, want)
	}
	wantTopics := []kmsg.OffsetDeleteResponseTopic{{Topic: "t1", Partitions: []kmsg.OffsetDeleteResponseTopicPartition{{Partition: 0}, {Partition: 1, ErrorCode: int16(group.GroupSubscribedToTopic)}}}}
	if resp.ErrorCode != 0 || !reflect.DeepEqual(resp.Topics, wantTopics) {
		t.Errorf("%v, %+v; want NONE, %+v", kerr.ErrorForCode(resp.ErrorCode), resp.Topics, wantTopics)
	}
	fg.set(func(f *fakeGroups) { f.offsetDelete = group.OffsetDeleteResponse{ErrorCode: group.GroupIDNotFound} })
	resp = c.roundTrip(groupRequest(47, 0)).(*kmsg.OffsetDeleteResponse)
	fg.take()
	if resp.ErrorCode != int16(group.GroupIDNotFound) || len(resp.Topics) != 0 {
		t.Errorf("group not found: %v with %d topics", kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
	}
}

// TestKafkaClientHost: IPv4 (also mapped into IPv6) as "/a.b.c.d", IPv6
// in Java's uncompressed form, anything else as it is.
func TestKafkaClientHost(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:9092":       "/127.0.0.1",
		"[::ffff:10.1.2.3]:1":  "/10.1.2.3",
		"[::1]:1":              "/0:0:0:0:0:0:0:1",
		"[2001:db8::ff00:1]:2": "/2001:db8:0:0:0:0:ff00:1",
		"[fe80::1%eth0]:3":     "/fe80:0:0:0:0:0:0:1%eth0",
		"pipe":                 "pipe",
	} {
		var a net.Addr = stringAddr(addr)
		if tcp, err := net.ResolveTCPAddr("tcp", addr); err == nil {
			a = tcp
		}
		if got := kafkaClientHost(a); got != want {
			t.Errorf("kafkaClientHost(%s) = %q, want %q", addr, got, want)
		}
	}
}

// stringAddr is a net.Addr that is no IP address.
type stringAddr string

func (a stringAddr) Network() string { return "pipe" }
func (a stringAddr) String() string  { return string(a) }

// TestGroupsWithFranzGo: franz-go's admin client finds coordinators
// (batched FindCoordinator), lists and describes groups and fetches
// offsets through the listener as it would from Kafka.
func TestGroupsWithFranzGo(t *testing.T) {
	fg := &fakeGroups{}
	host, port := startGroupServer(t, fg)
	fg.set(func(f *fakeGroups) {
		f.coordinator = func(_ int8, key string) Coordinator {
			if key == "gone" {
				return Coordinator{NodeID: -1, Port: -1, ErrorCode: group.CoordinatorNotAvailable}
			}
			return Coordinator{NodeID: 1, Host: host, Port: port}
		}
		f.list = group.ListGroupsResponse{Groups: []group.ListedGroup{{GroupID: "g1", ProtocolType: "consumer", GroupState: "Stable", GroupType: "classic"}}}
		f.described = describedGroups[:1]
		f.fetch = offsetFetchAnswers
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(net.JoinHostPort(host, strconv.Itoa(int(port)))),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }), kgo.RequestRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	coords := adm.FindGroupCoordinators(ctx, "g1", "gone")
	if g1 := coords["g1"]; g1.Err != nil || g1.NodeID != 1 || g1.Host != host || g1.Port != port {
		t.Errorf("coordinator of g1: %+v, want broker 1 at %s:%d", g1, host, port)
	}
	if gone := coords["gone"]; !errors.Is(gone.Err, kerr.CoordinatorNotAvailable) {
		t.Errorf("coordinator of gone: %+v, want COORDINATOR_NOT_AVAILABLE", gone)
	}

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (kadm.ListedGroup{Coordinator: 1, Group: "g1", GroupType: "classic", ProtocolType: "consumer", State: "Stable"}); len(listed) != 1 || listed["g1"] != want {
		t.Errorf("listed %+v, want %+v", listed, want)
	}

	described, err := adm.DescribeGroups(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	g1 := described["g1"]
	if g1.Err != nil || g1.State != "Stable" || g1.Protocol != "range" || len(g1.Members) != 1 ||
		g1.Members[0].MemberID != "m1" || g1.Members[0].ClientHost != "/10.0.0.1" || *g1.Members[0].InstanceID != "i1" {
		t.Errorf("described %+v", g1)
	}

	offsets, err := adm.FetchOffsets(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offsets.Lookup("t1", 0); !ok || o.Err != nil || o.At != 5 || o.LeaderEpoch != 2 || o.Metadata != "md" {
		t.Errorf("offset of t1/0: %+v (found %v), want 5 at epoch 2 with metadata", o, ok)
	}
	calls, _ := fg.take()
	if n := len(calls); n < 5 {
		t.Errorf("Groups got %d calls, want every request to reach it", n)
	}
}

// FuzzGroupFrames: any group API frame gives an answer, nothing, or an
// error (the connection closes); never a panic.
func FuzzGroupFrames(f *testing.F) {
	fg := &fakeGroups{fetch: offsetFetchAnswers, described: describedGroups}
	s := NewServer(Config{BrokerID: 1, Logger: slog.New(slog.DiscardHandler), Groups: fg}, &fakeBackend{}, nil)
	for key, r := range groupAPIs {
		for v := r[0]; v <= r[1]; v++ {
			b := kmsg.NewRequestFormatter().AppendRequest(nil, groupRequest(key, v), 7)
			f.Add(b[4:])
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 8 {
			return
		}
		h, body, err := parseHeader(frame, s.apis)
		if err != nil {
			return
		}
		finish, err := s.handle(t.Context(), h, body)
		if err != nil {
			return
		}
		if resp := finish(); resp != nil {
			_ = appendResponse(nil, h, resp)
		}
		fg.take() // keep the fake's record small
	})
}

// TestDescribeGroupsNotFound: a group the coordinator describes as Dead
// (it does not exist) is GROUP_ID_NOT_FOUND with a message from v6
// (KIP-1043), and a Dead group without an error before.
func TestDescribeGroupsNotFound(t *testing.T) {
	c, fg := dialGroups(t)
	fg.set(func(f *fakeGroups) {
		f.described = []group.DescribedGroup{{GroupID: "g1", GroupState: "Dead", Members: []group.DescribedMember{}},
			{GroupID: "g2", GroupState: "Empty", ProtocolType: "consumer"}}
	})
	for _, v := range []int16{5, 6} {
		resp := c.roundTrip(groupRequest(15, v)).(*kmsg.DescribeGroupsResponse)
		one[describeCall](t, fg)
		if len(resp.Groups) != 2 {
			t.Fatalf("v%d: %+v", v, resp.Groups)
		}
		g1, g2 := resp.Groups[0], resp.Groups[1]
		wantCode := int16(0)
		if v >= 6 {
			wantCode = int16(group.GroupIDNotFound)
		}
		if g1.ErrorCode != wantCode || g1.State != "Dead" || (v >= 6) != (g1.ErrorMessage != nil) {
			t.Errorf("v%d: unknown group answered code %d state %q message %v, want code %d", v, g1.ErrorCode, g1.State, g1.ErrorMessage, wantCode)
		}
		if g2.ErrorCode != 0 || g2.State != "Empty" || g2.ErrorMessage != nil {
			t.Errorf("v%d: existing group answered %+v", v, g2)
		}
	}
}
