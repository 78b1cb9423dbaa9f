package group

import "github.com/twinlog/twinlog"

// Ref is the host's handle for one request: any value it chooses, handed
// back with the request's Response.
type Ref uint64

// Protocol is one assignment protocol a member supports, with its
// metadata (for the consumer protocol, the member's subscription).
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinGroupRequest is a JoinGroup (API 11) with its request context.
type JoinGroupRequest struct {
	// Version is the request's API version: from 4 a member without an id
	// first gets one with MEMBER_ID_REQUIRED (KIP-394); from 9 a static
	// member replaced while Stable may skip the assignment.
	Version          int16
	GroupID          string
	SessionTimeoutMs int32
	// RebalanceTimeoutMs is how long the coordinator waits for the members
	// to rejoin; v0 has none and a value ≤ 0 means SessionTimeoutMs.
	RebalanceTimeoutMs int32
	// MemberID is "" on a member's first join.
	MemberID string
	// GroupInstanceID is a static member's group.instance.id (KIP-345),
	// nil for a dynamic member.
	GroupInstanceID *string
	ProtocolType    string
	// Protocols are in the member's order of preference.
	Protocols []Protocol
	// ClientID and ClientHost come from the request header and the
	// connection.
	ClientID, ClientHost string
}

// JoinGroupMember is one member in the leader's JoinGroup response.
type JoinGroupMember struct {
	MemberID        string
	GroupInstanceID *string
	Metadata        []byte
}

// JoinGroupResponse answers a JoinGroup.
type JoinGroupResponse struct {
	ErrorCode    ErrorCode
	GenerationID int32
	ProtocolType *string
	ProtocolName *string
	Leader       string
	// SkipAssignment (v9+): the leader keeps the current assignment.
	SkipAssignment bool
	MemberID       string
	// Members is filled for the leader only, sorted by member id.
	Members []JoinGroupMember
}

// SyncAssignment is one member's assignment in the leader's SyncGroup.
type SyncAssignment struct {
	MemberID   string
	Assignment []byte
}

// SyncGroupRequest is a SyncGroup (API 14).
type SyncGroupRequest struct {
	GroupID         string
	GenerationID    int32
	MemberID        string
	GroupInstanceID *string
	// ProtocolType and ProtocolName (v5+) are checked against the group's
	// when both are known; nil skips the check.
	ProtocolType, ProtocolName *string
	// Assignments is the leader's assignment; followers send none.
	Assignments []SyncAssignment
}

// SyncGroupResponse answers a SyncGroup.
type SyncGroupResponse struct {
	ErrorCode                  ErrorCode
	ProtocolType, ProtocolName *string
	Assignment                 []byte
}

// HeartbeatRequest is a Heartbeat (API 12).
type HeartbeatRequest struct {
	GroupID         string
	GenerationID    int32
	MemberID        string
	GroupInstanceID *string
}

// HeartbeatResponse answers a Heartbeat.
type HeartbeatResponse struct {
	ErrorCode ErrorCode
}

// LeaveMember is one leaving member of a LeaveGroup; MemberID "" with a
// GroupInstanceID removes that static member (an admin's removal).
type LeaveMember struct {
	MemberID        string
	GroupInstanceID *string
}

// LeaveGroupRequest is a LeaveGroup (API 13) in its v3+ batch form; the
// host turns a v0–2 request's single member id into one LeaveMember and
// answers it with the member's code.
type LeaveGroupRequest struct {
	GroupID string
	Members []LeaveMember
}

// LeaveMemberResponse is one member's result.
type LeaveMemberResponse struct {
	MemberID        string
	GroupInstanceID *string
	ErrorCode       ErrorCode
}

// LeaveGroupResponse answers a LeaveGroup.
type LeaveGroupResponse struct {
	ErrorCode ErrorCode
	Members   []LeaveMemberResponse
}

