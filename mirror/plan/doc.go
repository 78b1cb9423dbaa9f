// Package plan is the pure core of cross-cluster mirroring (SPEC §6): the
// per-partition mirror state machine that runs on the destination (D)
// partition leader, plus the offset and epoch rules it is built from.
//
// The machine turns inputs (Event) into outputs (Action) in the etcd-raft
// shape: the shell calls Step for every input, then drains Ready, performs
// the actions in order, reports their results back as further events and
// calls Advance. The package does no I/O, starts no goroutines, reads no
// clock (time arrives as Tick{NowMs}) and draws jitter from an injected
// Rand. A Machine is not safe for concurrent use.
//
// States (SPEC §6.5):
//
//	new ─Start─▶ PREPARING ─lmle─▶ TRUNCATING ─bump,truncate─▶ [PENDING] ─acks─▶ MIRRORING ⇄ PAUSED
//	   any but STOPPED ─Stop─▶ STOPPING ─lmle write, bump, STOPPED write─▶ STOPPED ─Start─▶ PREPARING
//	   PREPARING/PENDING/fetch fatal ─▶ FAILED ─backoff (full jitter, max attempts)─▶ PREPARING
//
// Invariants the machine keeps (checked after every Step; a violation
// panics):
//   - a fetcher runs only in MIRRORING, and only after the LMLE truncation of
//     the current run and its MIRRORING record (with taints) are acknowledged
//     (SPEC §8 inv. 19);
//   - the partition is made writable only in STOPPED, after the LMLE record,
//     the stop bump and the STOPPED record are done (inv. 18);
//   - every leader truncation is preceded by a BumpLeaderEpoch carrying its
//     truncation offset (§6.2f), and a fetched batch whose epoch exceeds LE
//     waits for a bump to at least its epoch (§6.2d, inv. 16);
//   - conversely, a truncation point in the LE of a BecameLeader (a bump
//     whose answer was lost) is executed before the machine acts on the
//     records (BecameLeader.TruncationPoints);
//   - every __mirror_state write carries stateEpoch = the current LE (§6.4).
//
// The source-side rules (GetLastMirroredEpochs answers, the __mirror_state
// reader) live here too because both clusters must agree on them.
package plan
