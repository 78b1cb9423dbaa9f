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
// The source going away: a source that no longer has the topic (deleted),
// has it under another topic id (re-created), or lacks the partition
// answers UNKNOWN_TOPIC_OR_PARTITION or INCONSISTENT_TOPIC_ID (Metadata,
// Fetch{MIRROR} with the topic id, and GetLastMirroredEpochs: never lmle −1,
// which would truncate everything). Both are Fatal: the run goes FAILED
// with a lastError that says so (FatalReason), keeping every record,
// read-only. The FAILED retries are kept: each fails again in PREPARING,
// before any bump or truncation, so a retry can neither lose records nor
// raise the LE, and a source that only seemed to lack the topic (a broker
// whose metadata lagged) is picked up again. The operator's way out is Stop (writable, every record kept;
// from FAILED it records the existing LMLE, SPEC §6.7) or deleting the
// mirror after that.
//
// Retries do not ratchet epochs (issue 13). A FAILED run's automatic retry
// redoes PREPARING (so a source that lost the topic fails it again, above),
// but when its LMLE answer equals the lmleUsed of the run truncation this
// leadership did (kept), in the same generation, with no truncation and no
// truncating bump since and the leader still aligned in that truncation's
// LE, it reuses that truncation (truncationEpoch, T) and goes on to PENDING:
// no bump, no truncation. Safe because the bump exists to fence followers
// and record a truncation point, and there is nothing new to fence: since
// that truncation the leader's log only grew, by records the fetcher copied
// from S through the fetch protocol's divergence checks (with LMLE −1 they
// are all S's; with LMLE ≥ 0 every epoch > LMLE in it is S's), and every
// follower of an LE ≥ truncationEpoch was checked against this log, so none
// holds a record the leader lacks. A fetch bump (§6.2d) removes nothing and
// keeps it. Anything else is a cause, and the retry bumps and truncates per
// SPEC §6.6: another LMLE answer, a divergence or out-of-range truncation,
// a new leadership (a new leader's run), an operator's Start or Stop
// (Machine.keptFor).
//
// Source batches are checked too (FetchedBatches): an epoch above the
// source LE the fetch was made in, or MaxEpoch, cannot come from that
// leader; the answer is CORRUPT_MESSAGE (repeated → FAILED) rather than a
// bump to whatever the batch header says.
//
// The source-side rules (GetLastMirroredEpochs answers, the __mirror_state
// reader, the Fetch{MIRROR} topic-id check) live here too because both
// clusters must agree on them.
package plan
