package sim

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/transport"
)

// Every RPC between simulated nodes goes through the receiving node's
// shipped authorizer (security/authz's interceptor, with the ACLs of the
// node's own metadata image, as broker/metadata.go rebuilds them), with
// the caller's principal: the controller's (controller.go's rpc), a
// broker's follower fetches, __mirror_state reads and writes and answers
// to recovery rounds, and across clusters the mirror's fetches, LMLE
// queries and source Metadata, whose principals the source's operator
// grants (grantMirroring) as TestSecureMirror's does. A refusal is
// answered as the broker answers it (a gRPC PermissionDenied) and counted
// in Checks["authorization denied ..."]; what the shipped code does with
// it is the run's. Not simulated: the filtering of a Metadata answer by
// Describe (its handler's, not the interceptor's).

// authzConfig is every node's authorizer in cluster s: on, brokers act
// only as themselves (the template), the cluster's own nodes and the
// operator are super users.
func (s *Sim) authzConfig() authz.Config {
	return authz.Config{Enabled: true, BrokerPrincipalTemplate: s.brokerTemplate(),
		ACL: acl.Config{SuperUsers: s.superUsers()}, Logger: slog.New(slog.DiscardHandler)}
}

// brokerAuthz is a broker's authorizer: the cluster's, its bindings
// following the broker's image (Checker.Follow, as broker/metadata.go),
// answering UNAVAILABLE until the broker has caught up.
func (s *Sim) brokerAuthz() *authz.Checker {
	cfg := s.authzConfig()
	cfg.AwaitACLs = true
	return authz.NewChecker(cfg)
}

// admit runs b's authorizer on one RPC from principal, as its gRPC server
// would before the handler; nil lets the handler run.
func (b *simBroker) admit(principal, method string, req any) error {
	s := b.s
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: simAddr{}, AuthInfo: transport.AuthInfo{Principal: principal}})
	_, err := b.authz.UnaryInterceptor()(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) { return nil, nil })
	switch status.Code(err) {
	case codes.OK:
	case codes.Unavailable: // its ACLs are not loaded yet
		s.report.Checks["authorization unavailable "+method]++
	default:
		s.report.Checks["authorization denied "+method]++
		s.tracef("broker %d refuses %s from %s: %v", b.id, method, principal, err)
		if !b.caughtUp {
			// Its bindings may lack what the cluster allows: it must say
			// it is not ready, not deny (a mirror takes a denial for the
			// source's word and fails).
			s.fail("authorization before catching up", "broker %d (metadata offset %d) denied %s to %s: %v", b.id, b.image.Offset(), method, principal, err)
		}
	}
	return err
}

// grantMirroring is the source operator's grants to the destination's
// brokers (TestSecureMirror's): Read as the destination cluster on the
// Mirror resource, Read on topic t (Describe, which LMLE queries and
// Metadata need, comes with it).
func (w *world) grantMirroring(src, dst *Sim) {
	var grants []*pb.AclBinding
	allow := func(principal string, rt pb.AclResourceType, name string) *pb.AclBinding {
		return &pb.AclBinding{ResourceType: rt, ResourceName: name, PatternType: pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL,
			Principal: principal, Host: "*", Operation: pb.AclOperation_ACL_OPERATION_READ, Permission: pb.AclPermission_ACL_PERMISSION_ALLOW}
	}
	for id := 1; id <= dst.report.Brokers; id++ {
		p := dst.brokerPrincipal(int32(id))
		grants = append(grants, allow(p, pb.AclResourceType_ACL_RESOURCE_TYPE_MIRROR, dst.clusterID), allow(p, pb.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, "t"))
	}
	if w.cfg.Groups > 0 {
		// The offset sync (offsetsync.go): the destination's controller
		// reads every group's offsets of t (docs/security.md's grants).
		ctl := dst.controllerPrincipal()
		grants = append(grants, allow(ctl, pb.AclResourceType_ACL_RESOURCE_TYPE_GROUP, "*"), allow(ctl, pb.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, "t"))
	}
	resp := rpc(src.ctl, "operator create-acls", false, operatorCaller(pb.AdminService_CreateAcls_FullMethodName), src.ctl.admin.CreateAcls, &pb.CreateAclsRequest{Creations: grants})
	for _, r := range resp.GetResults() {
		if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			src.fail("setup", "grant %s's brokers: %v %s", dst.clusterID, r.GetError(), r.GetErrorMessage())
		}
	}
	src.tracef("operator: granted %s's brokers Read on Mirror %s and topic t", dst.clusterID, dst.clusterID)
}
