package controller

import "github.com/twinlog/twinlog/controller/metastore"

// Store is where the controller keeps its metadata (SPEC §3.1): the change
// log of MetadataDelta records by offset, the latest compaction snapshot,
// the cluster id and the controller epoch. New opens a boltstore.Store in
// Config.DataDir unless Deps.Store gives one; controller/memstore is the
// in-memory store with crash semantics for tests and the simulator.
//
// The contract (durable writes, shared sentinel errors, concurrent use) is
// written once, on metastore.Store, beside the values and errors both
// stores share, so that the conformance suite (metastore/storetest) can
// check it without importing this shell.
type Store = metastore.Store
