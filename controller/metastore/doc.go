// Package metastore holds what every store of the controller's metadata
// (SPEC §3.1) shares: the Store interface the controller runs on
// (controller.Store), the sentinel errors the controller branches on, the
// values a store returns (Loaded, Info, SnapshotPage), the encoding of what
// it keeps (EncodeDeltas, EncodeSnapshot), and the one reading of a stored
// snapshot in pages (ReadSnapshotPage).
//
// Two stores implement Store on top of it:
// controller/boltstore (a bbolt file, what controllerd runs) and
// controller/memstore (memory with crash semantics, for tests and the
// simulator). Both keep the snapshot as the same serialized
// MetadataSnapshot bytes and page it with ReadSnapshotPage, so a follower
// catching up sees the same pages from either; storetest holds the
// conformance suite both pass.
//
// The package is pure: no bbolt, no file system, no clock.
//
// Offsets start at 1; offset 0 is the empty image. A store's log holds the
// deltas [FirstOffset, NextOffset), contiguous, and deletes a delta only
// once the stored snapshot covers it, so the snapshot plus the log always
// rebuild the newest image.
package metastore
