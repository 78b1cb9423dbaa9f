package kafka

import (
	"context"
	"encoding/base64"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/errcode"
)

// Kafka error codes the package answers itself (the rest come from
// errcode.Info.Kafka).
const (
	unknownServerError  int16 = -1
	unsupportedVersion  int16 = 35
	invalidRequest      int16 = 42
	unknownTopicOrPart  int16 = 3
	requestTimedOut     int16 = 7
	fetchSessionIDError int16 = 70
	invalidTxnState     int16 = 48
	notController       int16 = 41
	unknownTopicID      int16 = 100
	// transactionalIDAuthorizationFailed refuses a transactional
	// InitProducerId (initproducerid.go).
	transactionalIDAuthorizationFailed int16 = 53
)

const apiVersionsKey int16 = 18

// api is one served API: its advertised versions, its handler, the answer
// that fails every entry of a request with one code, and the time a
// request may take.
type api struct {
	min, max int16
	// advertisedMin, when set, is the oldest version ApiVersions lists,
	// below min: versions in between are refused UNSUPPORTED_VERSION.
	advertisedMin *int16
	handle        func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	// start, instead of handle, applies a request when called and returns
	// the wait for its answer (pipeline.go): Produce and OffsetCommit,
	// whose waits (replication, the coordinator's append) may overlap the
	// connection's next requests. The wait must end by ctx's end.
	start   func(ctx context.Context, req kmsg.Request) (wait func() kmsg.Response)
	fail    func(req kmsg.Request, code int16) kmsg.Response
	timeout func(req kmsg.Request) time.Duration
}

// Versions is every API the server answers, with its version range, as
// ApiVersions advertises it.
func (s *Server) Versions() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for k := range int16(kmsg.MaxKey + 1) {
		if a, ok := s.apis[k]; ok {
			lo := a.min
			if a.advertisedMin != nil {
				lo = *a.advertisedMin
			}
			out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: lo, MaxVersion: a.max})
		}
	}
	return out
}

// table is the APIs served. Each handler is in the file named after it.
func (s *Server) table() map[int16]api {
	fixed := func(kmsg.Request) time.Duration { return requestTimeout }
	t := map[int16]api{
		apiVersionsKey: {min: 0, max: 4, handle: s.apiVersions, fail: failAPIVersions, timeout: fixed},
		3:              {min: 0, max: 12, handle: s.metadata, fail: failMetadata, timeout: fixed},
		// Produce is advertised from v0, as Kafka 4.0 does (KAFKA-18659):
		// librdkafka before 2.10 enables gzip, snappy (and lz4) only for a
		// broker whose range includes Produce v2; v0-v2 themselves (the
		// old message formats) are refused.
		0:  {min: 3, max: 13, advertisedMin: new(int16(0)), start: s.startProduce, fail: failProduce, timeout: produceTimeout},
		1:  {min: 4, max: 16, handle: s.fetch, fail: failFetch, timeout: fetchTimeout},
		2:  {min: 1, max: 6, handle: s.listOffsets, fail: failListOffsets, timeout: fixed},
		23: {min: 0, max: 4, handle: s.offsetForLeaderEpoch, fail: failOffsetForLeaderEpoch, timeout: fixed},
		60: {min: 0, max: 1, handle: s.describeCluster, fail: failDescribeCluster, timeout: fixed},
		// InitProducerId: v2 is the first flexible version, v3 adds the
		// producer id and epoch (KIP-360), v4 the PRODUCER_FENCED code
		// (transactional only). v5 (kmsg's last) changes only what a
		// transactional producer may be answered.
		22: {min: 0, max: 4, handle: s.initProducerID, fail: failInitProducerID, timeout: fixed},
	}
	if s.admin != nil {
		t[19] = api{min: 2, max: 7, handle: s.createTopics, fail: failCreateTopics, timeout: fixed}
		t[20] = api{min: 1, max: 6, handle: s.deleteTopics, fail: failDeleteTopics, timeout: fixed}
		t[32] = api{min: 1, max: 4, handle: s.describeConfigs, fail: failDescribeConfigs, timeout: fixed}
		t[44] = api{min: 0, max: 1, handle: s.incrementalAlterConfigs, fail: failIncrementalAlterConfigs, timeout: fixed}
		t[75] = api{min: 0, max: 0, handle: s.describeTopicPartitions, fail: failDescribeTopicPartitions, timeout: fixed}
		// The ACL APIs (acls.go): every version kmsg has, which is Kafka's
		// (v2 the first flexible one, v1 the first with pattern types).
		t[29] = api{min: 0, max: 3, handle: s.describeACLs, fail: failDescribeACLs, timeout: fixed}
		t[30] = api{min: 0, max: 3, handle: s.createACLs, fail: failCreateACLs, timeout: fixed}
		t[31] = api{min: 0, max: 3, handle: s.deleteACLs, fail: failDeleteACLs, timeout: fixed}
		// The SCRAM credential APIs (scramcreds.go): v0, the only version,
		// with or without Config.SASL, as Kafka serves them.
		t[50] = api{min: 0, max: 0, handle: s.describeUserSCRAMCredentials, fail: failDescribeUserSCRAMCredentials, timeout: fixed}
		t[51] = api{min: 0, max: 0, handle: s.alterUserSCRAMCredentials, fail: failAlterUserSCRAMCredentials, timeout: fixed}
	}
	if s.cfg.Groups != nil {
		s.addGroupAPIs(t, fixed)
	}
	if s.cfg.SASL != nil {
		// SaslHandshake v1 only: v0 is followed by raw SASL tokens outside
		// Kafka's framing, which the listener does not read (v0 is answered
		// UNSUPPORTED_VERSION). v0 is advertised all the same, as Kafka
		// does: librdkafka turns SASL off unless the range holds v0, and
		// then sends v1 (make kafka-e2e check 11). SaslAuthenticate: every
		// version (v1 adds the session lifetime, v2 is flexible).
		t[saslHandshakeKey] = api{min: 1, max: 1, advertisedMin: new(int16(0)), handle: s.saslHandshake, fail: failSASLHandshake, timeout: fixed}
		t[saslAuthenticateKey] = api{min: 0, max: 2, handle: s.saslAuthenticate, fail: failSASLAuthenticate, timeout: fixed}
	}
	return t
}

