package kafka

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog/group"
)

// The classic consumer-group APIs (Kafka's GroupCoordinator API keys 8–16,
// 42 and 47). Each handler translates the Kafka message at its version
// into the group package's request, calls Config.Groups and translates the
// answer back; the coordinator decides everything else. Following the
// Groups contract, a nil answer (a JoinGroup or SyncGroup a newer one of
// the same member superseded) sends nothing, and an error (no answer in
// time, or the server closing) fails every entry of the request with the
// error's code (REQUEST_TIMED_OUT).

// syncGroupTimeout bounds a SyncGroup. A follower's SyncGroup waits for
// the leader's assignment, which the leader computes after its own
// JoinGroup returns; clients wait up to their rebalance timeout for it
// (franz-go), but SyncGroup carries none, so the bound is the Java
// consumer's default max.poll.interval.ms, the usual rebalance timeout.
const syncGroupTimeout = 5 * time.Minute

// joinGroupTimeout bounds a JoinGroup: the member's rebalance timeout (v0
// has none and uses the session timeout for both) plus the margin a
// request gets, as clients wait for a JoinGroup their rebalance timeout
// and a few seconds more.
func joinGroupTimeout(kreq kmsg.Request) time.Duration {
	req := kreq.(*kmsg.JoinGroupRequest)
	ms := req.RebalanceTimeoutMillis
	if req.GetVersion() == 0 || ms <= 0 {
		ms = req.SessionTimeoutMillis
	}
	return time.Duration(max(ms, 0))*time.Millisecond + requestTimeout
}

// kafkaClientHost is a client's address as Kafka's brokers report it in
// DescribeGroups (java.net.InetAddress.toString of an address never
// resolved to a name): "/" and the IP, an IPv6 one in Java's form (eight
// hexadecimal groups, none elided). An address that is no IP and port is
// returned as it is.
func kafkaClientHost(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return addr.String()
	}
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		return "/" + ip.String()
	}
	var b strings.Builder
	b.WriteByte('/')
	a := ip.As16()
	for i := 0; i < len(a); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(strconv.FormatUint(uint64(a[i])<<8|uint64(a[i+1]), 16))
	}
	if z := ip.Zone(); z != "" {
		b.WriteString("%" + z)
	}
	return b.String()
}

