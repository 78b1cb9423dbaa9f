// Package broker is the I/O shell of a twinlog broker (SPEC §4): it owns the
// goroutines, gRPC, timers and disk, and drives one pure replica.Replica per
// hosted partition (broker/replica, etcd RawNode style).
//
// # Goroutines
//
//   - the metadata loop (broker/metaloop.Loop, metadata.go) long-polls the
//     controller's FetchMetadata, applies deltas in offset order (a snapshot
//     when far behind) to a metadata.Image and reconciles: logs are opened
//     for new assignments, partition state is applied (newer LE, or same LE
//     with newer PE, decides inside replica), partitions left or re-created
//     with another topic id are deleted (SPEC §2.1). Nothing is reconciled
//     until the image has reached the broker's own registration, so a
//     restarted broker never acts on old leadership.
//   - the session (broker/session.Keeper, keeper.go) registers, heartbeats
//     with the applied offset (unfencing), registers again on a stale
//     epoch and, at shutdown, sends wantShutDown until the controller
//     grants it (SPEC §3.2).
//   - the loop and the Keeper are callback-driven: each request runs on a
//     goroutine of its own bounded by the RPC timeout, each pause on a
//     goroutine that ends with the run, and the answer calls back into
//     them (the simulator runs both on its scheduler and network).
//   - tickLoop turns a ticker into Replica.Tick (ISR shrink §4.5, produce
//     timeouts §4.1) and reports metrics.
//   - checkpointLoop writes HW/log-start/recovery checkpoints every 5 s (§2.5).
//   - cleanerLoop compacts the logs of cleanup.policy=compact topics
//     (cleaner.go, storage.Cleaner), up to log.cleaner.threads at once.
//   - one fetcher per leader broker replicates every partition followed from
//     it with one pipelined long-poll Fetch (§4.4; its decisions are
//     broker/follow's, the leader's answer broker/serve.Once).
//   - AlterPartition (broker/alter.Send; the machine keeps at most one in
//     flight per partition): one goroutine per attempt and per backoff
//     pause; the answer goes back to the replica under its lock.
//   - with FlushEveryBatch, a per-partition syncer group-commits fsyncs.
//   - one goroutine per hosted partition of a mirror topic (mirror.go,
//     SPEC §6) turns its mirror/runner.Runner, which owns the
//     mirror/plan.Machine while this broker leads the partition and
//     decides everything: BumpLeaderEpoch, replica.TruncateAsLeader,
//     ordered acks=all __mirror_state writes (mirrorstate.go), the
//     Fetch{MIRROR} session's steps, the writable flag and taints. Each
//     call it makes through its Env (the controller, the source cluster
//     through a mirror/source.Client, __mirror_state) runs on a short-lived
//     goroutine and answers through the Runner's queue; heartbeats carry
//     the runners' MirrorPartitionStatus. Every broker answers
//     GetLastMirroredEpochs (MirrorSourceService) from what it read of
//     __mirror_state.
//   - with a Kafka listener, the group coordinators (broker/coord.Host,
//     groups.go): a reconcile every two ticks and after every applied
//     image loads a group.Coordinator for each __consumer_offsets
//     partition this broker leads (a goroutine per read step, a timer
//     while the partition's HW trails) and unloads the others; per
//     coordinator, one timer goroutine at a time, and here (groups.go) one
//     goroutine per append awaiting its acks=all outcome for the
//     coordinator's callback. Lock order: the coordinator's shard lock,
//     then partition.mu.
//
// # Concurrency contract
//
// Each partition's mutex serialises every call into its replica together
// with the Ready handling that follows (broker/ready.Drain: persist LogOps
// and epoch/aligned checkpoints, then expose HW, answer produce waiters and
// send AlterPartition, then Advance; the simulator runs the same Drain). gRPC handlers take the partition lock only
// for the machine's decision; log reads happen outside it (storage.Log is
// safe for concurrent use). Lock order: partition.mu, then metaMu / wmu.
//
// # Shutdown
//
// Run's ctx ending starts a clean shutdown: controlled shutdown (bounded),
// gRPC drained, fetchers stopped, every log flushed and closed, checkpoints
// written and the clean-shutdown file written last (storage.LogDir.Close).
// Crash (tests) abandons everything without flushing.
package broker
