package plan_test

import (
	"testing"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
)

// retryCfg retries every 100 ms (maxRand draws the backoff ceiling).
var retryCfg = plan.Config{PendingTimeoutMs: 1000, RetryInitialBackoffMs: 100, RetryMaxBackoffMs: 100, RetryMaxAttempts: 20}

// failAndRetry fails b's MIRRORING run with repeated CORRUPT_MESSAGE
// (SPEC §6.3: repeated → FAILED) and lets the backoff run out.
func failAndRetry(t *testing.T, b *cluster) {
	t.Helper()
	b.checkState(plan.Mirroring)
	for range 3 {
		b.step(plan.FetchError{Session: b.session, Error: twinlogv1.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE, Message: "crc"})
	}
	b.checkState(plan.Failed)
	b.tick(b.nowMs + 100)
}

// TestRetryAfterCorruptKeepsTruncation: a run that fails again and again
// on CORRUPT_MESSAGE retries without raising the LE or truncating: the first
// run's LMLE truncation (LMLE −1, full) is reused and the records it copied
// from the source stay (issue 13: retries must not ratchet epochs, and a
// retry with LMLE −1 must not truncate everything it copied).
func TestRetryAfterCorruptKeepsTruncation(t *testing.T) {
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.le = 3
	a.mustProduce(4)
	b.mustProduce(2) // stale 0-1@0b: the first run truncates them
	b.mirrorFrom(1, retryCfg)
	b.fetchUntilIdle()
	b.checkLog(a.log.String())
	le, bumps, truncs := b.le, len(b.bumps), len(b.truncations)
	if truncs != 1 || bumps != 2 { // run bump to 1, fetch bump to 3 (§6.2d)
		t.Fatalf("first run: bumps %v, truncations %v", b.bumps, b.truncations)
	}
	te := b.runRecord().GetTruncationEpoch()

	for i := range 5 {
		failAndRetry(t, b)
		b.checkState(plan.Mirroring)
		if b.le != le || len(b.bumps) != bumps || len(b.truncations) != truncs {
			t.Fatalf("retry %d: LE %d (was %d), bumps %v, truncations %v", i+1, b.le, le, b.bumps, b.truncations)
		}
		b.checkLog(a.log.String())
		r := b.runRecord()
		if r.GetRetryCount() != int32(i+1) || r.GetTruncationEpoch() != te || r.GetLmleUsed() != -1 || r.GetState() != plan.Mirroring {
			t.Fatalf("retry %d: run record %v", i+1, r)
		}
	}
	// The retried run mirrors on from where the copy stands.
	a.mustProduce(2)
	b.fetchUntilIdle()
	b.checkLog(a.log.String())
	if b.le != le || len(b.truncations) != truncs {
		t.Fatalf("after retries: LE %d, truncations %v", b.le, b.truncations)
	}
	checkMirrorInvariants(t, b)
}

// TestRetryAfterPendingTimeoutKeepsEpoch: a run that times out in PENDING
// (a replica does not align) retries in the same LE: one bump, one
// truncation, however often it retries; once the replica aligns in that LE
// the run mirrors.
func TestRetryAfterPendingTimeoutKeepsEpoch(t *testing.T) {
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.le = 1
	a.mustProduce(2)
	b.mustProduce(1)
	b.status = plan.ReplicaStatus{Replicas: []twinlog.BrokerID{1, 2}, ISR: []twinlog.BrokerID{1, 2}, MinInsyncReplicas: 2}
	b.mirrorFrom(1, retryCfg)
	b.checkState(plan.Pending)
	if len(b.bumps) != 1 || len(b.truncations) != 1 || b.le != 1 {
		t.Fatalf("first run: LE %d, bumps %v, truncations %v", b.le, b.bumps, b.truncations)
	}
	for i := range 5 {
		b.tick(b.nowMs + 1000)
		b.checkState(plan.Failed)
		b.tick(b.nowMs + 100)
		b.checkState(plan.Pending)
		if b.le != 1 || len(b.bumps) != 1 || len(b.truncations) != 1 {
			t.Fatalf("retry %d: LE %d, bumps %v, truncations %v", i+1, b.le, b.bumps, b.truncations)
		}
	}
	// Replica 2 fetches in LE 1: aligned for the run, which mirrors.
	b.status.FollowerAlignedEpoch = map[twinlog.BrokerID]twinlog.Epoch{2: 1}
	b.step(plan.ReplicaStatusChanged{Status: b.status})
	b.checkState(plan.Mirroring)
	b.fetchUntilIdle()
	b.checkLog(a.log.String())
	if b.le != 1 {
		t.Fatalf("LE %d", b.le)
	}
}

