package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/twinlog/twinlog/internal/history"
)

// The two-cluster history checker. Each cluster's partitions are checked
// by their own history.History (SPEC §8.12, §8.13: offsets with two values,
// values at two offsets, non-monotonic reads, lost acks=all writes), fed
// with that cluster's acks, reads, consumer repositionings and recorded
// truncations (truncation points with their offsets and unclean elections,
// from the controller's change log). On top of them it models the mirror:
//
//   - failover k (Y stops mirroring X, era k begins): the snapshot of Y's
//     log below its stop point L (the first record produced on Y in era k)
//     must hold every write X acknowledged in era k-1 below L with the
//     same value; those become acks of Y (transferred), which Y's History
//     then requires to the end. Writes X acknowledged at or above L were
//     never mirrored: the failback truncates them away (SPEC §6.6, §6.9),
//     and X's History excuses their loss only where a truncation point
//     recorded after the ack covers their offset. A planned failover
//     (producers paused, stop with waitForCatchUp) may leave none.
//   - failback k (X mirrors Y): X's run must use the LMLE Y recorded when
//     it stopped (SPEC §6.4, §6.6 step 1; from DescribeMirrors). When that
//     LMLE is the epoch of Y's last record below its stop point L (Y's
//     leader was aligned), no truncation of X until X is writable again may
//     cut below L: X's LMLE truncation keeps every epoch ≤ LMLE (§6.6 step
//     2) and the divergence truncation after it stops at Y's end of the
//     LMLE epoch, which is L (§6.9 rows 8–9).
//   - after the final failback and catch-up both clusters hold the same
//     records (offset, value, record epoch) below the same HW.
//
// Unclean elections (none expected: the topic uses
// unclean.recovery.strategy=none) excuse any change on their cluster.

// checkResult is the checker's verdict and counts.
type checkResult struct {
	Violations []history.Violation
	Counts     map[string]int
	History    map[string]string // per cluster: History.Summary()
}

func (r *checkResult) violate(inv, tp, format string, args ...any) {
	r.Violations = append(r.Violations, history.Violation{Invariant: inv, Partition: tp, Detail: fmt.Sprintf(format, args...)})
}

type ackRec struct {
	cl, tp string
	off    int64
	val    string
	le     int32
	era    int
}

type snapPart struct {
	vals map[int64]string
	eps  map[int64]int32
	end  int64 // stop point L
	le   int32
	done bool
	fail string
}

type failoverRec struct {
	era      int
	from, to string
	kind     string
}

type finalLog struct {
	vals map[int64]string
	eps  map[int64]int32
	le   int32
	hw   int64
	done bool
}

// readHistory decodes a JSON-lines history.
func readHistory(r io.Reader) ([]event, error) {
	var evs []event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("line %d: %w", len(evs)+1, err)
		}
		evs = append(evs, ev)
	}
	return evs, sc.Err()
}