// CommitPartition is one partition of an OffsetCommit.
type CommitPartition struct {
	Partition   int32
	Offset      int64
	LeaderEpoch int32 // -1 for none (v0–5)
	Metadata    *string
}

// CommitTopic is one topic of an OffsetCommit.
type CommitTopic struct {
	Name       string
	Partitions []CommitPartition
}

// OffsetCommitRequest is an OffsetCommit (API 8).
type OffsetCommitRequest struct {
	// Version is the API version: from 9 a commit to a group that does not
	// exist is GROUP_ID_NOT_FOUND, before ILLEGAL_GENERATION.
	Version int16
	GroupID string
	// GenerationID is -1 for a simple consumer (no group management).
	GenerationID    int32
	MemberID        string
	GroupInstanceID *string
	// RetentionTimeMs (v2–4) sets an explicit expiry, -1 for the broker's
	// retention.
	RetentionTimeMs int64
	Topics          []CommitTopic
}

// PartitionResult is one partition's error code.
type PartitionResult struct {
	Partition int32
	ErrorCode ErrorCode
}

// TopicResult is one topic's partitions' codes.
type TopicResult struct {
	Name       string
	Partitions []PartitionResult
}

// OffsetCommitResponse answers an OffsetCommit, in the request's order.
type OffsetCommitResponse struct {
	Topics []TopicResult
}

// FetchTopic names partitions of one topic.
type FetchTopic struct {
	Name       string
	Partitions []int32
}

// OffsetFetchRequest is one group of an OffsetFetch (API 9). RequireStable
// (v7+) needs no handling: without transactions every offset is stable.
type OffsetFetchRequest struct {
	GroupID string
	// Topics nil asks for every committed offset of the group.
	Topics []FetchTopic
}

// FetchedPartition is one partition's committed offset: -1 (and leader
// epoch -1, metadata "") when there is none.
type FetchedPartition struct {
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	ErrorCode   ErrorCode
}

// FetchedTopic is one topic's committed offsets.
type FetchedTopic struct {
	Name       string
	Partitions []FetchedPartition
}

// OffsetFetchResponse answers one group of an OffsetFetch: the listed
// partitions in the request's order, or every committed one sorted by topic
// and partition.
type OffsetFetchResponse struct {
	GroupID   string
	ErrorCode ErrorCode
	Topics    []FetchedTopic
}

// ListGroupsRequest is a ListGroups (API 16) with its v4/v5 filters
// (case-insensitive; empty means all).
type ListGroupsRequest struct {
	StatesFilter []string
	TypesFilter  []string
}

// ListedGroup is one group of a ListGroups response.
type ListedGroup struct {
	GroupID      string
	ProtocolType string
	GroupState   string
	GroupType    string
}

// ListGroupsResponse answers a ListGroups, sorted by group id.
type ListGroupsResponse struct {
	ErrorCode ErrorCode
	Groups    []ListedGroup
}

// DescribedMember is one member of a DescribeGroups response.
type DescribedMember struct {
	MemberID         string
	GroupInstanceID  *string
	ClientID         string
	ClientHost       string
	MemberMetadata   []byte // Stable groups only
	MemberAssignment []byte
}

// DescribedGroup is one group of a DescribeGroups (API 15) response.
type DescribedGroup struct {
	ErrorCode    ErrorCode
	GroupID      string
	GroupState   string
	ProtocolType string
	// ProtocolData is the chosen protocol, for Stable groups.
	ProtocolData string
	// Members are sorted by member id.
	Members []DescribedMember
}

// DeletedGroup is one group's result in DeleteGroups (API 42).
type DeletedGroup struct {
	GroupID   string
	ErrorCode ErrorCode
}

// DeleteGroupsResponse answers a DeleteGroups, in the request's order.
type DeleteGroupsResponse struct {
	Results []DeletedGroup
}

// OffsetDeleteRequest is an OffsetDelete (API 47).
type OffsetDeleteRequest struct {
	GroupID string
	Topics  []FetchTopic
}

