// Package sim is twinlog's deterministic simulator (STYLE tier 2, issue 7):
// one seed drives a whole cluster — the controller's metastate.State, 3–5
// brokers each with one replica.Replica per hosted partition over a real
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
// timers (heartbeat, metadata poll, replica Tick, follower fetch, flush,
// checkpoint), clients act, faults strike, and the invariants are checked.
//
// The shells here mirror broker/ and controller/: RegisterBroker with the
// PreviousBrokerEpoch of the clean-shutdown file (−1 after a crash),
// heartbeats (STALE_BROKER_EPOCH → register again), metadata followed as
// deltas into a per-broker metastate image and reconciled into
// ApplyPartitionState, the Ready contract (log ops and epoch checkpoint,
// then HW, produce results and AlterPartition, then Advance),
// AlterPartition with an RPC deadline (REQUEST_TIMED_OUT), fetch served by
// HandleFollowerFetch + storage.Log.Read, GetReplicaLogInfo answered from the
// replica for recovery rounds.
//
// # Faults (per step, Config probabilities)
//
// Message drop, delay (which also reorders), link cut between two nodes
// (controller, brokers), isolation of a broker (all its links, clients too),
// broker crash (kill -9: MemFS.CrashClone keeps only synced data; it comes
// back with PreviousBrokerEpoch −1, an unclean registration), clean restart
// (LogDir.Close writes the clean-shutdown file; previous epoch kept),
// controller restart (image rebuilt from its log; heartbeat times and
// rounds lost; in-flight requests dropped), session-timeout fencing (a
// consequence of the above), config flips (min.insync.replicas 1–3,
// unclean.leader.election.enable) and preferred elections. Data is flushed
// at random intervals per partition, so crashes lose random tails.
//
// # Checks
//
// After every controller change: metastate.CheckTransition (SPEC §8.3, 4, 6)
// and CheckInvariants (1, 2, 4). After every replica Ready: its
// CheckInvariants, its view (LEO, HW, epoch cache) equal to storage and to the
// simulator's shadow of the applied log ops, leader HW monotonic within an LE
// (8). After every step: §8.7 (running acceptable ISR ∪ ELR members have LEO
// ≥ trueHW), §8.9 (replicas agree below the smaller HW; suspended for a
// replica that has not fetched since the latest unclean election), reads
// below HW (13) and the History (12, 13: offsets with two values, values at
// two offsets, non-monotonic reads; lost acks=all writes at the end). Every
// 5 s of simulated time and at the end each log is re-read from storage and
// compared with the shadow.
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
// # Concurrency
//
// A run is single-goroutine and owns everything it creates; separate runs
// share nothing and may run in parallel.
package sim
