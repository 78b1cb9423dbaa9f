package authz

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/transport"
)

// apiMethods returns the full names of every RPC of twinlog's API.
func apiMethods(t *testing.T) []string {
	var out []string
	protoregistry.GlobalFiles.RangeFilesByPackage("twinlog.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				out = append(out, "/"+string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name()))
			}
		}
		return true
	})
	if len(out) < 40 {
		t.Fatalf("found only %d RPCs: is the API registered?", len(out))
	}
	return out
}

// TestEveryMethodHasARule: every RPC of the API has a rule, and every rule
// names an RPC that exists (or the health and reflection services).
func TestEveryMethodHasARule(t *testing.T) {
	methods := map[string]bool{}
	for _, m := range apiMethods(t) {
		methods[m] = true
		if _, ok := Rules[m]; !ok {
			t.Errorf("%s has no rule in authz.Rules", m)
		}
	}
	for m := range Rules {
		if !methods[m] && !strings.HasPrefix(m, "/grpc.health.v1.") && !strings.HasPrefix(m, "/grpc.reflection.") {
			t.Errorf("rule for %s, which is no RPC", m)
		}
	}
}

func ctxAs(principal string) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{
		Addr:     &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 5000},
		AuthInfo: transport.AuthInfo{Principal: principal},
	})
}

func allow(rt acl.ResourceType, name string, op acl.Operation) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: acl.Literal, Principal: "User:alice", Host: "*", Operation: op, Permission: acl.Allow}
}

// rpcCase is one RPC with a request and the bindings that let User:alice
// make it.
type rpcCase struct {
	method string
	req    any
	grant  []acl.Binding
}

func topicsCluster() string { return acl.ClusterName }