// optional is s as a nullable string: nil when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// findCoordinator answers FindCoordinator (key 10): one key before v4,
// a batch of keys (KIP-699) from v4, each answered by Groups with its
// coordinator or its code (a key type other than group included).
func (s *Server) findCoordinator(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.SetVersion(req.GetVersion())
	acc := s.access(ctx)
	if req.GetVersion() < 4 {
		// v0 has no key type: it is always a group.
		if code := acc.findCoordinator(req.CoordinatorType, req.CoordinatorKey); code != 0 {
			return failFindCoordinator(req, code), nil
		}
		c, err := s.cfg.Groups.FindCoordinator(ctx, req.CoordinatorType, req.CoordinatorKey)
		if err != nil {
			return failFindCoordinator(req, s.errorCode(err)), nil
		}
		resp.ErrorCode, resp.ErrorMessage = int16(c.ErrorCode), optional(c.Message)
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		if code := acc.findCoordinator(req.CoordinatorType, key); code != 0 {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key, rc.ErrorCode, rc.NodeID, rc.Port = key, code, -1, -1
			resp.Coordinators = append(resp.Coordinators, rc)
			continue
		}
		c, err := s.cfg.Groups.FindCoordinator(ctx, req.CoordinatorType, key)
		if err != nil {
			return failFindCoordinator(req, s.errorCode(err)), nil
		}
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.ErrorCode, rc.ErrorMessage = key, int16(c.ErrorCode), optional(c.Message)
		rc.NodeID, rc.Host, rc.Port = c.NodeID, c.Host, c.Port
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	return resp, nil
}

func failFindCoordinator(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
	if req.GetVersion() >= 4 {
		for _, key := range req.CoordinatorKeys {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key, rc.ErrorCode, rc.NodeID, rc.Port = key, code, -1, -1
			resp.Coordinators = append(resp.Coordinators, rc)
		}
	}
	return resp
}

// joinGroup answers JoinGroup (key 11), once the rebalance it joins
// completes, with the client id of its header and the host of its
// connection. The version goes to the coordinator, which asks a new
// member to rejoin with its id from v4 (KIP-394) and may skip the
// assignment at v9; v0 has no rebalance timeout (0: the session
// timeout's). The reason (v8+) is not passed: Kafka only logs it.
func (s *Server) joinGroup(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	if code := s.access(ctx).groupMember(req.Group); code != 0 {
		return failJoinGroup(req, code), nil
	}
	h := requestHeader(ctx)
	greq := group.JoinGroupRequest{
		Version:            req.GetVersion(),
		GroupID:            req.Group,
		SessionTimeoutMs:   req.SessionTimeoutMillis,
		RebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		MemberID:           req.MemberID,
		GroupInstanceID:    req.InstanceID,
		ProtocolType:       req.ProtocolType,
		ClientID:           h.clientID,
		ClientHost:         h.clientHost,
	}
	if req.GetVersion() == 0 {
		greq.RebalanceTimeoutMs = 0
	}
	for _, p := range req.Protocols {
		greq.Protocols = append(greq.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	gresp, err := s.cfg.Groups.JoinGroup(ctx, greq)
	switch {
	case err != nil:
		return failJoinGroup(req, s.errorCode(err)), nil
	case gresp == nil:
		return nil, nil // superseded: never answered
	}
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode, resp.Generation = int16(gresp.ErrorCode), gresp.GenerationID
	resp.ProtocolType, resp.Protocol = gresp.ProtocolType, gresp.ProtocolName
	resp.LeaderID, resp.SkipAssignment, resp.MemberID = gresp.Leader, gresp.SkipAssignment, gresp.MemberID
	for _, m := range gresp.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, m.GroupInstanceID, m.Metadata
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

// failJoinGroup answers as Kafka's JoinGroupRequest.getErrorResponse: no
// generation, protocol, leader or member id.
func failJoinGroup(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode, resp.Generation = code, -1
	return resp
}

// syncGroup answers SyncGroup (key 14): the leader sends the assignment,
// every member gets its own once it is durable. The protocol type and
// name (v5+, KIP-559) are checked by the coordinator and echoed back.
func (s *Server) syncGroup(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	if code := s.access(ctx).groupMember(req.Group); code != 0 {
		return failSyncGroup(req, code), nil
	}
	greq := group.SyncGroupRequest{
		GroupID:         req.Group,
		GenerationID:    req.Generation,
		MemberID:        req.MemberID,
		GroupInstanceID: req.InstanceID,
		ProtocolType:    req.ProtocolType,
		ProtocolName:    req.Protocol,
	}
	for _, a := range req.GroupAssignment {
		greq.Assignments = append(greq.Assignments, group.SyncAssignment{MemberID: a.MemberID, Assignment: a.MemberAssignment})
	}
	gresp, err := s.cfg.Groups.SyncGroup(ctx, greq)
	switch {
	case err != nil:
		return failSyncGroup(req, s.errorCode(err)), nil
	case gresp == nil:
		return nil, nil // superseded: never answered
	}
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = int16(gresp.ErrorCode)
	resp.ProtocolType, resp.Protocol = gresp.ProtocolType, gresp.ProtocolName
	resp.MemberAssignment = gresp.Assignment
	return resp, nil
}

func failSyncGroup(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = code
	return resp
}

// heartbeat answers Heartbeat (key 12).
func (s *Server) heartbeat(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	if code := s.access(ctx).groupMember(req.Group); code != 0 {
		return failHeartbeat(req, code), nil
	}
	gresp, err := s.cfg.Groups.Heartbeat(ctx, group.HeartbeatRequest{
		GroupID:         req.Group,
		GenerationID:    req.Generation,
		MemberID:        req.MemberID,
		GroupInstanceID: req.InstanceID,
	})
	switch {
	case err != nil:
		return failHeartbeat(req, s.errorCode(err)), nil
	case gresp == nil:
		return nil, nil
	}
	return failHeartbeat(req, int16(gresp.ErrorCode)), nil // the code is the whole answer
}

func failHeartbeat(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = code
	return resp
}

// leaveGroup answers LeaveGroup (key 13). Before v3 the request names one
// member and the response has one code: the group's, or if that is NONE
// the member's (as Kafka's LeaveGroupResponse folds them). From v3 it is
// a batch of members by id or instance id (KIP-345), each with its code;
// the reason (v5+) is not passed: Kafka only logs it.
func (s *Server) leaveGroup(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	if code := s.access(ctx).groupMember(req.Group); code != 0 {
		return failLeaveGroup(req, code), nil
	}
	greq := group.LeaveGroupRequest{GroupID: req.Group}
	if req.GetVersion() < 3 {
		greq.Members = []group.LeaveMember{{MemberID: req.MemberID}}
	}
	for _, m := range req.Members {
		greq.Members = append(greq.Members, group.LeaveMember{MemberID: m.MemberID, GroupInstanceID: m.InstanceID})
	}
	gresp, err := s.cfg.Groups.LeaveGroup(ctx, greq)
	switch {
	case err != nil:
		return failLeaveGroup(req, s.errorCode(err)), nil
	case gresp == nil:
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = int16(gresp.ErrorCode)
	if req.GetVersion() < 3 {
		for _, m := range gresp.Members {
			if resp.ErrorCode == 0 {
				resp.ErrorCode = int16(m.ErrorCode)
			}
		}
		return resp, nil
	}
	for _, m := range gresp.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.GroupInstanceID, int16(m.ErrorCode)
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

func failLeaveGroup(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = code
	for _, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, code
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

// startOffsetCommit answers OffsetCommit (key 8) from v2, pipelined (the
// commit is in the coordinator's state when it returns; pipeline.go): the
// retention time of v2–4 (−1 from v5, the broker's retention), the leader
// epoch from v6 (−1 before), the instance id from v7. The version goes to the
// coordinator: from v9 a commit to a group that does not exist is
// GROUP_ID_NOT_FOUND. Topics and partitions pass as they are named; those
// of topics the principal may not Read are answered after the others, and
// a commit of no topic it may Read is not asked at all (as Kafka).
func (s *Server) startOffsetCommit(ctx context.Context, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.OffsetCommitRequest)
	groupCode, denied := s.access(ctx).offsetCommit(req)
	if groupCode != 0 {
		return answered(failOffsetCommit(req, groupCode))
	}
	greq := group.OffsetCommitRequest{
		Version:         req.GetVersion(),
		GroupID:         req.Group,
		GenerationID:    req.Generation,
		MemberID:        req.MemberID,
		GroupInstanceID: req.InstanceID,
		RetentionTimeMs: req.RetentionTimeMillis,
	}
	if req.GetVersion() >= 5 {
		greq.RetentionTimeMs = -1
	}
	for _, t := range req.Topics {
		if denied[t.Topic] {
			continue
		}
		ct := group.CommitTopic{Name: t.Topic}
		for _, p := range t.Partitions {
			cp := group.CommitPartition{Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata}
			if req.GetVersion() < 6 {
				cp.LeaderEpoch = -1
			}
			ct.Partitions = append(ct.Partitions, cp)
		}
		greq.Topics = append(greq.Topics, ct)
	}
	// deniedTopics answers the denied topics after resp's.
	deniedTopics := func(resp *kmsg.OffsetCommitResponse) kmsg.Response {
		failed := failOffsetCommit(req, topicAuthorizationFailed).(*kmsg.OffsetCommitResponse)
		for _, rt := range failed.Topics {
			if denied[rt.Topic] {
				resp.Topics = append(resp.Topics, rt)
			}
		}
		return resp
	}
	if len(denied) > 0 && len(greq.Topics) == 0 {
		return answered(failOffsetCommit(req, topicAuthorizationFailed))
	}
	wait := Begin(ctx, func(done func(*group.OffsetCommitResponse, error)) func() {
		return s.cfg.Groups.StartOffsetCommit(greq, done)
	})
	return func() kmsg.Response {
		gresp, err := wait()
		switch {
		case err != nil:
			resp := failOffsetCommit(req, s.errorCode(err)).(*kmsg.OffsetCommitResponse)
			resp.Topics = slices.DeleteFunc(resp.Topics, func(rt kmsg.OffsetCommitResponseTopic) bool { return denied[rt.Topic] })
			return deniedTopics(resp)
		case gresp == nil:
			return nil
		}
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.SetVersion(req.GetVersion())
		for _, t := range gresp.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Name
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, int16(p.ErrorCode)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return deniedTopics(resp)
	}
}

func failOffsetCommit(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.SetVersion(req.GetVersion())
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// offsetFetch answers OffsetFetch (key 9) from v1 (v0 read ZooKeeper): the
// partitions asked, or from v2 every committed one when the topics are
// null; a group's code is the response's from v2 and, before, every
// partition's (v1 has no group-level code), as Kafka answers. From v8 the
// request is a batch of groups, each asked of Groups on its own. The
// leader epoch goes out from v5. RequireStable (v7+) needs nothing: with
// no transactions every offset is stable. The member id and epoch of v9
// are the new consumer protocol's (KIP-848), checked only for its groups,
// so they are not passed.
//
// A group the principal may not Describe is not asked (every partition
// GROUP_AUTHORIZATION_FAILED); a listed topic it may not Describe is not
// asked either (TOPIC_AUTHORIZATION_FAILED on each partition, after the
// others), and such topics are left out of "every committed one".
func (s *Server) offsetFetch(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	if req.GetVersion() >= 8 {
		return s.offsetFetchGroups(ctx, req)
	}
	acc := s.access(ctx)
	if code := acc.offsetFetchGroup(req.Group); code != 0 {
		return failOffsetFetch(req, code), nil
	}
	// asked is the request without the denied topics.
	asked := *req
	var denied []kmsg.OffsetFetchRequestTopic
	asked.Topics, denied = splitTopics(req.Topics, func(t *kmsg.OffsetFetchRequestTopic) bool { return acc.offsetFetchTopic(t.Topic) })
	greq := group.OffsetFetchRequest{GroupID: req.Group}
	if asked.Topics != nil || req.GetVersion() < 2 {
		greq.Topics = make([]group.FetchTopic, 0, len(asked.Topics))
	}
	for _, t := range asked.Topics {
		greq.Topics = append(greq.Topics, group.FetchTopic{Name: t.Topic, Partitions: t.Partitions})
	}
	gresp, err := s.cfg.Groups.OffsetFetch(ctx, greq)
	var resp *kmsg.OffsetFetchResponse
	switch {
	case err != nil:
		resp = failOffsetFetch(&asked, s.errorCode(err)).(*kmsg.OffsetFetchResponse)
	case gresp == nil:
		return nil, nil
	case gresp.ErrorCode != group.None && req.GetVersion() < 2:
		resp = failOffsetFetch(&asked, int16(gresp.ErrorCode)).(*kmsg.OffsetFetchResponse)
	default:
		resp = req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.SetVersion(req.GetVersion())
		resp.ErrorCode = int16(gresp.ErrorCode)
		for _, t := range gresp.Topics {
			if !acc.offsetFetchTopic(t.Name) {
				continue // every committed topic was asked: not this one
			}
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Name
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, fetchedPartition(p))
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	for _, t := range denied {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, failedFetchPartition(p, topicAuthorizationFailed))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// splitTopics splits ts into the topics allowed and those denied; a null
// list stays null (every topic), a list whose topics are all denied
// becomes empty (none).
func splitTopics[T any](ts []T, allowed func(*T) bool) (yes, no []T) {
	if ts == nil {
		return nil, nil
	}
	yes = make([]T, 0, len(ts))
	for i := range ts {
		if allowed(&ts[i]) {
			yes = append(yes, ts[i])
		} else {
			no = append(no, ts[i])
		}
	}
	return yes, no
}

// fetchGroupPlan is what a v8+ OffsetFetch asks of Groups for one group:
// nothing if the group is denied (code), else the group without its
// denied topics.
type fetchGroupPlan struct {
	code   int16
	asked  kmsg.OffsetFetchRequestGroup
	denied []kmsg.OffsetFetchRequestGroupTopic
}

// offsetFetchGroups answers a v8+ OffsetFetch, one Groups call per group
// the principal may describe.
func (s *Server) offsetFetchGroups(ctx context.Context, req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	acc := s.access(ctx)
	plans := make([]fetchGroupPlan, len(req.Groups))
	for i, g := range req.Groups {
		plans[i] = fetchGroupPlan{code: acc.offsetFetchGroup(g.Group), asked: g}
		if plans[i].code == 0 {
			plans[i].asked.Topics, plans[i].denied = splitTopics(g.Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) bool { return acc.offsetFetchTopic(t.Topic) })
		}
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	resp.SetVersion(req.GetVersion())
	for _, p := range plans {
		if p.code != 0 {
			resp.Groups = append(resp.Groups, failedFetchGroup(p.asked, p.code))
			continue
		}
		g := p.asked
		greq := group.OffsetFetchRequest{GroupID: g.Group}
		if g.Topics != nil {
			greq.Topics = make([]group.FetchTopic, 0, len(g.Topics))
		}
		for _, t := range g.Topics {
			greq.Topics = append(greq.Topics, group.FetchTopic{Name: t.Topic, Partitions: t.Partitions})
		}
		gresp, err := s.cfg.Groups.OffsetFetch(ctx, greq)
		switch {
		case err != nil:
			return failFetchPlans(req, plans, s.errorCode(err)), nil
		case gresp == nil:
			return nil, nil
		}
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.Group, int16(gresp.ErrorCode)
		for _, t := range gresp.Topics {
			if !acc.offsetFetchTopic(t.Name) {
				continue // every committed topic was asked: not this one
			}
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t.Name
			for _, p := range t.Partitions {
				// The per-group partition has the same fields.
				rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition(fetchedPartition(p)))
			}
			rg.Topics = append(rg.Topics, rt)
		}
		rg.Topics = append(rg.Topics, failedFetchGroupTopics(p.denied, topicAuthorizationFailed)...)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// failFetchPlans fails a v8+ OffsetFetch with code, but for what the
// principal may not describe, which keeps its authorization code.
func failFetchPlans(req *kmsg.OffsetFetchRequest, plans []fetchGroupPlan, code int16) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = code
	for _, p := range plans {
		if p.code != 0 {
			resp.Groups = append(resp.Groups, failedFetchGroup(p.asked, p.code))
			continue
		}
		rg := failedFetchGroup(p.asked, code)
		rg.Topics = append(rg.Topics, failedFetchGroupTopics(p.denied, topicAuthorizationFailed)...)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// fetchedPartition is one partition's committed offset in OffsetFetch.
func fetchedPartition(p group.FetchedPartition) kmsg.OffsetFetchResponseTopicPartition {
	rp := kmsg.NewOffsetFetchResponseTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = p.Partition, p.Offset, p.LeaderEpoch
	rp.Metadata, rp.ErrorCode = &p.Metadata, int16(p.ErrorCode)
	return rp
}

// failedFetchPartition is a partition failed with code, with no offset.
func failedFetchPartition(p int32, code int16) kmsg.OffsetFetchResponseTopicPartition {
	return fetchedPartition(group.FetchedPartition{Partition: p, Offset: -1, LeaderEpoch: -1, ErrorCode: group.ErrorCode(code)})
}

// failedFetchGroupTopics are a v8+ group's topics, every partition failed
// with code.
func failedFetchGroupTopics(ts []kmsg.OffsetFetchRequestGroupTopic, code int16) []kmsg.OffsetFetchResponseGroupTopic {
	var out []kmsg.OffsetFetchResponseGroupTopic
	for _, t := range ts {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition(failedFetchPartition(p, code)))
		}
		out = append(out, rt)
	}
	return out
}

// failedFetchGroup is a v8+ group failed with code, its listed partitions
// too.
func failedFetchGroup(g kmsg.OffsetFetchRequestGroup, code int16) kmsg.OffsetFetchResponseGroup {
	rg := kmsg.NewOffsetFetchResponseGroup()
	rg.Group, rg.ErrorCode = g.Group, code
	rg.Topics = failedFetchGroupTopics(g.Topics, code)
	return rg
}

// failOffsetFetch fails the group (v2+) and every partition asked, with
// no offset: Kafka's v0–1 answer to a group's error, and the same shape
// at later versions (where clients read the group's code first).
func failOffsetFetch(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = code
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, failedFetchPartition(p, code))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, g := range req.Groups {
		resp.Groups = append(resp.Groups, failedFetchGroup(g, code))
	}
	return resp
}

// listGroups answers ListGroups (key 16) with the groups of every
// coordinator on this broker, filtered by state (v4+, KIP-518) and type
// (v5+, KIP-848), and by what the principal may describe.
func (s *Server) listGroups(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListGroupsRequest)
	gresp, err := s.cfg.Groups.ListGroups(ctx, group.ListGroupsRequest{StatesFilter: req.StatesFilter, TypesFilter: req.TypesFilter})
	switch {
	case err != nil:
		return failListGroups(req, s.errorCode(err)), nil
	case gresp == nil:
		return nil, nil
	}
	acc := s.access(ctx)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = int16(gresp.ErrorCode)
	for _, g := range gresp.Groups {
		if !acc.listGroup(g.GroupID) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.GroupID, g.ProtocolType, g.GroupState, g.GroupType
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

func failListGroups(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = code
	return resp
}

// describeGroups answers DescribeGroups (key 15), the instance ids going
// out from v4. Authorized operations (v3+) are never computed: the answer
// is Kafka's "not requested" value even when asked. A group the principal
// may not Describe is not asked: GROUP_AUTHORIZATION_FAILED, after the
// others (as Kafka lists them).
func (s *Server) describeGroups(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	acc := s.access(ctx)
	asked, denied := splitGroups(req.Groups, acc.describeGroup)
	var described []group.DescribedGroup
	if len(asked) > 0 || len(denied) == 0 {
		var err error
		if described, err = s.cfg.Groups.DescribeGroups(ctx, asked); err != nil {
			resp := failDescribeGroups(req, s.errorCode(err)).(*kmsg.DescribeGroupsResponse)
			for i := range resp.Groups {
				if code := acc.describeGroup(resp.Groups[i].Group); code != 0 {
					resp.Groups[i].ErrorCode = code
				}
			}
			return resp, nil
		}
	}
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	resp.SetVersion(req.GetVersion())
	for _, g := range described {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.ErrorCode, rg.Group, rg.State = int16(g.ErrorCode), g.GroupID, g.GroupState
		rg.ProtocolType, rg.Protocol = g.ProtocolType, g.ProtocolData
		rg.AuthorizedOperations = authorizedOperationsOmitted
		if req.GetVersion() >= 6 && g.ErrorCode == group.None && g.GroupState == group.Dead.String() {
			// KIP-1043: a group that does not exist (or is being deleted)
			// is an error from v6, no longer a Dead group without members.
			rg.ErrorCode = int16(group.GroupIDNotFound)
			rg.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("group %q not found", g.GroupID))
		}
		for _, m := range g.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, m.GroupInstanceID, m.ClientID, m.ClientHost
			rm.ProtocolMetadata, rm.MemberAssignment = m.MemberMetadata, m.MemberAssignment
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	for _, id := range denied {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode, rg.AuthorizedOperations = id, groupAuthorizationFailed, authorizedOperationsOmitted
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// splitGroups splits group ids into those whose decision is 0 and the
// others, each in order (ids itself when none is denied).
func splitGroups(ids []string, decide func(string) int16) (asked, denied []string) {
	for _, id := range ids {
		if decide(id) == 0 {
			asked = append(asked, id)
		} else {
			denied = append(denied, id)
		}
	}
	if denied == nil {
		return ids, nil
	}
	return asked, denied
}

func failDescribeGroups(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	resp.SetVersion(req.GetVersion())
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode, rg.AuthorizedOperations = id, code, authorizedOperationsOmitted
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// deleteGroups answers DeleteGroups (key 42). A group the principal may
// not Delete is not asked: GROUP_AUTHORIZATION_FAILED, after the others.
func (s *Server) deleteGroups(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	acc := s.access(ctx)
	asked, denied := splitGroups(req.Groups, acc.deleteGroup)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.SetVersion(req.GetVersion())
	if len(asked) > 0 || len(denied) == 0 {
		gresp, err := s.cfg.Groups.DeleteGroups(ctx, asked)
		switch {
		case err != nil:
			resp := failDeleteGroups(req, s.errorCode(err)).(*kmsg.DeleteGroupsResponse)
			for i := range resp.Groups {
				if code := acc.deleteGroup(resp.Groups[i].Group); code != 0 {
					resp.Groups[i].ErrorCode = code
				}
			}
			return resp, nil
		case gresp == nil:
			return nil, nil
		}
		for _, g := range gresp.Results {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g.GroupID, int16(g.ErrorCode)
			resp.Groups = append(resp.Groups, rg)
		}
	}
	for _, id := range denied {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = id, groupAuthorizationFailed
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

func failDeleteGroups(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.SetVersion(req.GetVersion())
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = id, code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// offsetDelete answers OffsetDelete (key 47, KIP-496). The group needs
// Delete (else every partition is GROUP_AUTHORIZATION_FAILED), each topic
// Read: a denied topic is not asked (TOPIC_AUTHORIZATION_FAILED on each
// partition, after the others), and a request of no topic the principal
// may Read is not asked at all.
func (s *Server) offsetDelete(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	groupCode, denied := s.access(ctx).offsetDelete(req)
	if groupCode != 0 {
		return failOffsetDelete(req, groupCode), nil
	}
	greq := group.OffsetDeleteRequest{GroupID: req.Group}
	for _, t := range req.Topics {
		if denied[t.Topic] {
			continue
		}
		ft := group.FetchTopic{Name: t.Topic, Partitions: make([]int32, 0, len(t.Partitions))}
		for _, p := range t.Partitions {
			ft.Partitions = append(ft.Partitions, p.Partition)
		}
		greq.Topics = append(greq.Topics, ft)
	}
	// deniedTopics answers the denied topics after resp's.
	deniedTopics := func(resp *kmsg.OffsetDeleteResponse) kmsg.Response {
		for _, rt := range failOffsetDelete(req, topicAuthorizationFailed).(*kmsg.OffsetDeleteResponse).Topics {
			if denied[rt.Topic] {
				resp.Topics = append(resp.Topics, rt)
			}
		}
		return resp
	}
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.SetVersion(req.GetVersion())
	if len(denied) > 0 && len(greq.Topics) == 0 {
		return deniedTopics(resp), nil
	}
	gresp, err := s.cfg.Groups.OffsetDelete(ctx, greq)
	switch {
	case err != nil:
		resp := failOffsetDelete(req, s.errorCode(err)).(*kmsg.OffsetDeleteResponse)
		resp.Topics = slices.DeleteFunc(resp.Topics, func(rt kmsg.OffsetDeleteResponseTopic) bool { return denied[rt.Topic] })
		return deniedTopics(resp), nil
	case gresp == nil:
		return nil, nil
	}
	resp.ErrorCode = int16(gresp.ErrorCode)
	for _, t := range gresp.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Name
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, int16(p.ErrorCode)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return deniedTopics(resp), nil
}

func failOffsetDelete(kreq kmsg.Request, code int16) kmsg.Response {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.SetVersion(req.GetVersion())
	resp.ErrorCode = code
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