// check runs the checker over a whole history (in the order it was
// recorded). Truncation points and unclean elections are fed first: the
// History compares leader epochs, and the observer reports them with a
// delay.
func check(evs []event) *checkResult {
	res := &checkResult{Counts: map[string]int{}, History: map[string]string{}}
	h := map[string]*history.History{"a": history.NewHistory(), "b": history.NewHistory()}
	valid := func(cl string) bool { return h[cl] != nil }
	// unclean[cl][tp]: leader epochs installed by unclean elections.
	unclean := map[string]map[string][]int32{"a": {}, "b": {}}
	for _, ev := range evs {
		if !valid(ev.Cl) {
			continue
		}
		switch ev.Ev {
		case "trunc":
			h[ev.Cl].RecordTruncationPoint(ev.TP, ev.LE, ev.Off)
			res.Counts["truncation points "+ev.Cl]++
		case "leader":
			res.Counts["leader epochs "+ev.Cl]++
		case "unclean":
			h[ev.Cl].RecordTruncation(ev.TP, ev.LE)
			unclean[ev.Cl][ev.TP] = append(unclean[ev.Cl][ev.TP], ev.LE)
			res.Counts["unclean elections "+ev.Cl]++
		}
	}

	var acks []ackRec
	snaps := map[int]map[string]*snapPart{} // era -> tp -> snapshot
	snap := func(era int, tp string) *snapPart {
		if snaps[era] == nil {
			snaps[era] = map[string]*snapPart{}
		}
		s := snaps[era][tp]
		if s == nil {
			s = &snapPart{vals: map[int64]string{}, eps: map[int64]int32{}}
			snaps[era][tp] = s
		}
		return s
	}
	var failovers []failoverRec
	finals := map[string]map[string]*finalLog{"a": {}, "b": {}}
	final := func(cl, tp string) *finalLog {
		f := finals[cl][tp]
		if f == nil {
			f = &finalLog{vals: map[int64]string{}, eps: map[int64]int32{}}
			finals[cl][tp] = f
		}
		return f
	}
	tps := map[string]bool{}
	// stoppedLMLE[era][tp]: the LMLE the cluster that stopped in failover
	// era recorded; following[cl]: the failback whose mirror cl runs (0:
	// none, cl is writable).
	stoppedLMLE := map[int]map[string]int32{}
	following := map[string]int{}
	for _, ev := range evs {
		switch ev.Ev {
		case "failback":
			res.Counts["failbacks"]++
		case "op-error":
			res.violate("liveness: operator step failed", "", "%s", ev.Msg)
		case "fault":
			res.Counts["faults"]++
		}
		if !valid(ev.Cl) {
			continue
		}
		hc := h[ev.Cl]
		switch ev.Ev {
		case "ack":
			hc.RecordAck(ev.TP, ev.Off, ev.Val, ev.LE, true, 2)
			acks = append(acks, ackRec{cl: ev.Cl, tp: ev.TP, off: ev.Off, val: ev.Val, le: ev.LE, era: ev.Era})
			res.Counts["acked "+ev.Cl]++
			tps[ev.TP] = true
		case "read":
			hc.RecordRead(ev.C, ev.TP, ev.Off, ev.Val, ev.LE)
			res.Counts["consumed "+ev.Cl]++
			tps[ev.TP] = true
		case "mstatus":
			switch ev.Kind {
			case "stopped":
				if stoppedLMLE[ev.Era] == nil {
					stoppedLMLE[ev.Era] = map[string]int32{}
				}
				stoppedLMLE[ev.Era][ev.TP] = ev.LE
			case "mirroring":
				want, ok := stoppedLMLE[ev.Era][ev.TP]
				if !ok {
					break
				}
				res.Counts["failback LMLE checks"]++
				if ev.LE != want {
					res.violate("§6.6 failback used another LMLE than the stop recorded", ev.Cl+"/"+ev.TP,
						"failback %d: %s's run used LMLE %d, %s recorded LMLE %d when it stopped (GetLastMirroredEpochs, SPEC §6.4)",
						ev.Era, ev.Cl, ev.LE, other(ev.Cl), want)
				}
			}
		case "failback":
			following[ev.Cl] = ev.Era
		case "trunc":
			k := following[ev.Cl]
			lmle, ok := stoppedLMLE[k][ev.TP]
			sp := snaps[k][ev.TP]
			if k == 0 || !ok || sp == nil || !sp.done || sp.end == 0 {
				break
			}
			if last, ok := sp.eps[sp.end-1]; !ok || last != lmle {
				res.Counts["failback truncations unchecked (LMLE not the stop point's epoch)"]++
				break
			}
			res.Counts["failback truncation offset checks"]++
			if ev.Off < sp.end {
				res.violate("§6.6 failback truncated records both clusters share", ev.Cl+"/"+ev.TP,
					"failback %d: %s truncated from offset %d (LE %d); %s stopped at %d with LMLE %d, the epoch of its record at %d",
					k, ev.Cl, ev.Off, ev.LE, other(ev.Cl), sp.end, lmle, sp.end-1)
			}
		case "repos":
			hc.RecordReposition(ev.C, ev.TP, ev.Off)
			res.Counts["consumer repositions ("+ev.Kind+")"]++
		case "reset":
			hc.RecordReset(ev.C, ev.TP)
			res.Counts["consumer resets ("+ev.Kind+")"]++
		case "violation":
			res.violate("§8.13 read at or above HW", ev.Cl+"/"+ev.TP, "offset %d: %s", ev.Off, ev.Msg)
		case "snap":
			s := snap(ev.Era, ev.TP)
			s.vals[ev.Off], s.eps[ev.Off] = ev.Val, ev.Ep
			hc.RecordRead(fmt.Sprintf("snapshot%d", ev.Era), ev.TP, ev.Off, ev.Val, ev.LE)
		case "snapend":
			s := snap(ev.Era, ev.TP)
			s.end, s.le, s.done = ev.Off, ev.LE, true
		case "snapfail":
			snap(ev.Era, ev.TP).fail = ev.Msg
		case "failover":
			following[ev.Cl] = 0
			failovers = append(failovers, failoverRec{era: ev.Era, from: ev.Target, to: ev.Cl, kind: ev.Kind})
			res.Counts["failovers "+ev.Kind]++
		case "finalrec":
			f := final(ev.Cl, ev.TP)
			f.vals[ev.Off], f.eps[ev.Off] = ev.Val, ev.Ep
		case "final":
			f := final(ev.Cl, ev.TP)
			f.le, f.hw, f.done = ev.LE, ev.N, true
		}
	}

	// Failovers: transfer or excuse each write the old source acknowledged
	// in the era that ended.
	for _, fo := range failovers {
		x, y := fo.from, fo.to
		for _, a := range acks {
			if a.cl != x || a.era != fo.era-1 {
				continue
			}
			s := snaps[fo.era][a.tp]
			if s == nil || !s.done {
				res.Counts["acks unchecked at failover (no snapshot)"]++
				continue
			}
			if a.off >= s.end {
				res.Counts["acks not mirrored before failover (truncated by failback)"]++
				if fo.kind == "planned" {
					res.violate("§6.7 planned failover lost an acked write", x+"/"+a.tp,
						"failover %d (stop with waitForCatchUp after the producers paused): %s acked %q at offset %d (LE %d), %s stopped at %d",
						fo.era, x, a.val, a.off, a.le, y, s.end)
				}
				continue
			}
			v, ok := s.vals[a.off]
			if ok && v == a.val {
				h[y].RecordAck(a.tp, a.off, a.val, s.le, true, 2)
				res.Counts["acks transferred at failover"]++
				continue
			}
			if slices.ContainsFunc(unclean[x][a.tp], func(le int32) bool { return le > a.le }) {
				res.Counts["acks lost to unclean elections"]++
				continue
			}
			if !ok {
				v = "<absent>"
			}
			res.violate("§8.12 acked write lost in failover", x+"/"+a.tp,
				"failover %d (%s): %s acked %q at offset %d (LE %d); %s holds %q there, below its stop point %d",
				fo.era, fo.kind, x, a.val, a.off, a.le, y, v, s.end)
		}
	}

	// Final logs: acked writes kept (per cluster), both clusters identical.
	names := slices.Sorted(maps.Keys(tps))
	for _, cl := range []string{"a", "b"} {
		for _, tp := range names {
			f := finals[cl][tp]
			if f == nil || !f.done {
				res.violate("liveness: no final log", cl+"/"+tp, "the final catch-up did not read this partition")
				continue
			}
			h[cl].Final(tp, f.vals, f.le)
		}
	}
	for _, tp := range names {
		fa, fb := finals["a"][tp], finals["b"][tp]
		if fa == nil || fb == nil || !fa.done || !fb.done {
			continue
		}
		res.Counts["final records"] += len(fa.vals)
		var diffs []string
		n := 0
		for o := range max(fa.hw, fb.hw) {
			va, oka := fa.vals[o]
			vb, okb := fb.vals[o]
			if oka == okb && va == vb && fa.eps[o] == fb.eps[o] {
				continue
			}
			n++
			if len(diffs) < 5 {
				diffs = append(diffs, fmt.Sprintf("offset %d: a %s, b %s", o, recString(va, fa.eps[o], oka), recString(vb, fb.eps[o], okb)))
			}
		}
		if n > 0 || fa.hw != fb.hw {
			res.violate("§8.21 clusters differ after failback and catch-up", tp, "HW a %d, b %d; %d offsets differ: %s",
				fa.hw, fb.hw, n, strings.Join(diffs, "; "))
		}
	}
	for _, cl := range []string{"a", "b"} {
		for _, v := range h[cl].Violations() {
			v.Partition = cl + "/" + v.Partition
			res.Violations = append(res.Violations, v)
		}
		res.History[cl] = h[cl].Summary()
	}
	return res
}

func recString(v string, ep int32, ok bool) string {
	if !ok {
		return "<absent>"
	}
	return fmt.Sprintf("%q@e%d", v, ep)
}

// violationLines groups violations by invariant and partition: a count
// and the first few of each (the history file has them all).
func violationLines(vs []history.Violation, perGroup int) []string {
	type key struct{ inv, tp string }
	var order []key
	groups := map[key][]history.Violation{}
	for _, v := range vs {
		k := key{v.Invariant, v.Partition}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], v)
	}
	var out []string
	for _, k := range order {
		g := groups[k]
		out = append(out, fmt.Sprintf("VIOLATION x%d %s: %s", len(g), k.inv, k.tp))
		for i, v := range g {
			if i == perGroup {
				out = append(out, fmt.Sprintf("    ... %d more", len(g)-perGroup))
				break
			}
			out = append(out, "    "+v.Detail)
		}
	}
	return out
}

// countsString renders counts as "k=v" sorted by key.
func countsString(m map[string]int) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(out, ", ")
}
