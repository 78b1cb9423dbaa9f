package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// hist builds synthetic histories for the checker: one partition "t-0".
type hist struct{ evs []event }

func (h *hist) add(ev event) *hist {
	if ev.TP == "" && ev.Ev != "failover" && ev.Ev != "failback" {
		ev.TP = "t-0"
	}
	h.evs = append(h.evs, ev)
	return h
}

func (h *hist) ack(cl string, era int, off int64, val string, le int32) *hist {
	return h.add(event{Ev: "ack", Cl: cl, Era: era, Off: off, Val: val, LE: le})
}

func (h *hist) read(cl string, off int64, val string, le int32) *hist {
	return h.add(event{Ev: "read", Cl: cl, C: "c0", Off: off, Val: val, LE: le})
}

// snapshot: cl's log below its stop point for failover era.
func (h *hist) snapshot(cl string, era int, le int32, vals ...string) *hist {
	for i, v := range vals {
		h.add(event{Ev: "snap", Cl: cl, Era: era, Off: int64(i), Val: v, LE: le})
	}
	return h.add(event{Ev: "snapend", Cl: cl, Era: era, Off: int64(len(vals)), LE: le})
}

// final: cl's final log (record epoch 1 unless eps says otherwise).
func (h *hist) final(cl string, le int32, vals []string, eps ...int32) *hist {
	for i, v := range vals {
		ep := int32(1)
		if i < len(eps) {
			ep = eps[i]
		}
		h.add(event{Ev: "finalrec", Cl: cl, Off: int64(i), Val: v, Ep: ep})
	}
	return h.add(event{Ev: "final", Cl: cl, LE: le, N: int64(len(vals))})
}

func invariants(r *checkResult) string {
	var out []string
	for _, v := range r.Violations {
		out = append(out, v.Partition+" "+v.Invariant)
	}
	return strings.Join(out, ", ")
}

// failoverFailback: A acks 0–3 in era 0, B copies 0–2; failover 1
// (unplanned) stops B at 3; B acks 3–4 in era 1; A fails back, truncating
// from 3 at LE 5 (trunc), and copies B's log.
func failoverFailback(planned string, trunc bool) *hist {
	h := &hist{}
	h.ack("a", 0, 0, "a0.p0.0", 1).ack("a", 0, 1, "a0.p0.1", 1).ack("a", 0, 2, "a0.p0.2", 1)
	h.read("b", 0, "a0.p0.0", 2).read("b", 1, "a0.p0.1", 2).read("b", 2, "a0.p0.2", 2)
	h.ack("a", 0, 3, "a0.p0.3", 1)
	h.read("a", 3, "a0.p0.3", 1)
	h.add(event{Ev: "failover", Cl: "b", Target: "a", Era: 1, Kind: planned})
	h.snapshot("b", 1, 3, "a0.p0.0", "a0.p0.1", "a0.p0.2")
	h.ack("b", 1, 3, "b1.p0.4", 3).ack("b", 1, 4, "b1.p0.5", 3)
	h.add(event{Ev: "failback", Cl: "a", Target: "b", Era: 1})
	if trunc {
		h.add(event{Ev: "trunc", Cl: "a", LE: 5, Off: 3})
	}
	h.add(event{Ev: "repos", Cl: "a", C: "c0", Off: 3, Kind: "log-truncated"})
	h.read("a", 3, "b1.p0.4", 5)
	logB := []string{"a0.p0.0", "a0.p0.1", "a0.p0.2", "b1.p0.4", "b1.p0.5"}
	return h.final("b", 3, logB).final("a", 6, logB)
}

func TestCheckFailoverFailbackClean(t *testing.T) {
	r := check(failoverFailback("unplanned", true).evs)
	if len(r.Violations) != 0 {
		t.Fatalf("violations: %v", r.Violations)
	}
	if r.Counts["acks transferred at failover"] != 3 || r.Counts["acks not mirrored before failover (truncated by failback)"] != 1 {
		t.Fatalf("counts: %s", countsString(r.Counts))
	}
}

func TestCheckFailbackWithoutTruncationPoint(t *testing.T) {
	// The unmirrored ack at 3 is replaced on A with no truncation point
	// recorded: A showed two values at 3 and lost an ack.
	r := check(failoverFailback("unplanned", false).evs)
	if got := invariants(r); got != "a/t-0 §8.13 offset with two values, a/t-0 §8.13 offset with two values, a/t-0 §8.12 acked write lost" {
		t.Fatalf("got %q", got)
	}
}

func TestCheckPlannedFailoverMustTransferAll(t *testing.T) {
	r := check(failoverFailback("planned", true).evs)
	if got := invariants(r); got != "a/t-0 §6.7 planned failover lost an acked write" {
		t.Fatalf("got %q", got)
	}
}

func TestCheckTruncationPointCoversOnlyItsOffsets(t *testing.T) {
	// The failback's truncation point covers offsets ≥ 3: a transferred
	// ack at 1 must survive on both clusters.
	h := failoverFailback("unplanned", true)
	var evs []event
	for _, ev := range h.evs {
		if ev.Ev == "finalrec" && ev.Off == 1 {
			ev.Val = "b1.p9.9"
		}
		evs = append(evs, ev)
	}
	got := invariants(check(evs))
	for _, want := range []string{"a/t-0 §8.12 acked write lost", "b/t-0 §8.12 acked write lost", "b/t-0 §8.13 offset with two values"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in %q", want, got)
		}
	}
}