func rpcCases() []rpcCase {
	cl := topicsCluster()
	return []rpcCase{
		{pb.AdminService_CreateTopics_FullMethodName, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "t"}, {Name: "u"}}},
			[]acl.Binding{allow(acl.Topic, "t", acl.Create), allow(acl.Topic, "u", acl.Create)}},
		{pb.AdminService_DeleteTopics_FullMethodName, &pb.DeleteTopicsRequest{Names: []string{"t"}}, []acl.Binding{allow(acl.Topic, "t", acl.Delete)}},
		{pb.AdminService_DescribeConfigs_FullMethodName, &pb.DescribeConfigsRequest{Resources: []*pb.ConfigResource{
			{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "t"}, {Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_CLUSTER}}},
			[]acl.Binding{allow(acl.Topic, "t", acl.DescribeConfigs), allow(acl.Cluster, cl, acl.DescribeConfigs)}},
		{pb.AdminService_AlterConfigs_FullMethodName, &pb.AlterConfigsRequest{Resources: []*pb.AlterConfigsResource{
			{Resource: &pb.ConfigResource{Type: pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "t"}}}},
			[]acl.Binding{allow(acl.Topic, "t", acl.AlterConfigs)}},
		{pb.AdminService_ListBrokers_FullMethodName, &pb.ListBrokersRequest{}, []acl.Binding{allow(acl.Cluster, cl, acl.Describe)}},
		{pb.AdminService_UnregisterBroker_FullMethodName, &pb.UnregisterBrokerRequest{BrokerId: 3}, []acl.Binding{allow(acl.Cluster, cl, acl.Alter)}},
		{pb.AdminService_ElectLeaders_FullMethodName, &pb.ElectLeadersRequest{}, []acl.Binding{allow(acl.Cluster, cl, acl.Alter)}},
		{pb.AdminService_AlterPartitionReassignments_FullMethodName, &pb.AlterPartitionReassignmentsRequest{}, []acl.Binding{allow(acl.Cluster, cl, acl.Alter)}},
		{pb.AdminService_CreateAcls_FullMethodName, &pb.CreateAclsRequest{}, []acl.Binding{allow(acl.Cluster, cl, acl.Alter)}},
		{pb.AdminService_DeleteAcls_FullMethodName, &pb.DeleteAclsRequest{}, []acl.Binding{allow(acl.Cluster, cl, acl.Alter)}},
		{pb.AdminService_DescribeAcls_FullMethodName, &pb.DescribeAclsRequest{}, []acl.Binding{allow(acl.Cluster, cl, acl.Describe)}},
		{pb.AdminService_AlterUserScramCredentials_FullMethodName, &pb.AlterUserScramCredentialsRequest{}, []acl.Binding{allow(acl.Cluster, cl, acl.Alter)}},
		{pb.AdminService_DescribeUserScramCredentials_FullMethodName, &pb.DescribeUserScramCredentialsRequest{}, []acl.Binding{allow(acl.Cluster, cl, acl.Describe)}},
		{pb.ProduceService_Produce_FullMethodName, &pb.ProduceRequest{Partitions: []*pb.ProducePartitionData{{Topic: "t"}, {Topic: "t", Partition: 1}}},
			[]acl.Binding{allow(acl.Topic, "t", acl.Write)}},
		{pb.ProduceService_InitProducerId_FullMethodName, &pb.InitProducerIdRequest{}, []acl.Binding{allow(acl.Cluster, cl, acl.IdempotentWrite)}},
		// KIP-679: Write on any topic starts an idempotent producer too.
		{pb.ProduceService_InitProducerId_FullMethodName, &pb.InitProducerIdRequest{}, []acl.Binding{allow(acl.Topic, "t", acl.Write)}},
		{pb.FetchService_Fetch_FullMethodName, &pb.FetchRequest{FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER, Partitions: []*pb.FetchPartition{{Topic: "t"}}},
			[]acl.Binding{allow(acl.Topic, "t", acl.Read)}},
		{pb.FetchService_Fetch_FullMethodName, &pb.FetchRequest{FetcherType: pb.FetcherType_FETCHER_TYPE_MIRROR, RequesterClusterId: "b", Partitions: []*pb.FetchPartition{{Topic: "t"}}},
			[]acl.Binding{allow(acl.Topic, "t", acl.Read), allow(acl.Mirror, "b", acl.Read)}},
		{pb.FetchService_Fetch_FullMethodName, &pb.FetchRequest{FetcherType: pb.FetcherType_FETCHER_TYPE_FOLLOWER, ReplicaId: 2, Partitions: []*pb.FetchPartition{{Topic: "t"}}},
			[]acl.Binding{allow(acl.Cluster, cl, acl.ClusterAction)}},
		{pb.FetchService_ListOffsets_FullMethodName, &pb.ListOffsetsRequest{Topics: []*pb.ListOffsetsTopic{{Name: "t"}}}, []acl.Binding{allow(acl.Topic, "t", acl.Describe)}},
		{pb.FetchService_OffsetForLeaderEpoch_FullMethodName, &pb.OffsetForLeaderEpochRequest{Partitions: []*pb.OffsetForLeaderEpochPartition{{Topic: "t"}}},
			[]acl.Binding{allow(acl.Topic, "t", acl.Describe)}},
		{pb.ReplicationService_GetReplicaLogInfo_FullMethodName, &pb.GetReplicaLogInfoRequest{}, []acl.Binding{allow(acl.Cluster, cl, acl.ClusterAction)}},
		{pb.ReplicationService_AppendInternal_FullMethodName, &pb.AppendInternalRequest{BrokerId: 2}, []acl.Binding{allow(acl.Cluster, cl, acl.ClusterAction)}},
		{pb.ControllerService_RegisterBroker_FullMethodName, &pb.RegisterBrokerRequest{BrokerId: 2}, []acl.Binding{allow(acl.Cluster, cl, acl.ClusterAction)}},
		{pb.ControllerService_BrokerHeartbeat_FullMethodName, &pb.BrokerHeartbeatRequest{BrokerId: 2}, []acl.Binding{allow(acl.Cluster, cl, acl.ClusterAction)}},
		{pb.ControllerService_AlterPartition_FullMethodName, &pb.AlterPartitionRequest{BrokerId: 2}, []acl.Binding{allow(acl.Cluster, cl, acl.ClusterAction)}},
		{pb.ControllerService_BumpLeaderEpoch_FullMethodName, &pb.BumpLeaderEpochRequest{BrokerId: 2}, []acl.Binding{allow(acl.Cluster, cl, acl.ClusterAction)}},
		{pb.ControllerService_FetchMetadata_FullMethodName, &pb.FetchMetadataRequest{BrokerId: 2}, []acl.Binding{allow(acl.Cluster, cl, acl.ClusterAction)}},
		{pb.ControllerService_AllocateProducerIds_FullMethodName, &pb.AllocateProducerIdsRequest{BrokerId: 2}, []acl.Binding{allow(acl.Cluster, cl, acl.ClusterAction)}},
		{pb.ControllerService_EnsureInternalTopic_FullMethodName, &pb.EnsureInternalTopicRequest{BrokerId: 2}, []acl.Binding{allow(acl.Cluster, cl, acl.ClusterAction)}},
		{pb.GroupService_FindCoordinator_FullMethodName, &pb.FindCoordinatorRequest{GroupId: "g"}, []acl.Binding{allow(acl.Group, "g", acl.Describe)}},
		{pb.GroupService_DescribeGroups_FullMethodName, &pb.DescribeGroupsRequest{GroupIds: []string{"g", "h"}},
			[]acl.Binding{allow(acl.Group, "g", acl.Describe), allow(acl.Group, "h", acl.Describe)}},
		{pb.GroupService_FetchOffsets_FullMethodName, &pb.FetchOffsetsRequest{GroupId: "g"}, []acl.Binding{allow(acl.Group, "g", acl.Describe)}},
		{pb.GroupService_CommitOffsets_FullMethodName, &pb.CommitOffsetsRequest{GroupId: "g", Offsets: []*pb.CommittedOffset{{Topic: "t"}}},
			[]acl.Binding{allow(acl.Group, "g", acl.Read), allow(acl.Topic, "t", acl.Read)}},
		{pb.GroupService_DeleteGroups_FullMethodName, &pb.DeleteGroupsRequest{GroupIds: []string{"g"}}, []acl.Binding{allow(acl.Group, "g", acl.Delete)}},
		{pb.MirrorService_CreateMirror_FullMethodName, &pb.CreateMirrorRequest{Name: "m", Topics: []string{"t"}},
			[]acl.Binding{allow(acl.Mirror, "m", acl.Create), allow(acl.Topic, "t", acl.Create)}},
		{pb.MirrorService_DeleteMirror_FullMethodName, &pb.DeleteMirrorRequest{Name: "m"}, []acl.Binding{allow(acl.Mirror, "m", acl.Delete)}},
		{pb.MirrorService_StartMirrorTopics_FullMethodName, &pb.StartMirrorTopicsRequest{Mirror: "m"}, []acl.Binding{allow(acl.Mirror, "m", acl.Alter)}},
		{pb.MirrorService_PreviewMirrorTruncation_FullMethodName, &pb.PreviewMirrorTruncationRequest{Mirror: "m"}, []acl.Binding{allow(acl.Mirror, "m", acl.Describe)}},
		{pb.MirrorService_StopMirrorTopics_FullMethodName, &pb.StopMirrorTopicsRequest{Mirror: "m"}, []acl.Binding{allow(acl.Mirror, "m", acl.Alter)}},
		{pb.MirrorService_PauseMirrorTopics_FullMethodName, &pb.PauseMirrorTopicsRequest{Mirror: "m"}, []acl.Binding{allow(acl.Mirror, "m", acl.Alter)}},
		{pb.MirrorService_ResumeMirrorTopics_FullMethodName, &pb.ResumeMirrorTopicsRequest{Mirror: "m"}, []acl.Binding{allow(acl.Mirror, "m", acl.Alter)}},
		{pb.MirrorService_DescribeMirrors_FullMethodName, &pb.DescribeMirrorsRequest{Names: []string{"m"}}, []acl.Binding{allow(acl.Mirror, "m", acl.Describe)}},
		{pb.MirrorSourceService_GetLastMirroredEpochs_FullMethodName, &pb.GetLastMirroredEpochsRequest{RequesterClusterId: "b", Topic: "t"},
			[]acl.Binding{allow(acl.Mirror, "b", acl.Read), allow(acl.Topic, "t", acl.Describe)}},
	}
}

