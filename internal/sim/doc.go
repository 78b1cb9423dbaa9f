// Package sim is twinlog's deterministic simulator (STYLE tier 2, issue 7):
// one seed drives a whole cluster — the shipped controller (controller.Controller
// on a controller/memstore store), 3–5 brokers each with one replica.Replica per hosted partition over a real
// storage.LogDir on its own crashable storage.MemFS — plus producers and
// consumers, on one goroutine with simulated time. The model is etcd raft's
// network.send loop plus TigerBeetle's packet simulator and FoundationDB's
// "same seed, same run".
//
// # Shape
//
//	Run(Config{Seed: n}) ─► setup (configs, brokers register, topic)
//	                     ─► fault phase: tick() every StepMs
//	                     ─► heal phase: faults and producers off, every broker
//	                        up, run until fully replicated; final history check
//
// One tick: time advances, cut links whose time has come heal, timers fire,
// due messages are delivered in (time, send order), the controller ticks
// (session fencing, elections, unclean recovery rounds), brokers run their
// timers (replica Tick, flush, checkpoint; heartbeats, metadata requests,
// fetches and their pauses are timers and messages of the shared loops),
// clients act, faults strike, and the invariants are checked.
//
// The controller is the shipped shell: brokers' RPCs call its
// ControllerService in-process, the operator's commands go through
// Propose, Tick runs on the controller's tick, and recovery rounds ask
// their candidates over the simulated network (controller.RoundTransport).
// The brokers run broker/'s loops over the simulated network and clock:
// registration and heartbeats (broker/session.Keeper: PreviousBrokerEpoch
// of the clean-shutdown file, −1 after a crash; STALE_BROKER_EPOCH →
// register again), the metadata loop (broker/metaloop.Loop, deltas or a
// paged snapshot into a per-broker metadata.Image) and its reconcile plan
// (assign.Reconcile), the Ready contract (broker/ready.Drain, with
// storage's AppendValidated* appends), AlterPartition's attempts
// (broker/alter.Send, with an RPC deadline), one follower fetcher per
// leader (broker/follow.Fetcher, kicked by reconcile), every fetch answered
// by broker/serve.Once within a random byte budget, produced batches
// checked and proposed by serve.ValidateProduce and serve.Propose,
// GetReplicaLogInfo answered from the replica for recovery rounds. What
// they are hosted in (the partition map, a produce's wait, the tick, flush
// and checkpoint timers) is this package's.
//
// # Authorization
//
// Every RPC between nodes goes through the receiving node's shipped
// authorizer (authz.go): the controller's interceptor for brokers' and the
// operator's calls (controller.go's rpc), each broker's for follower
// fetches, __mirror_state reads and writes, recovery rounds and, across
// clusters, a mirror's fetches, LMLE queries and source Metadata. Each
// node has its cluster's principal (User:a-broker-1, User:a-controller);
// a cluster's own nodes are its super users, and each operator grants the
// other cluster's brokers Read on its Mirror and on topic t
// (grantMirroring). A broker's bindings follow its image and it answers
// UNAVAILABLE until it has caught up; denials and those answers are
// counted in Checks. Not simulated: Metadata's per-topic filtering.
//
// # Faults (per step, Config probabilities)
//
// Message drop, delay (which also reorders), link cut between two nodes
// (controller, brokers), isolation of a broker (all its links, clients too),
// broker crash (kill -9: MemFS.CrashClone keeps only synced data; it comes
// back with PreviousBrokerEpoch −1, an unclean registration), clean restart
// (LogDir.Close writes the clean-shutdown file; previous epoch kept),
// controller restart (a new controller on the store's CrashClone: heartbeat
// times and rounds lost; in-flight requests dropped), controller compaction
// (a snapshot that keeps 16 deltas; with responses capped at 300 bytes, a
// broker that restarts or falls behind catches up through a snapshot of
// several pages, gathered by the broker's metadata.Follower), session-timeout fencing (a
// consequence of the above), config flips (min.insync.replicas 1–3,
// unclean.leader.election.enable) and preferred elections. Data is flushed
// at random intervals per partition, so crashes lose random tails.
//
// # Checks
//
// After every change the controller commits (its Committed hook):
// metastate.CheckTransition (SPEC §8.3, 4, 6) against the image before it,
// and CheckInvariants (1, 2, 4). After every replica Ready: its
// CheckInvariants, its view (LEO, HW, epoch cache) equal to storage and to the
// simulator's shadow of the applied log ops, leader HW monotonic within an LE
// (8). After every step: §8.7 (running acceptable ISR ∪ ELR members have LEO
// ≥ trueHW), §8.9 (replicas agree below the smaller HW; suspended for a
// replica that has not fetched since the latest unclean election), reads
// below HW (13) and the history checker of internal/history (12, 13:
// offsets with two values, values at two offsets, non-monotonic reads; lost
// acks=all writes at the end). Every 5 s of simulated time and at the end
// each log is re-read from storage and compared with the shadow.
//
// # Reproducing
//
// A violation stops the run with a *Failure naming the seed, the step, the
// invariant and the last TraceLines trace lines. go test ./internal/sim
// -run TestSimSeeds -sim.seed=N -v replays it (-sim.trace prints the whole
// trace); -sim.seeds=N -sim.first=F runs a range. The trace feeds a hash:
// the same seed gives the same hash (TestDeterminism). Seeds that once
// failed live in testdata/regression-seeds.txt and always run. Known bugs of
// other packages are counted in Report.KnownBugs (FailOnKnownBugs turns them
// into failures); known_bugs_test.go replays each from its seed.
//
// # Two clusters
//
// Config{Clusters: 2} (or Mirror) runs clusters A and B in lockstep (a
// world, mirror.go): B's topic is created by CreateMirror from A's and
// mirrored by the real mirror/plan.Machine on B's partition leaders, run by
// the shipped mirror/runner.Runner (mirrorhost.go hosts it as
// broker/mirror.go does: LMLE queries answered by the other cluster's
// __mirror_state leader with the shipped state.Store, BumpLeaderEpoch
// through the controller shell with truncation points, source metadata
// from a random source broker's image, possibly stale, and fetches over
// the cross-cluster network, served by the source replica below its HW).
// __mirror_state is each cluster's real internal topic (statehost.go):
// hosted and replicated by the brokers, read with state.Store (a consumer
// fetch to its leader, or the leader's own log), written by acks=all
// appends through its leader over the lossy network; when every replica
// of it crashed uncleanly the healing phase elects one uncleanly as an
// operator would (§6.4 strategy none) and suspends §8.20/21. At random moments the destination fails
// over (Stop; half of the time after draining the source) and the old
// source fails back (mirrors the new one); cross-cluster links are cut,
// packets dropped and delayed, mirror.support.unclean.leader.election
// flipped. Extra checks: §8.15 at every copy, §8.16 and §8.17 after every
// step, §8.19 at every leadership (no durably tainted replica in the ISR),
// §6.4 at every leadership (once loaded, the leader holds no taint the
// __mirror_state record lacks),
// §6.2f after a leadership in an LE that carries a truncation point (the
// machine truncated there before anything else), a stale leadership (records
// of a later LE) refused by the machine, §8.20 every second and at the end, §8.21 after the final failback and
// catch-up, and acknowledged writes across failovers (each failover hands
// the source's acks=all writes below the destination's HW to the
// destination's History). Report.Mirror counts failovers, failbacks, LMLE,
// divergence and out-of-range truncations and mirrored records;
// Report.Peer is cluster B. Replay with go test ./internal/sim -run
// TestTwoClusterSeeds -sim.seed=N (-sim.twofaultms sets the fault phase).
//
// # Consumer groups
//
// Config{Groups: n} (TestGroupSeeds) adds n consumer groups of topic t
// (groups.go): every broker incarnation hosts the shipped coordinators
// (broker/coord.Host over simGroupsEnv, one group.Coordinator per
// __consumer_offsets partition it leads, loaded from the log, appending
// with acks=all through the partition), __consumer_offsets is created by
// the host's FindCoordinator path, and 2–3 members per group find the
// coordinator, join, sync, fetch their offsets, heartbeat and commit over
// the lossy network, restarting or leaving now and then. A member's
// position moves only over records the partition's leader on its cluster
// holds below the HW, and each commit carries the leader epoch of the
// record before the position (the last consumed, as a Kafka client
// commits it; -1 at 0). Checked: no
// committed offset (an OffsetFetch answer, an acknowledged commit, the
// final OffsetFetch after healing) is below one acknowledged before,
// unless a truncation or lossy shutdowns of the coordinator's partition
// since explain it, or a deposed coordinator answered from memory
// (counted). Off by default, so the other tests' seeds keep their runs.
// Not simulated: the compaction of __consumer_offsets.
//
// With two clusters (TestTwoClusterGroupSeeds, offsetsync.go) the same
// groups exist on both and their members use the writable cluster: the
// source while mirrored, none while a planned failover drains, the
// destination once it took over (they start afresh there and fetch the
// synced offsets). The destination's controller runs the shipped
// controller.SyncOffsets as a coroutine every second and before each
// failover's stop; its calls cross the simulated networks to the brokers'
// shipped handlers (broker/groupsvc, broker/serve's ListOffsets and
// OffsetForLeaderEpoch) through their authorizers. Checked: a sync commits
// no offset above what the source's members sent nor above the
// destination's answered HW, its reads of the source are never below the
// source's acknowledged commits, and when a sync ends each group whose
// commit the destination acknowledged holds there what the source
// answered, clamped to the HW (or, where the sync's truncation pass moved
// it, the pass's offset), and the truncation pass (controller
// fixTruncated) moves a group back only as a recorded truncation
// explains (from its acknowledged offset, or a sync's commit after it
// whose acknowledgement was lost): a truncation point between the move
// and the old offset, or
// the old offset's record gone from the log after a truncation; and once
// a sync that started after the destination's latest truncation point
// completes, no group without members there still holds a commit the
// pass read in truncated history: one above a truncation point of a
// later LE than its epoch whose record (offset-1 in that epoch, the value
// its member read) the leader no longer holds ("committed offset left in
// truncated history", checkLeftInTruncated). Group g2
// is excluded from the sync (Config.OffsetSyncExclude), so its commits
// into an old source's unmirrored tail survive the failback for the pass;
// healing waits for a complete sync after the last truncation point. A
// sync's acknowledged commit is the group's new offset on that cluster (a
// reset). Not
// simulated: the catch-up wait of StopMirrorTopics (the world's own). Replay
// with go test ./internal/sim -run TestTwoClusterGroupSeeds -sim.seed=N (a
// sweep: -sim.twogroupseeds=N -sim.first=F).
//
// # Idempotent producers
//
// Config{Idempotent: true} (TestIdempotentSeeds, TestTwoClusterIdempotentSeeds,
// idempotent.go) makes the producers idempotent, as Kafka clients with
// enable.idempotence: an id from a broker's InitProducerId (its block from
// the shipped controller's AllocateProducerIds, handed out through
// serve.ProducerIDBlock), sequences per partition, up to three batches
// unacknowledged per partition, each sent again, the same bytes, after a
// lost request or answer or a retriable error until it is acknowledged;
// the id is given up (its batches abandoned) when the head of a queue is
// refused OUT_OF_ORDER_SEQUENCE_NUMBER, on INVALID_PRODUCER_EPOCH, or when
// a batch waited 8 s. The leaders answer retries through the shipped
// serve.Propose over each log's producer state (storage/producer), which
// followers and mirrors build from the batches they append and truncations
// rebuild. Checked: no record appended twice (the history's "value at two
// offsets", which then allows a value at a second offset only when a
// recorded truncation may have removed the first copy: a retry appended
// again after the copy it was not told about was cut; and leaves out
// acks=1 answers, which a stale leader may give for a second copy in its
// diverged log, as a Kafka zombie leader does), no producer id
// handed out twice in a run (both clusters). With two clusters, at each
// failover every source producer with an id moves to the destination with
// even odds (moveProducers): the destination's producer of the same index
// takes over its id, epoch, sequences and unacknowledged batches and sends
// them there, where the leaders must answer the batches the mirror copied
// as duplicates with their offsets and continue the sequence; §8.20 then
// names a record's cluster by the leader that accepted it (originOf), not
// by its writer's name. Off by default.
//
// Operator actions of ops.go, on their own random stream (Config knobs,
// negative disables): PauseProb pauses the destination's mirror topic
// while mirroring (resumed 0.1–3.1 s later, before a planned failover
// drains, and when healing starts), checked by "§6.5 pause/resume
// honoured"; ReassignProb reassigns a partition of t (one replica swapped
// for a broker outside the set, or a reorder, or a cancellation) in either
// cluster, mirror topic or not, and brokers drop the replicas that left
// (removeUnassigned). §8.18 is checked at the first accepted Produce of
// each leadership on a partition the runner made writable. Counted in
// MirrorReport.CrossFaults (op-pause, op-resume, reassign-move-a, ...).
// "two: N" lines of testdata/regression-seeds.txt replay N as a
// two-cluster run with 20 s of faults and these actions off.
//
// # Concurrency
//
// A run is single-goroutine and owns everything it creates; separate runs
// share nothing and may run in parallel.
package sim