// OffsetDeleteResponse answers an OffsetDelete.
type OffsetDeleteResponse struct {
	ErrorCode ErrorCode
	Topics    []TopicResult
}

// Superseded answers a JoinGroup or SyncGroup that a newer request of the
// same member replaced while it waited: Kafka's coordinator never answers
// it (the client stopped waiting when it sent the newer one), so the host
// forgets the request and sends nothing.
type Superseded struct{}

// ResponseBody is one of the response types above (pointers).
type ResponseBody interface {
	// withError is the same response failed with code, for requests the
	// coordinator cannot answer anymore (Unload).
	withError(code ErrorCode) ResponseBody
}

func (r *JoinGroupResponse) withError(code ErrorCode) ResponseBody {
	return &JoinGroupResponse{ErrorCode: code, GenerationID: -1, MemberID: r.MemberID}
}
func (r *SyncGroupResponse) withError(code ErrorCode) ResponseBody {
	return &SyncGroupResponse{ErrorCode: code}
}
func (r *HeartbeatResponse) withError(code ErrorCode) ResponseBody {
	return &HeartbeatResponse{ErrorCode: code}
}
func (r *LeaveGroupResponse) withError(code ErrorCode) ResponseBody {
	return &LeaveGroupResponse{ErrorCode: code}
}
func (r *OffsetCommitResponse) withError(code ErrorCode) ResponseBody {
	return &OffsetCommitResponse{Topics: failTopics(r.Topics, code)}
}
func (r *DeleteGroupsResponse) withError(code ErrorCode) ResponseBody {
	out := &DeleteGroupsResponse{Results: make([]DeletedGroup, len(r.Results))}
	for i, g := range r.Results {
		out.Results[i] = DeletedGroup{GroupID: g.GroupID, ErrorCode: code}
	}
	return out
}
func (r *OffsetDeleteResponse) withError(code ErrorCode) ResponseBody {
	return &OffsetDeleteResponse{ErrorCode: code}
}
func (r *Superseded) withError(ErrorCode) ResponseBody { return r }

// failTopics is topics with every partition's code set to code.
func failTopics(topics []TopicResult, code ErrorCode) []TopicResult {
	out := make([]TopicResult, len(topics))
	for i, t := range topics {
		out[i] = TopicResult{Name: t.Name, Partitions: make([]PartitionResult, len(t.Partitions))}
		for j, p := range t.Partitions {
			out[i].Partitions[j] = PartitionResult{Partition: p.Partition, ErrorCode: code}
		}
	}
	return out
}

// Response is an answer to send: Body answers the request the host called
// with Ref.
type Response struct {
	Ref  Ref
	Body ResponseBody
}

// AppendID names one Append.
type AppendID uint64

// Append is a batch of records for the coordinator's __consumer_offsets
// partition, to be appended as one batch (atomically) with acks=all.
type Append struct {
	ID      AppendID
	Records []Record
}

// NoTick is Ready.TickAtMs when no timer is set.
const NoTick int64 = -1

// Ready is what the host does after calling the coordinator, in order:
// append Appends (each as one batch, in order) and report each outcome
// with Appended or AppendFailed; send Responses now; call Tick at TickAtMs.
type Ready struct {
	Appends   []Append
	Responses []Response
	// TickAtMs is the earliest timer deadline (NoTick when none): call
	// Tick at or after it. It may be at or before the current time.
	TickAtMs int64
}

// OffsetAndMetadata is a committed offset as stored.
type OffsetAndMetadata struct {
	Offset      int64
	LeaderEpoch int32 // -1 for none
	Metadata    string
	// CommitTimestampMs is when the coordinator took the commit.
	CommitTimestampMs int64
	// ExpireTimestampMs is an explicit expiry (OffsetCommit v2–4
	// retention), -1 for none.
	ExpireTimestampMs int64
}

// topicPartition is a shorter name for the shared type.
type topicPartition = twinlog.TopicPartition