// TestRuleTable: for each RPC that needs something, an anonymous caller and
// User:alice without ACLs are refused with PermissionDenied before the
// handler runs, alice with the grant gets through, and alice with all but
// one of the grants is refused (each need is checked). Filtered RPCs are
// listed in TestFilteredRPCs.
func TestRuleTable(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range rpcCases() {
		covered[tc.method] = true
		run := func(ctx context.Context, grant []acl.Binding) (called bool, err error) {
			c := NewChecker(Config{Enabled: true})
			c.Update(acl.New(acl.Config{}, grant))
			_, err = c.UnaryInterceptor()(ctx, tc.req, &grpc.UnaryServerInfo{FullMethod: tc.method}, func(context.Context, any) (any, error) {
				called = true
				return nil, nil
			})
			return called, err
		}
		for _, who := range []struct {
			name  string
			ctx   context.Context
			grant []acl.Binding
		}{
			{"no connection identity", context.Background(), tc.grant},
			{"anonymous", ctxAs("User:ANONYMOUS"), tc.grant},
			{"alice without ACLs", ctxAs("User:alice"), nil},
		} {
			called, err := run(who.ctx, who.grant)
			if called || status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "AUTHORIZATION_FAILED") {
				t.Errorf("%s %T, %s: handler called %v, error %v", tc.method, tc.req, who.name, called, err)
			}
		}
		for i := range tc.grant {
			if len(tc.grant) == 1 {
				break
			}
			less := append(append([]acl.Binding{}, tc.grant[:i]...), tc.grant[i+1:]...)
			if called, err := run(ctxAs("User:alice"), less); called || status.Code(err) != codes.PermissionDenied {
				t.Errorf("%s %T without %v: handler called %v, error %v", tc.method, tc.req, tc.grant[i], called, err)
			}
		}
		if called, err := run(ctxAs("User:alice"), tc.grant); !called || err != nil {
			t.Errorf("%s %T with its grants: handler called %v, error %v", tc.method, tc.req, called, err)
		}
	}
	for m, r := range Rules {
		if !covered[m] && !r.Public && !(r.Filtered && r.Needs == nil) && !strings.HasPrefix(m, "/grpc.reflection.") {
			t.Errorf("%s: no case in rpcCases", m)
		}
	}
}

