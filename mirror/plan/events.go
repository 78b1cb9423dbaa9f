package plan

import (
	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Event is an input to Machine.Step.
type Event interface{ isEvent() }

// Desired is the controller's desired state for the mirror topic (SPEC §3.1
// MirrorTopicRecord): MIRRORING, PAUSED, STOPPED, or UNSPECIFIED when the
// topic is in no mirror.
type Desired struct {
	State      twinlogv1.MirrorState
	Generation int64
	// SourceClusterID is the mirror's source cluster id; it is stored in the
	// LMLE record at stop.
	SourceClusterID string
}

// Start is StartMirrorTopics as applied from metadata (a new generation).
// Legal from new, STOPPED and FAILED; a generation not newer than the
// current run's is a no-op (metadata re-delivery).
type Start struct {
	Generation      int64
	SourceClusterID string
}

// Pause is PauseMirrorTopics (legal only from MIRRORING).
type Pause struct{}

// Resume is ResumeMirrorTopics (legal only from PAUSED).
type Resume struct{}

// Stop is StopMirrorTopics (legal from every state but STOPPED). With
// WaitForCatchUp the machine waits until the lag is 0, and answers
// StopResult{REQUEST_TIMED_OUT} with nothing changed after TimeoutMs.
type Stop struct {
	WaitForCatchUp bool
	TimeoutMs      int64
}

// BecameLeader: this broker leads the partition in LeaderEpoch (not through
// one of the machine's own bumps, which arrive as BumpDone). Run and Lmle are
// the records applied from __mirror_state (nil: none). TruncationPoints are
// the partition's truncation points from the controller's metadata (SPEC
// §6.2f), as applied to the replica together with LeaderEpoch.
//
// A point in LeaderEpoch itself means the LE was created by a bump with a
// truncation offset whose answer this machine never saw (lost or late; only
// the leader bumps its own LE): the controller committed the truncation, the
// replica answers follower fetches in the LE UNKNOWN_LEADER_EPOCH until it is
// done, and consumers treat the records above it as truncated. The machine
// therefore truncates there first (TruncateTo/TruncateFully, answered with
// TruncationDone) and only then starts from the records.
type BecameLeader struct {
	LeaderEpoch      twinlog.Epoch
	Run              *twinlogv1.MirrorRunRecord
	Lmle             *twinlogv1.MirrorLmleRecord
	Desired          Desired
	TruncationPoints []TruncationPoint
}

// TruncationPoint is a controller truncation point (SPEC §6.2f): the log of
// LeaderEpoch starts cut at Offset.
type TruncationPoint struct {
	LeaderEpoch twinlog.Epoch
	Offset      twinlog.Offset
}

// LostLeadership: this broker no longer leads the partition.
type LostLeadership struct{}

// LMLEAnswer answers QueryLMLE{Seq}: an LMLE, or an error (Fatal errors
// fail the run, others are retried with backoff).
type LMLEAnswer struct {
	Seq   uint64
	LMLE  twinlog.Epoch
	Error twinlogv1.ErrorCode
}

// BumpDone answers BumpLeaderEpoch{Seq} with the new leader epoch.
type BumpDone struct {
	Seq         uint64
	LeaderEpoch twinlog.Epoch
}

// BumpFailed answers BumpLeaderEpoch{Seq} with an error; it is retried on
// the next Tick (fencing errors arrive as LostLeadership too).
type BumpFailed struct {
	Seq   uint64
	Error twinlogv1.ErrorCode
}

// TruncationDone: the TruncateTo/TruncateFully{Seq} is done (log, cache, HW
// and LESO updated).
type TruncationDone struct{ Seq uint64 }

// ReplicaStatusChanged carries the leader's replica view; the shell sends it
// whenever ISR, R, follower alignment, min ISR or the unclean-support config
// change (at least while PENDING).
type ReplicaStatusChanged struct{ Status ReplicaStatus }

// WriteAcked: the __mirror_state write {Seq} is committed (acks=all).
type WriteAcked struct{ Seq uint64 }

// WriteFailed: the write {Seq} failed; it is rewritten on the next Tick.
type WriteFailed struct {
	Seq   uint64
	Error twinlogv1.ErrorCode
}

// TaintsAdded answers AddTaints{Seq} (Seq > 0, the taints of a run entering
// MIRRORING). Refused lists the taint targets the leader's replica found in
// its maximal ISR (committed, or added by an AlterPartition in flight) when
// the shell installed them; the replica then installed none of them.
type TaintsAdded struct {
	Seq     uint64
	Refused []twinlog.BrokerID
}

// FollowerRepaired: a tainted follower's fetch was answered without
// DivergingEpoch (SPEC §6.6 step 4); its taint is cleared once written.
type FollowerRepaired struct{ Replica twinlog.BrokerID }

// Fetched: a Fetch{MIRROR} response of Session was applied: every batch
// with epoch ≤ LE was appended (log end now at the Log's LEO). NowMs is the
// response time.
type Fetched struct {
	Session             uint64
	SourceHighWatermark twinlog.Offset
	SourceLogEndOffset  twinlog.Offset
	NowMs               int64
}

// FetchNeedsBump: a fetched batch has epoch Epoch > LE; the shell appended
// the batches before it and stopped (SPEC §6.2d).
type FetchNeedsBump struct {
	Session uint64
	Epoch   twinlog.Epoch
}

// FetchDiverging: the source answered DivergingEpoch{Epoch, EndOffset}.
type FetchDiverging struct {
	Session   uint64
	Epoch     twinlog.Epoch
	EndOffset twinlog.Offset
}

// FetchOutOfRange: the source answered OFFSET_OUT_OF_RANGE.
type FetchOutOfRange struct {
	Session              uint64
	SourceLogStartOffset twinlog.Offset
}

// FetchForeignEpoch: the first fetched batch, at BaseOffset, has epoch
// Epoch below the leader's latest cached epoch (see FetchedBatches); the
// shell appended nothing and stopped. SourceLogStartOffset is the source's
// log start from the same response.
type FetchForeignEpoch struct {
	Session              uint64
	Epoch                twinlog.Epoch
	BaseOffset           twinlog.Offset
	SourceLogStartOffset twinlog.Offset
}

// FetchStraddle: the first fetched batch, [BaseOffset, LastOffset], holds
// the leader's LEO inside it (BaseOffset < LEO ≤ LastOffset; see
// StraddleTruncation); the shell appended nothing and stopped.
// SourceLogStartOffset is the source's log start from the same response.
type FetchStraddle struct {
	Session              uint64
	BaseOffset           twinlog.Offset
	LastOffset           twinlog.Offset
	SourceLogStartOffset twinlog.Offset
}

// FetchError: the fetch failed. CORRUPT_MESSAGE counts towards
// Config.MaxCorruptFetches; Fatal errors fail the run; others (not leader,
// fenced/unknown epoch, INVALID_MIRROR_SOURCE, unreachable) only set
// lastError — the shell refreshes metadata and backs off (see Backoff).
type FetchError struct {
	Session uint64
	Error   twinlogv1.ErrorCode
	Message string
}

// Tick advances the machine's clock.
type Tick struct{ NowMs int64 }

func (Start) isEvent()                {}
func (Pause) isEvent()                {}
func (Resume) isEvent()               {}
func (Stop) isEvent()                 {}
func (BecameLeader) isEvent()         {}
func (LostLeadership) isEvent()       {}
func (LMLEAnswer) isEvent()           {}
func (BumpDone) isEvent()             {}
func (BumpFailed) isEvent()           {}
func (TruncationDone) isEvent()       {}
func (ReplicaStatusChanged) isEvent() {}
func (WriteAcked) isEvent()           {}
func (WriteFailed) isEvent()          {}
func (TaintsAdded) isEvent()          {}
func (FollowerRepaired) isEvent()     {}
func (Fetched) isEvent()              {}
func (FetchNeedsBump) isEvent()       {}
func (FetchDiverging) isEvent()       {}
func (FetchOutOfRange) isEvent()      {}
func (FetchForeignEpoch) isEvent()    {}
func (FetchStraddle) isEvent()        {}
func (FetchError) isEvent()           {}
func (Tick) isEvent()                 {}

// Action is an output the shell performs, in Ready order.
type Action interface{ isAction() }

// QueryLMLE: ask the source's GetLastMirroredEpochs; answer with LMLEAnswer.
type QueryLMLE struct{ Seq uint64 }

// BumpLeaderEpoch: send BumpLeaderEpoch to the controller with the current
// LeaderEpoch; answer with BumpDone/BumpFailed. TruncationOffset −1: none.
type BumpLeaderEpoch struct {
	Seq              uint64
	LeaderEpoch      twinlog.Epoch
	MinLeaderEpoch   twinlog.Epoch
	TruncationOffset twinlog.Offset
}

// TruncateReason labels truncations for metrics (SPEC §7).
type TruncateReason string

// Truncation reasons.
const (
	ReasonLMLE       TruncateReason = "lmle"
	ReasonDivergence TruncateReason = "divergence"
	ReasonOutOfRange TruncateReason = "out_of_range"
)

// TruncateTo: cut the log at Offset (truncateFromEnd, HW = min(HW, o)).
// Answer with TruncationDone.
type TruncateTo struct {
	Seq    uint64
	Offset twinlog.Offset
	Reason TruncateReason
}

// TruncateFully: drop every record and the cache; the log restarts at
// RestartAt. Answer with TruncationDone.
type TruncateFully struct {
	Seq       uint64
	RestartAt twinlog.Offset
	Reason    TruncateReason
}

// SetAlignedEpoch: persist aligned_epoch in partition.metadata (SPEC §2.1).
type SetAlignedEpoch struct{ Epoch twinlog.Epoch }

// WriteRunRecord: append the (mirror, topicId, partition) record to
// __mirror_state with acks=all; answer with WriteAcked/WriteFailed.
type WriteRunRecord struct {
	Seq    uint64
	Record *twinlogv1.MirrorRunRecord
}

// WriteLmleRecord: append the (topicId, partition) record, acks=all.
type WriteLmleRecord struct {
	Seq    uint64
	Record *twinlogv1.MirrorLmleRecord
}

// StartFetcher: run the Fetch{MIRROR} loop (fields from MirrorFetchRequest),
// reporting outcomes tagged with Session. After FetchNeedsBump,
// FetchDiverging, FetchOutOfRange or a fatal FetchError it must stop
// fetching until the next StartFetcher. The loop fetches only from a
// source leader whose LE is at least MinSourceLeaderEpoch
// (SourceLeaderEpochUsable).
type StartFetcher struct {
	Session uint64
	// MinSourceLeaderEpoch is lmleUsed + 1 (0 without an LMLE): a source
	// leader serves this run only in an epoch above the LMLE the source
	// answered (SourceLeaderEpochUsable).
	MinSourceLeaderEpoch twinlog.Epoch
}

// StopFetcher: stop the fetcher of Session; later outcomes are ignored.
type StopFetcher struct{ Session uint64 }

// SetWritable: accept (true) or reject with READ_ONLY_TOPIC (false)
// Produce. On true the shell makes the partition a normal one:
// assign(LeaderEpoch, LEO) in the epoch cache (SPEC §6.7 step 5).
type SetWritable struct {
	Writable    bool
	LeaderEpoch twinlog.Epoch
}

// FailPendingProduces: fail every pending Produce with Error (SPEC §6.6).
type FailPendingProduces struct{ Error twinlogv1.ErrorCode }

// AddTaints: answer these replicas per SPEC §4.3 step 4 and keep them out of
// the ISR (merge rule of MergeTaints).
//
// Seq 0: taints loaded from the durable record (BecameLeader): install them
// unconditionally. Seq > 0: the skipped replicas of a run entering
// MIRRORING (SPEC §6.6 step 4), computed from a ReplicaStatus that may be
// stale: install them only if none is in the replica's maximal ISR now, in
// the same critical section as the check (else none), and answer with
// TaintsAdded. An AlterPartition in flight may already be committed, so a
// taint of one of its additions would put a tainted replica in the ISR
// (§8.19); the machine writes no taint before the answer.
type AddTaints struct {
	Seq    uint64
	Taints []Taint
}

// ClearTaint: the replica's taint is cleared and durable; it may rejoin.
type ClearTaint struct{ Replica twinlog.BrokerID }

// StopResult answers a Stop{WaitForCatchUp} that could not proceed.
type StopResult struct{ Error twinlogv1.ErrorCode }

// Transition reports a state change, for the shell to log and count.
type Transition struct {
	From, To twinlogv1.MirrorState
	Reason   string
}

func (QueryLMLE) isAction()           {}
func (BumpLeaderEpoch) isAction()     {}
func (TruncateTo) isAction()          {}
func (TruncateFully) isAction()       {}
func (SetAlignedEpoch) isAction()     {}
func (WriteRunRecord) isAction()      {}
func (WriteLmleRecord) isAction()     {}
func (StartFetcher) isAction()        {}
func (StopFetcher) isAction()         {}
func (SetWritable) isAction()         {}
func (FailPendingProduces) isAction() {}
func (AddTaints) isAction()           {}
func (ClearTaint) isAction()          {}
func (StopResult) isAction()          {}
func (Transition) isAction()          {}

// DesiredChange is what a shell steps when the desired state in metadata
// goes from old to d while the machine is in state st (both shells,
// broker/ and the simulator's, call it, so they cannot drift):
//
//   - MIRRORING: Start for a new generation, or after STOPPED / none;
//     Resume after PAUSED; Start again if the machine is not started or
//     STOPPED (a new leadership of a running mirror).
//   - PAUSED: Start first if the run was started since the last look (a
//     new generation, or after STOPPED / none), then Pause on every change
//     to PAUSED whatever st is: the machine keeps a pause it cannot act on
//     yet as its desired state (Accepts; SPEC §6.5).
//   - STOPPED: Stop unless already STOPPING or STOPPED.
func DesiredChange(old, d Desired, st twinlogv1.MirrorState) []Event {
	start := Start{Generation: d.Generation, SourceClusterID: d.SourceClusterID}
	started := d.Generation > old.Generation || old.State == Stopped || old.State == NotStarted
	switch d.State {
	case Mirroring:
		switch {
		case started:
			return []Event{start}
		case old.State == Paused:
			return []Event{Resume{}}
		case st == NotStarted || st == Stopped:
			return []Event{start}
		}
	case Paused:
		var evs []Event
		if started {
			evs = append(evs, start)
		}
		if old.State != Paused {
			evs = append(evs, Pause{})
		}
		return evs
	case Stopped:
		if st != Stopped && st != Stopping {
			return []Event{Stop{}}
		}
	}
	return nil
}