// addGroupAPIs adds the classic consumer-group APIs (groups.go) to t, each
// up to the last version whose meaning the group coordinator serves. The
// ranges meet librdkafka's balanced-consumer feature check (OffsetCommit
// v1..v2, OffsetFetch v1, the others v0).
func (s *Server) addGroupAPIs(t map[int16]api, fixed func(kmsg.Request) time.Duration) {
	// FindCoordinator: v4 batches keys (KIP-699), v5 only adds a
	// transactional code; v6 adds share groups (KIP-932).
	t[10] = api{min: 0, max: 5, handle: s.findCoordinator, fail: failFindCoordinator, timeout: fixed}
	// OffsetCommit: v1 has a commit timestamp per partition that the
	// coordinator does not take, and v0/v1 are gone from Kafka 4.0
	// (KIP-896); v9 is GROUP_ID_NOT_FOUND for an unknown group (the
	// coordinator takes the version); v10 names topics by id.
	t[8] = api{min: 2, max: 9, start: s.startOffsetCommit, fail: failOffsetCommit, timeout: fixed}
	// OffsetFetch: v0 read ZooKeeper; v10 names topics by id.
	t[9] = api{min: 1, max: 9, handle: s.offsetFetch, fail: failOffsetFetch, timeout: fixed}
	// JoinGroup, SyncGroup, Heartbeat, LeaveGroup: every version (kmsg's
	// last is Kafka's).
	t[11] = api{min: 0, max: 9, handle: s.joinGroup, fail: failJoinGroup, timeout: joinGroupTimeout}
	t[14] = api{min: 0, max: 5, handle: s.syncGroup, fail: failSyncGroup,
		timeout: func(kmsg.Request) time.Duration { return syncGroupTimeout }}
	t[12] = api{min: 0, max: 4, handle: s.heartbeat, fail: failHeartbeat, timeout: fixed}
	t[13] = api{min: 0, max: 5, handle: s.leaveGroup, fail: failLeaveGroup, timeout: fixed}
	// DescribeGroups: v6 answers GROUP_ID_NOT_FOUND, with a message, for a
	// group the coordinator describes as Dead (KIP-1043); older versions
	// the Dead state alone.
	t[15] = api{min: 0, max: 6, handle: s.describeGroups, fail: failDescribeGroups, timeout: fixed}
	// ListGroups: v4 filters by state, v5 by type.
	t[16] = api{min: 0, max: 5, handle: s.listGroups, fail: failListGroups, timeout: fixed}
	// DeleteGroups: v2 is the last of Kafka's message specs; kmsg's v3
	// (an error message per group) is left out until Kafka defines it.
	t[42] = api{min: 0, max: 2, handle: s.deleteGroups, fail: failDeleteGroups, timeout: fixed}
	t[47] = api{min: 0, max: 0, handle: s.offsetDelete, fail: failOffsetDelete, timeout: fixed}
}

// apiVersions answers ApiVersions (key 18) with Versions.
func (s *Server) apiVersions(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.SetVersion(req.GetVersion())
	resp.ApiKeys = s.Versions()
	return resp, nil
}

// unsupportedAPIVersions is the v0 answer to an ApiVersions version the
// server does not serve (KIP-511): the client retries with one it finds in
// the list.
func (s *Server) unsupportedAPIVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = unsupportedVersion
	resp.ApiKeys = s.Versions()
	return resp
}

func failAPIVersions(req kmsg.Request, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = code
	return resp
}

// kafkaCode is the Kafka code for a twinlog code (the one table).
func kafkaCode(c pb.ErrorCode) int16 { return errcode.Of(c).Kafka }

// errorCode is the Kafka code for an error a Backend call returned
// instead of an answer: a request the broker refused as malformed
// (Config.InvalidRequest), one that ran out of time, or a failure.
func (s *Server) errorCode(err error) int16 {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return requestTimedOut
	case s.cfg.InvalidRequest != nil && errors.Is(err, s.cfg.InvalidRequest):
		return invalidRequest
	}
	// A forwarded admin request's gRPC status.
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled:
		return requestTimedOut
	case codes.InvalidArgument:
		return invalidRequest
	case codes.Unavailable:
		return notController // retriable: the client refreshes metadata and retries
	case codes.PermissionDenied:
		return deniedCode(status.Convert(err).Message())
	}
	return unknownServerError
}

// deniedCode is the Kafka code of a gRPC PermissionDenied status, whose
// message names the twinlog code (errcode.Denied; security/authz).
func deniedCode(msg string) int16 { return kafkaCode(errcode.Denied(msg)) }

// topicIDString is Kafka's binary topic id in twinlog's string form
// (topicID's inverse).
func topicIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// topicID is a twinlog topic id (16 bytes, base64url as Kafka prints
// Uuids) in Kafka's binary form; zero if it is not one.
func topicID(s string) [16]byte {
	var id [16]byte
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil && len(b) == len(id) {
		copy(id[:], b)
	}
	return id
}