// TestBrokerIdentity: with a template, a request acting as broker 2 must
// come from broker 2's principal, even a super user's; a consumer fetch
// names no broker.
func TestBrokerIdentity(t *testing.T) {
	c := NewChecker(Config{Enabled: true, BrokerPrincipalTemplate: "User:broker-{id}", ACL: acl.Config{SuperUsers: []string{"User:broker-1", "User:broker-2"}}})
	call := func(principal string, method string, req any) error {
		_, err := c.UnaryInterceptor()(ctxAs(principal), req, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) { return nil, nil })
		return err
	}
	hb := &pb.BrokerHeartbeatRequest{BrokerId: 2}
	if err := call("User:broker-2", pb.ControllerService_BrokerHeartbeat_FullMethodName, hb); err != nil {
		t.Fatalf("broker 2 as itself: %v", err)
	}
	if err := call("User:broker-1", pb.ControllerService_BrokerHeartbeat_FullMethodName, hb); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("broker 1 as broker 2: %v", err)
	}
	follower := &pb.FetchRequest{FetcherType: pb.FetcherType_FETCHER_TYPE_FOLLOWER, ReplicaId: 2}
	if err := call("User:broker-1", pb.FetchService_Fetch_FullMethodName, follower); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("broker 1 fetching as follower 2: %v", err)
	}
	if err := call("User:broker-1", pb.FetchService_Fetch_FullMethodName, &pb.FetchRequest{FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER, ReplicaId: 2}); err != nil {
		t.Fatalf("super user's consumer fetch: %v", err)
	}
	if BrokerPrincipal("User:CN=broker-{id},O=a", 12) != "User:CN=broker-12,O=a" {
		t.Fatal(BrokerPrincipal("User:CN=broker-{id},O=a", 12))
	}
}

