// Package coord hosts the group coordinators of a broker (issue 16): one
// group.Coordinator for each __consumer_offsets partition the broker
// leads, fed with the partition's records when it becomes leader, driven
// by the Kafka listener's group requests, and writing through the
// partition with acks=all. Every decision about groups and offsets is the
// coordinator's (package group); this package only carries out its host
// contract (group/doc.go "The host contract") over the broker, reached
// through Env.
//
// # Shards
//
// Host.Reconcile, called whenever the broker's metadata changes and every
// Config.ReconcileInterval, compares the partitions this broker leads with
// the shards it holds. A partition led in a new leader epoch gets a new
// shard, which loads: it waits until the leader's high watermark covers
// its whole log (so nothing it replays can still be lost by a failover,
// and the records an earlier shard of this broker wrote are included),
// reads the log from its start, replays it and starts serving. A shard
// whose partition this broker no longer leads, in that epoch, is unloaded:
// its parked requests are answered NOT_COORDINATOR and the clients look
// the coordinator up again.
//
// # One shard
//
// A shard's mutex serialises every call into its coordinator and the
// handling of the Ready that follows: responses go to the waiting
// requests, appends go to the partition's leader in Ready's order (each a
// batch appended at once; Env calls back with its acks=all outcome), and
// the timer is re-armed for the next TickAtMs. Outcomes arrive in any
// order and are reported in append order: an append refused before it was
// written (not leader, too few in-sync replicas) as AppendFailed, a
// committed one as Appended, and one whose outcome is unknown after it was
// written (a timeout, a lost leadership, the run's end) unloads the shard;
// the next Reconcile loads the partition again from what the log holds, as
// the coordinator's contract asks. Appends take no goroutine of the host's:
// the simulator can drive the outcomes from its scheduler.
//
// A request whose time runs out before its answer (ctx) is forgotten; the
// coordinator's answer to it, when it comes, is dropped.
package coord
