// Package group is the group coordinator of Kafka's classic group protocol
// as a pure state machine: the consumer groups of one __consumer_offsets
// partition, their membership and rebalances, and their committed offsets
// (issue 16). A group's coordinator is the leader of partition
// PartitionFor(groupID, n) of __consumer_offsets, as Kafka clients and
// tools compute it for FindCoordinator; its state lives in that partition
// as Kafka's own records, so a new leader resumes by replaying them.
//
// The behaviour follows Kafka's group coordinator (group-coordinator
// module: GroupMetadataManager's classic group methods, ClassicGroup,
// OffsetMetadataManager, GroupCoordinatorShard.cleanupGroupMetadata) and
// the message specs of JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups and
// OffsetDelete; the names of the methods that port Kafka's keep them.
//
// # The model
//
// A group is Empty, PreparingRebalance, CompletingRebalance, Stable or
// Dead (being deleted). A rebalance starts when a member joins, changes its
// protocols, leaves or expires, or when the leader rejoins. Each member
// joins with its protocols in order of preference; the generation's
// protocol is one every member supports, picked by the members' votes.
// The join phase ends when every known member has rejoined, or at the
// largest rebalance timeout (members that did not rejoin are dropped;
// static ones are waited for), or, for a new group, after the initial
// rebalance delay, extended while new members keep arriving. Then the
// generation increments, every rejoined member gets its JoinGroup response
// (the leader with the member list) and the group waits for the leader's
// SyncGroup; its assignment is written as the group's metadata record, and
// once that is durable every member gets its part (followers that synced
// first were parked) and the group is Stable. Members that do not sync
// within the rebalance timeout are removed.
//
// A member id is handed out on the first join: a v4+ JoinGroup without
// one gets MEMBER_ID_REQUIRED with an id to join with (KIP-394). A static
// member (group.instance.id, KIP-345) keeps its place across restarts: a
// join with its instance id and no member id replaces the old member id
// (fencing it with FENCED_INSTANCE_ID), without a rebalance when the group
// is Stable and its protocol would not change. Heartbeats keep a member's
// session and answer REBALANCE_IN_PROGRESS during a rebalance,
// ILLEGAL_GENERATION for another generation, UNKNOWN_MEMBER_ID or
// FENCED_INSTANCE_ID for a stranger. group.max.size bounds the members.
//
// Offsets are committed by a member in its generation (not while the
// generation waits for its assignment), or by a simple consumer
// (generation -1) while the group is Empty; a simple consumer's commit
// creates the group. OffsetFetch reads durable commits only. Offsets
// expire offsets.retention.minutes after their group became Empty (Kafka
// 2.1+; after the commit for a group without protocol type; for a Stable
// consumer group, offsets of topics it no longer subscribes to, after the
// commit); an Empty group left without offsets is deleted. DeleteGroups
// deletes Empty groups; OffsetDelete deletes offsets of topics the group
// does not consume.
//
// # The host contract
//
// The coordinator has no clock, goroutines, I/O or logging. Every call
// takes nowMs (never decreasing), and afterwards the host takes Ready:
//
//  1. Appends: each is one batch of records for the partition, appended in
//     order with acks=all. When one is durable the host calls Appended;
//     when one was rejected before being written (it will never be in the
//     log), AppendFailed with the log's error code. Outcomes are reported
//     in order. If an outcome is unknown (a timeout after writing), or the
//     partition's leadership moves, the host calls Unload and the next
//     leader loads the partition.
//  2. Responses: sent now. A request's answer waits until every append
//     made before it is durable (Kafka's runtime completes a write when
//     the high watermark passes its last written offset), so no answer
//     rests on records a failover could lose; answers that depend on an
//     append (an offset commit, the leader's assignment, a deletion) come
//     from its outcome. (Membership that lives only in memory, a
//     rebalance under way, is lost by a failover, as in Kafka: its
//     members rejoin.) Some requests are answered by a later call: a
//     JoinGroup when its rebalance completes, a follower's SyncGroup when
//     the leader's assignment is durable. The host matches answers to
//     requests by the Ref it passed. A Superseded answer says Kafka would
//     never answer that request: the host forgets it. The reads
//     (OffsetFetch, ListGroups, DescribeGroups) return their answer
//     directly: durable offsets, and the membership as it is.
//  3. TickAtMs: the earliest timer; the host calls Tick at or after it.
//     Tick expires sessions and parked new members, completes rebalances on
//     timeout and after the initial delay, expires members that did not
//     sync, and runs the offsets expiration every
//     offsets.retention.check.interval.ms.
//
// A failed append is undone as Kafka undoes it: a leader's assignment that
// did not become durable sends the group's members back to rejoin; a
// commit, OffsetDelete or DeleteGroups fails with the mapped error
// (NOT_ENOUGH_REPLICAS → COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER
// → NOT_COORDINATOR, ...) and changes nothing; a static member's
// replacement is reverted. The metadata of a new or emptied group that
// failed to append stays in memory only, as in Kafka.
//
// A new coordinator is loading: requests get COORDINATOR_LOAD_IN_PROGRESS
// until the host has passed the partition's records to Replay (or Load)
// and called Loaded. Replay is Kafka's: the latest record of a key wins,
// tombstones delete, a group record gives a Stable group of its members
// (or Empty), an offset commit of an unknown group creates a simple group.
// Every loaded member's session starts at Loaded. Since all durable state
// goes through records, a coordinator that loads the records of another
// gives the same committed offsets, and the same Empty and Stable groups
// (their generation, protocol, leader, members and assignments); a group
// in the middle of a rebalance comes back as its last durable generation,
// and its members rejoin.
//
// # Records
//
// The records are byte-compatible with Kafka's __consumer_offsets:
// OffsetCommitKey v1 (group, topic, partition) with OffsetCommitValue v3
// (offset, leader epoch, metadata, commit timestamp; v1 with an expire
// timestamp when the commit asked for a retention), GroupMetadataKey v2
// with GroupMetadataValue v3 (protocol type, generation, protocol, leader,
// state timestamp, members with subscription and assignment), and null
// values as tombstones. They are encoded with franz-go's kmsg (generated
// from Kafka's schemas); DecodeRecord reads every value version Kafka
// wrote (v0–v4). Transactional offset commits, and Kafka's consumer
// (KIP-848) and share group records, are not supported.
//
// # Differences from Kafka
//
// Where Kafka iterates a hash map the coordinator uses member id order (a
// removed leader's successor, the member lists, a tie between protocols
// goes to the smallest name), so runs are deterministic. A parked request
// of a member removed by a LeaveGroup or an expiry is answered
// UNKNOWN_MEMBER_ID where Kafka may drop it. A group being deleted is Dead
// until its tombstones are durable (Kafka removes it at once and reverts
// on failure). OffsetCommit v1's per-partition commit timestamp is
// ignored (the commit time is nowMs).
//
// # Concurrency
//
// A Coordinator is not safe for concurrent use: the host serialises the
// calls of one partition's coordinator. It keeps the byte slices of the
// requests it is given (protocol metadata, assignments), and the byte
// slices of its responses and GroupInfo are its own: neither side modifies
// them afterwards.
package group
