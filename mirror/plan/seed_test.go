package plan_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/mirror/plan"
)

// TestSeedSequence reproduces SPEC §6.9 rows 1–10 (the seed's steps 1–3):
// exact leader logs after every row, the LMLE answers −1, 1, 3, the bumps
// (LE_B 1, 2, 5, 6; LE_A 3, 4), B's one lmle and one divergence truncation,
// and identical logs at the end.
func TestSeedSequence(t *testing.T) {
	a, b := newCluster(t, 'a'), newCluster(t, 'b')
	link(a, b)
	var cfg plan.Config

	// 1. A writable, LE_A 1; B creates the mirror.
	a.mustProduce(1) // 0@0a
	a.leaderChange()
	a.mustProduce(1) // 1@1a
	a.checkLog("0@0a 1@1a")
	b.checkLog("")

	// 2. B: LMLE(A) −1, bump LE_B 1, truncate all; copy.
	b.writable = false // a mirror topic is created read-only
	b.mirrorFrom(1, cfg)
	b.checkState(plan.Mirroring)
	b.checkLE(1)
	if b.minSrcLE != 0 {
		t.Fatalf("row 2 run fetches from source LE %d up, want 0 (no LMLE)", b.minSrcLE)
	}
	if out := b.fetch(); out.req != (plan.FetchRequest{FetchOffset: 0, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}) {
		t.Fatalf("row 2 fetch request %+v", out.req)
	}
	a.checkLog("0@0a 1@1a")
	b.checkLog("0@0a 1@1a")
	if e := b.produce(); e.String() != "ERROR_CODE_READ_ONLY_TOPIC" {
		t.Fatalf("produce on mirror B = %v", e)
	}

	// 3. A leader change (LE_A 2), writes; A fails before B copies.
	a.leaderChange()
	a.mustProduce(1)
	a.up = false
	a.checkLog("0@0a 1@1a 2@2a")
	b.checkLog("0@0a 1@1a")

	// 4. stop on B: LMLE_B 1, LE_B 2, writes; leader change LE_B 3, writes.
	b.stop()
	b.checkState(plan.Stopped)
	b.checkLE(2)
	if got := b.lmleRecord().GetLmle(); got != 1 {
		t.Fatalf("LMLE_B = %d, want 1", got)
	}
	b.mustProduce(1)
	b.leaderChange()
	b.checkState(plan.Stopped)
	b.mustProduce(1)
	b.checkLog("0@0a 1@1a 2@2b 3@3b")

	// 5. A mirrors B: LMLE 1, bump LE_A 3, drop 2@2a; fetch(2, last 1) → (1, 2) ok; copy.
	a.up = true
	a.writable = false // Start makes it read-only; the machine says so too
	a.mirrorFrom(1, cfg)
	a.checkLE(3)
	a.checkLog("0@0a 1@1a")
	if a.minSrcLE != 2 {
		t.Fatalf("row 5 run fetches from source LE %d up, want 2 (LMLE 1 + 1)", a.minSrcLE)
	}
	if out := a.fetch(); out.req.FetchOffset != 2 || out.req.LastFetchedEpoch != 1 {
		t.Fatalf("row 5 fetch request %+v", out.req)
	}
	a.fetchUntilIdle()
	a.checkLog("0@0a 1@1a 2@2b 3@3b")
	b.checkLog("0@0a 1@1a 2@2b 3@3b")
	a.checkLE(3)

	// 6. B writes; leader change LE_B 4, writes; B fails before A copies.
	b.mustProduce(1)
	b.leaderChange()
	b.mustProduce(1)
	b.up = false
	b.checkLog("0@0a 1@1a 2@2b 3@3b 4@3b 5@4b")

	// 7. stop on A: LMLE_A 3, LE_A 4; A writes.
	a.stop()
	a.checkLE(4)
	if got := a.lmleRecord().GetLmle(); got != 3 {
		t.Fatalf("LMLE_A = %d, want 3", got)
	}
	a.mustProduce(2)
	a.checkLog("0@0a 1@1a 2@2b 3@3b 4@4a 5@4a")

	// 8. B mirrors A: LMLE 3, bump LE_B 5, drop 5@4b.
	b.up = true
	b.mirrorFrom(2, cfg)
	b.checkLE(5)
	b.checkLog("0@0a 1@1a 2@2b 3@3b 4@3b")
	// Only A's leaders after its stop may serve the run: not one of LE ≤ 3
	// (simulator seed 1737467).
	if b.minSrcLE != 4 {
		t.Fatalf("row 8 run fetches from source LE %d up, want 4 (LMLE 3 + 1)", b.minSrcLE)
	}

	// 9. fetch(5, last 3): A (3, 4) → DivergingEpoch → bump LE_B 6, truncate to 4.
	out := b.fetch()
	if out.req.FetchOffset != 5 || out.req.LastFetchedEpoch != 3 {
		t.Fatalf("row 9 fetch request %+v", out.req)
	}
	if d, ok := out.ev.(plan.FetchDiverging); !ok || d.Epoch != 3 || d.EndOffset != 4 {
		t.Fatalf("row 9 outcome %+v, want DivergingEpoch{3, 4}", out.ev)
	}
	b.checkLE(6)
	b.checkLog("0@0a 1@1a 2@2b 3@3b")

	// 10. fetch(4, last 3) ok; copy.
	out = b.fetch()
	if out.req.FetchOffset != 4 || out.req.LastFetchedEpoch != 3 {
		t.Fatalf("row 10 fetch request %+v", out.req)
	}
	b.fetchUntilIdle()
	a.checkLog("0@0a 1@1a 2@2b 3@3b 4@4a 5@4a")
	b.checkLog(a.log.String())
	if d := cmp.Diff(a.log.cache.Entries(), b.log.cache.Entries()); d != "" {
		t.Fatalf("caches differ (-A +B):\n%s", d)
	}
	b.checkLE(6)

	// The LMLE answers, bumps and truncations of the whole sequence.
	if want := []twinlog.Epoch{-1, 3}; !slices.Equal(b.answers, want) {
		t.Errorf("B's LMLE answers %v, want %v", b.answers, want)
	}
	if want := []twinlog.Epoch{1}; !slices.Equal(a.answers, want) {
		t.Errorf("A's LMLE answers %v, want %v", a.answers, want)
	}
	if want := []twinlog.Epoch{1, 2, 5, 6}; !slices.Equal(b.bumps, want) {
		t.Errorf("LE_B bumps %v, want %v", b.bumps, want)
	}
	if want := []twinlog.Epoch{3, 4}; !slices.Equal(a.bumps, want) {
		t.Errorf("LE_A bumps %v, want %v", a.bumps, want)
	}
	if want := []plan.TruncateReason{plan.ReasonLMLE, plan.ReasonDivergence}; !slices.Equal(b.truncations, want) {
		t.Errorf("B truncations %v, want %v", b.truncations, want)
	}
	if want := []plan.TruncateReason{plan.ReasonLMLE}; !slices.Equal(a.truncations, want) {
		t.Errorf("A truncations %v, want %v", a.truncations, want)
	}
	if st := b.m.Status(); st.LagRecords != 0 || st.Lmle != 3 {
		t.Errorf("B status lag %d lmle %d", st.LagRecords, st.Lmle)
	}
	// Epochs 0–1 are A's, 2–3 B's, 4 A's (inv. 20).
	owner := map[twinlog.Epoch]byte{}
	for _, r := range a.log.recs {
		if o, ok := owner[r.ep]; ok && o != r.origin {
			t.Errorf("epoch %d has records from %c and %c", r.ep, o, r.origin)
		}
		owner[r.ep] = r.origin
	}
	checkMirrorInvariants(t, b)
}

// checkMirrorInvariants: LE ≥ every record epoch and every batch epoch is the
// cache epoch covering it (inv. 10, 16).
func checkMirrorInvariants(t *testing.T, c *cluster) {
	t.Helper()
	for _, r := range c.log.recs {
		if r.ep > c.le {
			t.Errorf("%s: record %v above LE %d", c.id, r, c.le)
		}
		if e := c.log.cache.EpochForOffset(r.off); e != r.ep {
			t.Errorf("%s: record %v covered by cache epoch %d", c.id, r, e)
		}
	}
}
