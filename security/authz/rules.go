package authz

import (
	"context"
	"slices"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/transport"
)

// Rule is how one RPC is authorized. The interceptor checks Broker, then
// Needs; a Filtered RPC's handler also checks per item.
type Rule struct {
	// Needs returns what the caller must be allowed, all of it, before the
	// handler runs; nil needs nothing beyond the connection's own checks.
	Needs func(req any) []Need
	// Broker, if set, returns the broker the request acts as: the caller
	// must be that broker (Checker.CheckBroker).
	Broker func(req any) (int32, bool)
	// Filtered marks RPCs whose handlers drop or mark what the caller may
	// not describe (see the package documentation).
	Filtered bool
	// Public RPCs need no principal at all (the health service).
	Public bool
	// Check, if set, is a decision Needs cannot express (one of two
	// grants); nil or a PermissionDenied status.
	Check func(ctx context.Context, c *Checker, req any) error
}

func cluster(op acl.Operation) func(any) []Need {
	return func(any) []Need { return []Need{{op, acl.Cluster, acl.ClusterName}} }
}

// each returns one need of op on every distinct name of type t.
func each(op acl.Operation, t acl.ResourceType, names []string) []Need {
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]Need, len(names))
	for i, n := range names {
		out[i] = Need{op, t, n}
	}
	return out
}

// typed adapts a function of one request type to a Rule's Needs.
func typed[R any](f func(R) []Need) func(any) []Need {
	return func(req any) []Need {
		r, ok := req.(R)
		if !ok {
			// A request of another type than the method's: never served.
			return []Need{{acl.ClusterAction, acl.Cluster, acl.ClusterName}}
		}
		return f(r)
	}
}

func brokerID[R interface{ GetBrokerId() int32 }](req any) (int32, bool) {
	r, ok := req.(R)
	if !ok {
		return 0, false
	}
	return r.GetBrokerId(), true
}

// clusterAction is a cluster member's RPC: ClusterAction on the cluster.
var clusterAction = cluster(acl.ClusterAction)

