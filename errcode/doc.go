// Package errcode is the one table of what the code base knows about each
// protocol ErrorCode (SPEC §1.4): its name, a description for operators,
// whether a client retries it and how, whether it ends a mirror run, and
// the next step twinctl suggests. Callers ask the table (Of) instead of
// keeping their own switch over the codes, as franz-go's kerr does.
//
// The table is written once, by hand, next to the enum's values it
// describes; a test checks that every value of twinlogv1.ErrorCode has an
// entry whose name is the enum's. Adding a value to the enum therefore
// fails that test until its entry is written here.
//
// The table has no gRPC status per code, by design: a code travels inside
// the response message, and a gRPC status means the request itself could
// not be handled (malformed, the server stopping, a store failure); every
// service maps those errors in one place, rpcopt.ToStatus.
//
// The package is pure data over the API's enum: it imports only the
// standard library and api/proto/twinlog/v1, so the pure state machines
// (mirror/plan) may read it. Concurrency: everything is read-only after
// package initialisation and safe for concurrent use.
package errcode