// TestDisabledAndPublic: with the authorizer off everything passes; with
// it on an RPC without a rule is refused and health checks pass without an
// identity.
func TestDisabledAndPublic(t *testing.T) {
	pass := func(context.Context, any) (any, error) { return nil, nil }
	off := NewChecker(Config{})
	if _, err := off.UnaryInterceptor()(context.Background(), &pb.DeleteTopicsRequest{Names: []string{"t"}},
		&grpc.UnaryServerInfo{FullMethod: pb.AdminService_DeleteTopics_FullMethodName}, pass); err != nil {
		t.Fatalf("disabled: %v", err)
	}
	on := NewChecker(Config{Enabled: true, ACL: acl.Config{SuperUsers: []string{"User:root"}}})
	if _, err := on.UnaryInterceptor()(ctxAs("User:root"), nil, &grpc.UnaryServerInfo{FullMethod: "/twinlog.v1.Nope/Gone"}, pass); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("method without a rule: %v", err)
	}
	if _, err := on.UnaryInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}, pass); err != nil {
		t.Fatalf("health: %v", err)
	}
}

// TestDenialLogBounded: denials are logged at most deniedLogsPerSecond a
// second; the next line logged says how many were held back.
func TestDenialLogBounded(t *testing.T) {
	var l logLimiter
	now := time.Unix(100, 0)
	logged := 0
	for range 3 * deniedLogsPerSecond {
		if ok, _ := l.allow(now); ok {
			logged++
		}
	}
	if logged != deniedLogsPerSecond {
		t.Fatalf("logged %d in one second, want %d", logged, deniedLogsPerSecond)
	}
	ok, held := l.allow(now.Add(time.Second))
	if !ok || held != 2*deniedLogsPerSecond {
		t.Fatalf("next second: %v, %d held back, want %d", ok, held, 2*deniedLogsPerSecond)
	}
}

// fakeImage is the ACL side of a broker's metadata image.
type fakeImage struct {
	offset   int64
	bindings []acl.Binding
}

func (f *fakeImage) ACLOffset() int64                          { return f.offset }
func (f *fakeImage) Authorizer(cfg acl.Config) *acl.Authorizer { return acl.New(cfg, f.bindings) }

// TestAwaitACLs: a broker's checker answers a principal that is not a
// super user UNAVAILABLE until the broker has caught up (a restarted
// broker must not deny what the cluster allows: a mirror takes a denial
// for the source's word), super users and public RPCs pass meanwhile;
// once caught up it decides by the image's bindings and follows their
// changes.
func TestAwaitACLs(t *testing.T) {
	c := NewChecker(Config{Enabled: true, AwaitACLs: true, ACL: acl.Config{SuperUsers: []string{"User:broker-1"}}})
	call := func(principal string) error {
		_, err := c.UnaryInterceptor()(ctxAs(principal), &pb.ListOffsetsRequest{Topics: []*pb.ListOffsetsTopic{{Name: "orders"}}},
			&grpc.UnaryServerInfo{FullMethod: pb.FetchService_ListOffsets_FullMethodName}, func(context.Context, any) (any, error) { return nil, nil })
		return err
	}
	img := &fakeImage{offset: 3, bindings: []acl.Binding{allow(acl.Topic, "orders", acl.Describe)}}
	c.Follow(img, false)
	if err := call("User:alice"); status.Code(err) != codes.Unavailable {
		t.Fatalf("before the broker caught up: %v, want UNAVAILABLE", err)
	}
	if err := call("User:broker-1"); err != nil {
		t.Fatalf("a super user before the broker caught up: %v", err)
	}
	if _, err := c.UnaryInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"},
		func(context.Context, any) (any, error) { return nil, nil }); err != nil {
		t.Fatalf("health before the broker caught up: %v", err)
	}
	c.Follow(img, true)
	if err := call("User:alice"); err != nil || !c.ACLsLoaded() {
		t.Fatalf("caught up, with the grant: %v", err)
	}
	if err := call("User:bob"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("caught up, without a grant: %v", err)
	}
	img.offset, img.bindings = 4, nil
	c.Follow(img, true)
	if err := call("User:alice"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("after the grant was removed: %v", err)
	}
	if off := NewChecker(Config{Enabled: true}); !off.ACLsLoaded() {
		t.Fatal("a checker without AwaitACLs waits for bindings")
	}
}
