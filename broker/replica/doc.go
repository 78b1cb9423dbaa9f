// Package replica is the pure replication state machine of one partition
// replica, leader and follower (SPEC §4, with §2.4, §6.2f, §6.6 taints).
//
// # Shape (etcd RawNode)
//
// A shell owns the log (storage), gRPC and timers and drives a *Replica:
//
//	ApplyPartitionState(st, now)   controller metadata (newer LE, or same LE newer PE)
//	Propose(p, now) Decision       produce, leader only (§4.1)
//	HandleFollowerFetch(req, now)  serve a FOLLOWER/CONSUMER/MIRROR fetch (§4.3)
//	NextFetch() / HandleFetchResponse(resp, now)   follower side (§4.4)
//	HandleAlterPartitionResponse(seq, resp, now)   controller answer (§4.5)
//	Tick(now)                      ISR shrink, produce timeouts
//	Ready() / Advance()            outputs
//	ConfirmTruncation(leo, now)    where an OpTruncate left the log
//
// Time enters only as nowMs arguments; there are no goroutines, clocks,
// logging or I/O. The machine is not safe for concurrent use: the shell
// serialises calls per partition.
//
// # Log view
//
// The machine keeps its own view of the local log (log start, LEO, HW) and
// the leader-epoch cache (*epoch.Cache), and changes them at the moment it
// decides. Every change reaches the shell as Ready.LogOps (append, truncate,
// restart, advance log start) and Ready.EpochEntries, which the shell applies
// in order. Leader appends: Propose assigns [LEO, LEO+n) with epoch LE and
// emits OpAppend{ProposalID}; the shell writes the producer's batch stamped
// with those offsets. Follower appends: the shell parses []BatchMeta from the
// fetched records and passes them in FetchResponse.Batches; OpAppend names
// the batches to write. Truncation works in whole batches, as in Kafka: when
// a batch straddles the offset of an OpTruncate the log ends at its base,
// and the shell reports that end offset (ConfirmTruncation) before the next
// step; the machine adopts it and a follower refetches from there. A failed
// LogOp means the log dir is offline: rebuild the replica with New from what
// is on disk.
//
// # Persist, then send
//
// For each Ready the shell (1) applies LogOps and writes the epoch
// checkpoint, partition.metadata aligned_epoch and cleared taints, durable as
// the flush policy requires; (2) only then exposes HighWatermark, answers
// ProduceResults and sends AlterPartition; (3) calls Advance, then
// ConfirmTruncation if the LogOps held an OpTruncate. No step may run
// between Ready and Advance, nor between Advance and ConfirmTruncation.
//
// # Invariants (CheckInvariants panics)
//
//   - logStart ≤ HW ≤ LEO; cache entries within [logStart, LEO].
//   - A leader's HW never decreases within an LE except by TruncateAsLeader
//     (§6.2f); no acks=all request stays pending below HW.
//   - A non-mirror leader's cache holds LE starting at or before LESO (§8.10);
//     a leader's cache has no epoch above LE (§8.16).
//   - Proposed ISRs contain the leader.
//
// # Mirror hooks (§6)
//
// SetMirrorPartition (no own LE in the cache), SetWritable (READ_ONLY_TOPIC,
// INVALID_MIRROR_SOURCE), SetTaint and ConfirmTaintCleared (a repaired
// follower joins the ISR only once its cleared taint is durable),
// ResetTaints (a new leadership installs the durable taints it loaded;
// taints are leader state and go when leadership is lost),
// SetTaintsPending (a new leader of a mirrored or once-mirrored topic answers
// followers UNKNOWN_LEADER_EPOCH until its taints are loaded, §6.4), truncation
// points in PartitionState
// (consumer LOG_TRUNCATED; UNKNOWN_LEADER_EPOCH in a bumped LE until
// TruncateAsLeader; TruncateFullyAsLeader restarts the log at an offset; a
// replica becoming leader caps its HW at every point recorded after the
// last LE it validated, its aligned_epoch or an LE it led after its owed
// truncation, until its ISR has fetched in the new LE),
// AppendAsMirrorLeader, FollowerAlignedEpoch and
// SetAlignedEpoch.
package replica