func TestCheckSnapshotMismatch(t *testing.T) {
	// B's log below its stop point holds another value where A acked.
	h := &hist{}
	h.ack("a", 0, 0, "a0.p0.0", 1)
	h.add(event{Ev: "failover", Cl: "b", Target: "a", Era: 1, Kind: "unplanned"})
	h.snapshot("b", 1, 3, "a0.p1.7")
	h.final("b", 3, []string{"a0.p1.7"}).final("a", 4, []string{"a0.p1.7"})
	got := invariants(check(h.evs))
	if !strings.HasPrefix(got, "a/t-0 §8.12 acked write lost in failover") {
		t.Fatalf("got %q", got)
	}
	// An unclean election on A after the ack excuses it (and A's loss).
	h.add(event{Ev: "unclean", Cl: "a", LE: 2})
	if r := check(h.evs); len(r.Violations) != 0 {
		t.Fatalf("violations: %v", r.Violations)
	}
}

func TestCheckClustersDiffer(t *testing.T) {
	h := &hist{}
	h.ack("a", 0, 0, "a0.p0.0", 1)
	h.final("a", 1, []string{"a0.p0.0", "a0.p0.1"}).final("b", 2, []string{"a0.p0.0"})
	if got := invariants(check(h.evs)); got != "t-0 §8.21 clusters differ after failback and catch-up" {
		t.Fatalf("got %q", got)
	}
	// A record epoch that differs counts too.
	h = &hist{}
	h.final("a", 1, []string{"x"}, 1).final("b", 2, []string{"x"}, 2)
	h.read("a", 0, "x", 1)
	if got := invariants(check(h.evs)); got != "t-0 §8.21 clusters differ after failback and catch-up" {
		t.Fatalf("got %q", got)
	}
}

func TestCheckRepositionAndLiveness(t *testing.T) {
	h := &hist{}
	h.read("a", 5, "x5", 1)
	h.add(event{Ev: "repos", Cl: "a", C: "c0", Off: 3, Kind: "log-truncated"})
	h.read("a", 3, "x3", 2)
	h.add(event{Ev: "op-error", Msg: "stop timed out"})
	got := invariants(check(h.evs))
	if got != " liveness: operator step failed, a/t-0 liveness: no final log, b/t-0 liveness: no final log" {
		t.Fatalf("got %q", got)
	}
}

func TestReadHistoryRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, ev := range failoverFailback("unplanned", true).evs {
		if err := enc.Encode(ev); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := readHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if r := check(evs); len(r.Violations) != 0 || r.Counts["acks transferred at failover"] != 3 {
		t.Fatalf("violations %v, counts %s", r.Violations, countsString(r.Counts))
	}
}

func TestCheckFailbackLMLE(t *testing.T) {
	// B stopped at 4 with LMLE 1, the epoch of its record at 3; A wrote 4–5
	// in epoch 1 too (a straggler) and 6 in epoch 2.
	base := func() *hist {
		h := &hist{}
		h.add(event{Ev: "failover", Cl: "b", Target: "a", Era: 1, Kind: "unplanned"})
		h.add(event{Ev: "mstatus", Cl: "b", Era: 1, Kind: "stopped", LE: 1})
		for o := range int64(4) {
			h.add(event{Ev: "snap", Cl: "b", Era: 1, Off: o, Val: fmt.Sprintf("v%d", o), Ep: 1, LE: 3})
		}
		h.add(event{Ev: "snapend", Cl: "b", Era: 1, Off: 4, LE: 3})
		h.add(event{Ev: "failback", Cl: "a", Target: "b", Era: 1})
		return h
	}
	// LMLE truncation from 6 (the first epoch > 1), divergence to 4: fine.
	h := base().add(event{Ev: "trunc", Cl: "a", LE: 3, Off: 6}).add(event{Ev: "trunc", Cl: "a", LE: 4, Off: 4})
	h.add(event{Ev: "mstatus", Cl: "a", Era: 1, Kind: "mirroring", LE: 1})
	r := check(h.evs)
	if got := invariants(r); strings.Contains(got, "§6.6") {
		t.Fatalf("got %q", got)
	}
	if r.Counts["failback truncation offset checks"] != 2 || r.Counts["failback LMLE checks"] != 1 {
		t.Fatalf("counts %s", countsString(r.Counts))
	}
	// LMLE -1 used, truncating everything.
	h = base().add(event{Ev: "trunc", Cl: "a", LE: 3, Off: 0}).add(event{Ev: "mstatus", Cl: "a", Era: 1, Kind: "mirroring", LE: -1})
	got := invariants(check(h.evs))
	for _, want := range []string{"a/t-0 §6.6 failback truncated records both clusters share", "a/t-0 §6.6 failback used another LMLE than the stop recorded"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in %q", want, got)
		}
	}
	// Once A is writable again (failover 2) its truncations are not the
	// failback's.
	h = base().add(event{Ev: "failover", Cl: "a", Target: "b", Era: 2, Kind: "planned"}).add(event{Ev: "trunc", Cl: "a", LE: 3, Off: 0})
	if got := invariants(check(h.evs)); strings.Contains(got, "§6.6") {
		t.Fatalf("got %q", got)
	}
}