// Rules is the authorization of every RPC twinlog's daemons serve, by full
// method name. TestEveryMethodHasARule keeps it complete.
var Rules = map[string]Rule{
	// Admin (Kafka's rules for the same APIs).
	pb.AdminService_CreateTopics_FullMethodName: {Needs: typed(func(r *pb.CreateTopicsRequest) []Need {
		var names []string
		for _, t := range r.GetTopics() {
			names = append(names, t.GetName())
		}
		return each(acl.Create, acl.Topic, names)
	})},
	pb.AdminService_DeleteTopics_FullMethodName: {Needs: typed(func(r *pb.DeleteTopicsRequest) []Need {
		return each(acl.Delete, acl.Topic, slices.Clone(r.GetNames()))
	})},
	pb.AdminService_DescribeConfigs_FullMethodName: {Needs: typed(func(r *pb.DescribeConfigsRequest) []Need {
		var out []Need
		for _, res := range r.GetResources() {
			out = append(out, configNeed(acl.DescribeConfigs, res))
		}
		return out
	})},
	pb.AdminService_AlterConfigs_FullMethodName: {Needs: typed(func(r *pb.AlterConfigsRequest) []Need {
		var out []Need
		for _, res := range r.GetResources() {
			out = append(out, configNeed(acl.AlterConfigs, res.GetResource()))
		}
		return out
	})},
	pb.AdminService_ListBrokers_FullMethodName:                  {Needs: cluster(acl.Describe)},
	pb.AdminService_UnregisterBroker_FullMethodName:             {Needs: cluster(acl.Alter)},
	pb.AdminService_ElectLeaders_FullMethodName:                 {Needs: cluster(acl.Alter)},
	pb.AdminService_AlterPartitionReassignments_FullMethodName:  {Needs: cluster(acl.Alter)},
	pb.AdminService_DescribeTopicPartitions_FullMethodName:      {Filtered: true},
	pb.AdminService_CreateAcls_FullMethodName:                   {Needs: cluster(acl.Alter)},
	pb.AdminService_DeleteAcls_FullMethodName:                   {Needs: cluster(acl.Alter)},
	pb.AdminService_DescribeAcls_FullMethodName:                 {Needs: cluster(acl.Describe)},
	pb.AdminService_AlterUserScramCredentials_FullMethodName:    {Needs: cluster(acl.Alter)},
	pb.AdminService_DescribeUserScramCredentials_FullMethodName: {Needs: cluster(acl.Describe)},

	// Data plane.
	pb.ProduceService_Produce_FullMethodName: {Needs: typed(func(r *pb.ProduceRequest) []Need {
		var names []string
		for _, p := range r.GetPartitions() {
			names = append(names, p.GetTopic())
		}
		return each(acl.Write, acl.Topic, names)
	})},
	pb.ProduceService_InitProducerId_FullMethodName: {Check: func(ctx context.Context, c *Checker, _ any) error {
		if c.IdempotentProducer(ctx) {
			return nil
		}
		p, _ := transport.Principal(ctx)
		return Denied(clusterDenied, "principal %s may not start an idempotent producer (IdempotentWrite on the cluster, or Write on a topic)", p)
	}},
	pb.FetchService_Fetch_FullMethodName: {
		Needs: typed(fetchNeeds),
		Broker: func(req any) (int32, bool) {
			r, ok := req.(*pb.FetchRequest)
			if !ok || r.GetFetcherType() != pb.FetcherType_FETCHER_TYPE_FOLLOWER {
				return 0, false
			}
			return r.GetReplicaId(), true
		},
	},
	pb.FetchService_ListOffsets_FullMethodName: {Needs: typed(func(r *pb.ListOffsetsRequest) []Need {
		var names []string
		for _, t := range r.GetTopics() {
			names = append(names, t.GetName())
		}
		return each(acl.Describe, acl.Topic, names)
	})},
	pb.FetchService_OffsetForLeaderEpoch_FullMethodName: {Needs: typed(func(r *pb.OffsetForLeaderEpochRequest) []Need {
		var names []string
		for _, p := range r.GetPartitions() {
			names = append(names, p.GetTopic())
		}
		return each(acl.Describe, acl.Topic, names)
	})},
	pb.FetchService_Metadata_FullMethodName: {Filtered: true},

	// Replication between a cluster's brokers, and the controller's asks.
	pb.ReplicationService_GetReplicaLogInfo_FullMethodName: {Needs: clusterAction},
	pb.ReplicationService_AppendInternal_FullMethodName:    {Needs: clusterAction, Broker: brokerID[*pb.AppendInternalRequest]},

	// The controller's brokers.
	pb.ControllerService_RegisterBroker_FullMethodName:      {Needs: clusterAction, Broker: brokerID[*pb.RegisterBrokerRequest]},
	pb.ControllerService_BrokerHeartbeat_FullMethodName:     {Needs: clusterAction, Broker: brokerID[*pb.BrokerHeartbeatRequest]},
	pb.ControllerService_AlterPartition_FullMethodName:      {Needs: clusterAction, Broker: brokerID[*pb.AlterPartitionRequest]},
	pb.ControllerService_BumpLeaderEpoch_FullMethodName:     {Needs: clusterAction, Broker: brokerID[*pb.BumpLeaderEpochRequest]},
	pb.ControllerService_FetchMetadata_FullMethodName:       {Needs: clusterAction, Broker: brokerID[*pb.FetchMetadataRequest]},
	pb.ControllerService_AllocateProducerIds_FullMethodName: {Needs: clusterAction, Broker: brokerID[*pb.AllocateProducerIdsRequest]},
	pb.ControllerService_EnsureInternalTopic_FullMethodName: {Needs: clusterAction, Broker: brokerID[*pb.EnsureInternalTopicRequest]},

	// Groups (Kafka's: Describe to find or describe a group, Read to use
	// its offsets, Delete to delete it; topics as their data).
	pb.GroupService_FindCoordinator_FullMethodName: {Needs: typed(func(r *pb.FindCoordinatorRequest) []Need {
		return []Need{{acl.Describe, acl.Group, r.GetGroupId()}}
	})},
	pb.GroupService_ListGroups_FullMethodName: {Filtered: true},
	pb.GroupService_DescribeGroups_FullMethodName: {Needs: typed(func(r *pb.DescribeGroupsRequest) []Need {
		return each(acl.Describe, acl.Group, slices.Clone(r.GetGroupIds()))
	})},
	pb.GroupService_FetchOffsets_FullMethodName: {Needs: typed(func(r *pb.FetchOffsetsRequest) []Need {
		return []Need{{acl.Describe, acl.Group, r.GetGroupId()}}
	}), Filtered: true},
	pb.GroupService_CommitOffsets_FullMethodName: {Needs: typed(func(r *pb.CommitOffsetsRequest) []Need {
		var names []string
		for _, o := range r.GetOffsets() {
			names = append(names, o.GetTopic())
		}
		return append([]Need{{acl.Read, acl.Group, r.GetGroupId()}}, each(acl.Read, acl.Topic, names)...)
	})},
	pb.GroupService_DeleteGroups_FullMethodName: {Needs: typed(func(r *pb.DeleteGroupsRequest) []Need {
		return each(acl.Delete, acl.Group, slices.Clone(r.GetGroupIds()))
	})},

	// Mirrors, on the destination: the Mirror resource is the mirror's name.
	pb.MirrorService_CreateMirror_FullMethodName: {Needs: typed(func(r *pb.CreateMirrorRequest) []Need {
		return append([]Need{{acl.Create, acl.Mirror, r.GetName()}}, each(acl.Create, acl.Topic, slices.Clone(r.GetTopics()))...)
	})},
	pb.MirrorService_DeleteMirror_FullMethodName: {Needs: typed(func(r *pb.DeleteMirrorRequest) []Need {
		return []Need{{acl.Delete, acl.Mirror, r.GetName()}}
	})},
	pb.MirrorService_StartMirrorTopics_FullMethodName: {Needs: typed(func(r *pb.StartMirrorTopicsRequest) []Need {
		return []Need{{acl.Alter, acl.Mirror, r.GetMirror()}}
	})},
	pb.MirrorService_StopMirrorTopics_FullMethodName: {Needs: typed(func(r *pb.StopMirrorTopicsRequest) []Need {
		return []Need{{acl.Alter, acl.Mirror, r.GetMirror()}}
	})},
	pb.MirrorService_PauseMirrorTopics_FullMethodName: {Needs: typed(func(r *pb.PauseMirrorTopicsRequest) []Need {
		return []Need{{acl.Alter, acl.Mirror, r.GetMirror()}}
	})},
	pb.MirrorService_ResumeMirrorTopics_FullMethodName: {Needs: typed(func(r *pb.ResumeMirrorTopicsRequest) []Need {
		return []Need{{acl.Alter, acl.Mirror, r.GetMirror()}}
	})},
	// A preview changes nothing; it tells what a start would truncate.
	pb.MirrorService_PreviewMirrorTruncation_FullMethodName: {Needs: typed(func(r *pb.PreviewMirrorTruncationRequest) []Need {
		return []Need{{acl.Describe, acl.Mirror, r.GetMirror()}}
	})},
	pb.MirrorService_DescribeMirrors_FullMethodName: {Needs: typed(func(r *pb.DescribeMirrorsRequest) []Need {
		return each(acl.Describe, acl.Mirror, slices.Clone(r.GetNames()))
	}), Filtered: true},

	// Mirrors, on the source: the Mirror resource is the destination
	// cluster's id, which the fetching principal must be allowed to Read as.
	pb.MirrorSourceService_GetLastMirroredEpochs_FullMethodName: {Needs: typed(func(r *pb.GetLastMirroredEpochsRequest) []Need {
		return []Need{{acl.Read, acl.Mirror, r.GetRequesterClusterId()}, {acl.Describe, acl.Topic, r.GetTopic()}}
	})},

	// The health service: probes need no principal.
	"/grpc.health.v1.Health/Check": {Public: true},
	"/grpc.health.v1.Health/List":  {Public: true},
	"/grpc.health.v1.Health/Watch": {Public: true},
	// Server reflection reveals the API only: Describe on the cluster.
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      {Needs: cluster(acl.Describe)},
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": {Needs: cluster(acl.Describe)},
}

// fetchNeeds: a follower needs ClusterAction (its identity is Rule.Broker's
// check); a mirror needs Read as its cluster (the Mirror resource named by
// requester_cluster_id) and Read on the topics; a consumer Read on them.
func fetchNeeds(r *pb.FetchRequest) []Need {
	if r.GetFetcherType() == pb.FetcherType_FETCHER_TYPE_FOLLOWER {
		return clusterAction(r)
	}
	var names []string
	for _, p := range r.GetPartitions() {
		names = append(names, p.GetTopic())
	}
	out := each(acl.Read, acl.Topic, names)
	if r.GetFetcherType() == pb.FetcherType_FETCHER_TYPE_MIRROR {
		out = append([]Need{{acl.Read, acl.Mirror, r.GetRequesterClusterId()}}, out...)
	}
	return out
}

// configNeed: a topic's configs are the topic's; the cluster's and the
// brokers' defaults are the cluster's.
func configNeed(op acl.Operation, res *pb.ConfigResource) Need {
	if res.GetType() == pb.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC {
		return Need{op, acl.Topic, res.GetName()}
	}
	return Need{op, acl.Cluster, acl.ClusterName}
}
