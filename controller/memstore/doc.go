// Package memstore keeps the controller's metadata (SPEC §3.1) in memory,
// with the semantics of controller/boltstore and a crash that loses what a
// machine crash would: tests and the simulator run the real controller on
// it (controller.Deps.Store) and restart it on CrashClone.
//
// Layout: the same values boltstore writes, kept as bytes. Each delta is
// its deterministic protobuf encoding, in a slice for the offsets
// [FirstOffset, NextOffset); the snapshot is the encoded MetadataSnapshot,
// paged in place by metastore.ReadSnapshotPage exactly as boltstore pages
// its bbolt value. Storing encodings rather than messages means a caller
// that changes a message after Append, or one Load returned, changes
// nothing stored, as with a file.
//
// Invariants (boltstore's): log offsets are contiguous and end at
// NextOffset; a delta is deleted only once the snapshot covers it; Append
// and Compact are all or nothing; ReadDeltas below the first retained
// offset is metastore.ErrCompacted; every use after Close is
// metastore.ErrClosed.
//
// Durability: every write (InitClusterID, BumpControllerEpoch, Append,
// Compact) is durable when it returns, as a bbolt commit with fsync is, so
// CrashClone loses nothing that returned. With Options.NoSync (boltstore's
// NoSync: no fsync at commit) writes become durable only at Sync, and
// CrashClone drops every write after the last Sync: the simplest of the
// outcomes a crash may have there, and the harshest.
//
// Concurrency: a Store is safe for concurrent use; one mutex orders writes,
// and readers share it.
package memstore
