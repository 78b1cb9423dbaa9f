// Package boltstore persists the controller's metadata (SPEC §3.1) in a bbolt
// file: a change log of protobuf MetadataDelta records keyed by metadata
// offset, the latest compaction snapshot, and a few scalars.
//
// On-disk layout (one bbolt file):
//
//	meta/
//	  "cluster_id"        -> UTF-8 cluster id
//	  "next_offset"       -> uint64 BE, offset the next appended delta gets
//	  "controller_epoch"  -> uint64 BE, bumped by every controller start
//	log/
//	  uint64 BE offset    -> proto MetadataDelta (its Offset field equals the key)
//	snapshot/
//	  "offset"            -> uint64 BE, offset the snapshot includes
//	  "snapshot"          -> proto MetadataSnapshot
//
// Invariants:
//   - log keys are contiguous: [FirstOffset, NextOffset).
//   - a delta is deleted only once a snapshot covers it (offset ≤ snapshot
//     offset), so snapshot + log always rebuild the newest image.
//   - every Append is one bbolt transaction, fsynced at commit: an
//     acknowledged change set survives kill -9, an unacknowledged one is
//     either entirely present or entirely absent.
//
// Offsets start at 1; offset 0 is the empty image.
//
// Store implements the controller's Store interface. Its sentinel errors
// and the Loaded, Info and SnapshotPage values are controller/metastore's
// (the names here are aliases), shared with controller/memstore, and the
// snapshot is paged by metastore.ReadSnapshotPage straight from the bbolt
// value. Use after Close returns an error wrapping ErrClosed.
//
// Damaged files: bbolt trusts its pages, and a damaged one can crash the
// process outright (a branch page that points at itself is unbounded
// recursion; a size past its page becomes an allocation of gigabytes at the
// next commit). So Open first walks the whole file without bbolt
// (preflight.go: meta, every tree page of every bucket, the freelist) and
// refuses anything bbolt could not survive with an error wrapping
// ErrCorrupt that names the file and the page. bbolt panics that remain are
// recovered into the same error (belt and braces).
//
// Concurrency: a Store is safe for concurrent use. Writes serialize inside
// bbolt; readers run in parallel with a writer. Values read from bbolt are
// decoded (copied) before the read transaction ends.
package boltstore