// TestRetryBumpsWithCause: a retry bumps and truncates again when it has a
// cause: another LMLE answer, a truncation since (divergence), a new
// leadership, an operator's Start.
func TestRetryBumpsWithCause(t *testing.T) {
	setup := func(t *testing.T) (a, b *cluster) {
		a, b = newCluster(t, 'a'), newCluster(t, 'b')
		link(a, b)
		a.le = 2
		a.mustProduce(3)
		b.mirrorFrom(1, retryCfg)
		b.fetchUntilIdle()
		b.checkLog(a.log.String())
		return a, b
	}
	wantBumped := func(t *testing.T, b *cluster, bumps, truncs int) {
		t.Helper()
		b.checkState(plan.Mirroring)
		if len(b.bumps) != bumps+1 || len(b.truncations) != truncs+1 {
			t.Fatalf("bumps %v, truncations %v: want one more of each", b.bumps, b.truncations)
		}
		if te := b.runRecord().GetTruncationEpoch(); te != int32(b.le) {
			t.Fatalf("truncationEpoch %d, LE %d", te, b.le)
		}
	}

	t.Run("another LMLE", func(t *testing.T) {
		a, b := setup(t)
		bumps, truncs := len(b.bumps), len(b.truncations)
		// A now records that it mirrored B up to epoch 0.
		a.lmles.Apply(a.lmleKey(), &twinlogv1.MirrorLmleRecord{Lmle: 0, SourceClusterId: b.id, LeaderEpochAfterStop: -1, LeoAtStop: -1, StateEpoch: int32(a.le)})
		failAndRetry(t, b)
		wantBumped(t, b, bumps, truncs)
		if got := b.runRecord().GetLmleUsed(); got != 0 {
			t.Fatalf("lmleUsed %d", got)
		}
	})
	t.Run("leader change", func(t *testing.T) {
		_, b := setup(t)
		for range 3 {
			b.step(plan.FetchError{Session: b.session, Error: twinlogv1.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE})
		}
		b.checkState(plan.Failed)
		b.leaderChange()
		bumps, truncs := len(b.bumps), len(b.truncations)
		b.tick(b.nowMs + 100)
		wantBumped(t, b, bumps, truncs)
	})
	t.Run("divergence truncation since", func(t *testing.T) {
		a, b := setup(t)
		// A truncates uncleanly and rewrites offset 2 in a new epoch: B's
		// fetch diverges and B bumps and truncates (§6.3).
		a.log.truncateTo(2)
		a.le++
		a.log.cache.Assign(a.le, 2)
		a.mustProduce(1)
		b.fetchUntilIdle()
		b.checkLog(a.log.String())
		bumps, truncs := len(b.bumps), len(b.truncations)
		failAndRetry(t, b)
		wantBumped(t, b, bumps, truncs)
	})
	t.Run("operator start", func(t *testing.T) {
		_, b := setup(t)
		for range 3 {
			b.step(plan.FetchError{Session: b.session, Error: twinlogv1.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE})
		}
		b.checkState(plan.Failed)
		bumps, truncs := len(b.bumps), len(b.truncations)
		b.mirrorFrom(2, retryCfg)
		wantBumped(t, b, bumps, truncs)
	})
}

// TestRedundantStartAdoptsGeneration: an operator's Start on a topic that is
// mirroring (the controller takes Start from desired MIRRORING, generation
// + 1) is satisfied by the going run: no bump, no truncation, the copy and
// the fetcher stay, and the run record takes the new generation. A later
// failure then retries with the run's truncation, in this leadership and in
// a new leader's (which finds desired and run at the same generation), instead
// of starting a fresh run whose LMLE −1 would truncate the whole copy.
func TestRedundantStartAdoptsGeneration(t *testing.T) {
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.le = 3
	a.mustProduce(4)
	b.mirrorFrom(1, retryCfg)
	b.fetchUntilIdle()
	b.checkLog(a.log.String())
	le, bumps, truncs := b.le, len(b.bumps), len(b.truncations)

	b.mirrorFrom(2, retryCfg) // mirrors start, again
	b.checkState(plan.Mirroring)
	if !b.fetching || b.le != le || len(b.bumps) != bumps || len(b.truncations) != truncs {
		t.Fatalf("redundant start: fetching %t, LE %d (was %d), bumps %v, truncations %v", b.fetching, b.le, le, b.bumps, b.truncations)
	}
	if r := b.runRecord(); r.GetGeneration() != 2 || r.GetState() != plan.Mirroring {
		t.Fatalf("run record after the redundant start: %v", r)
	}
	failAndRetry(t, b)
	b.checkState(plan.Mirroring)
	if b.le != le || len(b.truncations) != truncs {
		t.Fatalf("retry: LE %d (was %d), truncations %v", b.le, le, b.truncations)
	}
	b.checkLog(a.log.String())

	// A new leader of the failed run: it retries (its own bump, SPEC §6.5)
	// but keeps the copy rather than beginning generation 2 afresh.
	for range 3 {
		b.step(plan.FetchError{Session: b.session, Error: twinlogv1.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE, Message: "crc"})
	}
	b.checkState(plan.Failed)
	b.step(plan.LostLeadership{})
	b.le++
	b.becomeLeader()
	b.tick(b.nowMs + 100)
	b.fetchUntilIdle()
	b.checkState(plan.Mirroring)
	if got := b.runRecord().GetGeneration(); got != 2 {
		t.Fatalf("new leader's run generation %d, want 2", got)
	}
	b.checkLog(a.log.String())
	checkMirrorInvariants(t, b)
}

// TestStartWhileStopping: a Start that reaches the machine while it is
// stopping is not lost: the stop completes (writable, as the operator asked
// first) and the new run begins; a Stop after it undoes it.
func TestStartWhileStopping(t *testing.T) {
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	a.le = 1
	a.mustProduce(3)
	b.mirrorFrom(1, retryCfg)
	b.fetchUntilIdle()
	b.holdWrites = true
	b.stop()
	b.checkState(plan.Stopping)
	b.mirrorFrom(2, retryCfg)
	b.holdWrites = false
	b.releaseWrites()
	b.fetchUntilIdle()
	b.checkState(plan.Mirroring)
	if r := b.runRecord(); r.GetGeneration() != 2 {
		t.Fatalf("run record %v, want generation 2", r)
	}

	b.holdWrites = true
	b.stop()
	b.mirrorFrom(3, retryCfg)
	b.stop()
	b.holdWrites = false
	b.releaseWrites()
	b.checkState(plan.Stopped)
	if !b.writable {
		t.Fatal("stopped but not writable")
	}
}
