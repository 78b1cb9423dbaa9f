// Package controller is the I/O shell around controller/metastate: one
// controller per cluster owns the truth about brokers, topics, partitions and
// mirrors (SPEC §3) and serves ControllerService, AdminService and
// MirrorService over gRPC, plus the gRPC health and reflection services.
//
// Every command follows the same path under Controller.mu: metastate computes
// a MetadataDelta without changing the image, the Store persists it (the
// bbolt file of controller/boltstore, one fsynced transaction), State.Apply
// installs it, and long-polling FetchMetadata callers are woken. A response
// is sent only after its delta is durable, so an acknowledged change
// survives kill -9; a delta that failed to persist is never applied.
//
// Store (store.go) is the seam to persistence: New opens the bbolt file in
// Config.DataDir unless Deps.Store passes another store, such as
// controller/memstore, whose CrashClone lets tests and the simulator
// restart the real controller after a crash. The stores share their errors,
// values and snapshot paging through controller/metastore and pass one
// conformance suite (controller/metastore/storetest).
//
// FetchMetadata answers are bounded by Config.MaxFetchBytes. A follower
// whose offset was compacted away gets the stored snapshot in pages, read
// from the stored bytes in place (metastore.ReadSnapshotPage), walked with a
// SnapshotCursor that names the snapshot's offset; a cursor left stale by a
// newer compaction restarts at the first page of the new snapshot, so a
// follower never joins pages of two snapshots.
//
// Goroutines: Run owns the gRPC server, the ticker that turns wall-clock time
// into State.Tick (session-timeout fencing, leaderless re-election, recovery
// round planning), compaction, and one goroutine per unclean recovery round
// (SPEC §3.5) that asks candidates GetReplicaLogInfo with a deadline and feeds
// the answers back through CompleteRecoveryRound. Shutdown cancels the rounds,
// drains RPCs and closes the store.
//
// Time: Deps.Now is the only clock the state machine sees; tests inject it
// and call Tick directly (or run under testing/synctest).
package controller
