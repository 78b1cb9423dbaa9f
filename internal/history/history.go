package history

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// History records what clients saw of one cluster's partitions and checks it
// against SPEC §8 invariants 12 and 13 (Jepsen style): producers write unique
// values, so every value names one write.
//
// It records acknowledged writes (offset, value, the leader epoch that
// appended them), consumed records (offset, value, the leader epoch that
// served them), recorded truncations (unclean elections and truncation points
// with the leader epoch they installed, optionally with the offset a
// truncation point cut from), lossy unclean shutdowns and consumer
// repositionings. It reports:
//
//   - an offset seen with two values without a recorded truncation between
//     (the leader epochs that showed them straddle no recorded truncation;
//     a truncation point recorded with its offset o only counts for
//     offsets ≥ o);
//   - a value seen at two offsets (values are never retried);
//   - non-monotonic reads of one consumer (without a repositioning between);
//   - at Final: acks=all writes lost or changed, unless a recorded truncation
//     (covering the offset) happened after the ack or at least m lossy
//     unclean shutdowns of replicas holding the record did.
//
// History is used from one goroutine (the simulator); shells that record
// from several goroutines must serialise calls. It does not depend on the
// simulator: the in-process soak and the docker chaos run can feed it too.
type History struct {
	parts      map[string]*partHistory
	consumers  map[string]*consumerHistory
	seq        uint64
	violations []Violation

	// Counters for reports.
	AckedAll, AckedOne, Reads, Truncations, LossyShutdowns, Resets int
	// Repositions counts RecordReposition calls (reported only when > 0).
	Repositions int
	// ExemptConflicts counts offsets seen with two values in a partition
	// under the §6.8 exemption (Exempt), which are not violations there.
	ExemptConflicts int

	// Reappends lets a value be seen at a second offset when a recorded
	// truncation may have removed it from the first since it was seen
	// there (different generations of the first offset): an idempotent
	// producer's retry appends a batch again once the copy it was not
	// told about is gone. Two offsets in one generation, and so two copies
	// in the final log, stay violations. Counted in Reappended. An acks=1
	// acknowledgement's value is then not checked (RecordAck).
	Reappends  bool
	Reappended int
}

// Violation is one inconsistency the checker found.
type Violation struct {
	Invariant string // e.g. "§8.13 offset with two values"
	Partition string
	Detail    string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s: %s", v.Invariant, v.Partition, v.Detail)
}

type observation struct {
	value  string
	le     int32
	source string
}

type ackRecord struct {
	value string
	le    int32
	seq   uint64
	m     int
}

type lossy struct {
	broker int32
	from   int64 // the replica lost every offset ≥ from
	seq    uint64
}

// truncPoint is a truncation point recorded with its offset: it installed
// leader epoch le and cut every offset ≥ offset.
type truncPoint struct {
	le     int32
	offset int64
}

type partHistory struct {
	// truncLEs are the leader epochs installed by recorded truncations
	// that may have changed any offset.
	truncLEs []int32
	// truncSeqs are their places in the history (two-cluster checks).
	truncSeqs []uint64
	// points are truncation points recorded with their offset
	// (RecordTruncationPoint).
	points  []truncPoint
	seen    map[int64][]observation
	valueAt map[string]valueSeen
	acked   map[int64]ackRecord
	lossy   []lossy
	// exempt: a tainted replica was elected uncleanly (Exempt).
	exempt bool
}

// valueSeen is where a value was seen last, and the latest LE it was seen
// there in.
type valueSeen struct {
	offset int64
	le     int32
}

type consumerHistory struct {
	last map[string]int64 // partition -> last offset read since the last reset
}

// NewHistory returns an empty history.
func NewHistory() *History {
	return &History{parts: map[string]*partHistory{}, consumers: map[string]*consumerHistory{}}
}

func (h *History) part(tp string) *partHistory {
	p := h.parts[tp]
	if p == nil {
		p = &partHistory{seen: map[int64][]observation{}, valueAt: map[string]valueSeen{}, acked: map[int64]ackRecord{}}
		h.parts[tp] = p
	}
	return p
}

func (h *History) violate(inv, tp, format string, args ...any) {
	h.violations = append(h.violations, Violation{Invariant: inv, Partition: tp, Detail: fmt.Sprintf(format, args...)})
}

// Violations returns everything found so far.
func (h *History) Violations() []Violation {
	if len(h.violations) == 0 {
		return nil
	}
	return slices.Clone(h.violations)
}

// generation is the number of recorded truncations that installed a leader
// epoch ≤ le and cover offset (truncation points recorded with an offset
// cover the offsets from it on; the others cover every offset): two leader
// epochs of one generation at offset must agree on its value.
func (p *partHistory) generation(le int32, offset int64) int {
	n := 0
	for _, t := range p.truncLEs {
		if t <= le {
			n++
		}
	}
	for _, t := range p.points {
		if t.le <= le && t.offset <= offset {
			n++
		}
	}
	return n
}

// truncationsString lists the recorded truncations for messages.
func (p *partHistory) truncationsString() string {
	if len(p.points) == 0 {
		return fmt.Sprintf("truncations at LEs %v", p.truncLEs)
	}
	pts := make([]string, len(p.points))
	for i, t := range p.points {
		pts[i] = fmt.Sprintf("%d@%d", t.le, t.offset)
	}
	return fmt.Sprintf("truncations at LEs %v, truncation points (LE@offset) %v", p.truncLEs, pts)
}

// RecordTruncation records an unclean election (or a truncation point) that
// installed leader epoch le on tp (SPEC §8 "recorded truncation").
func (h *History) RecordTruncation(tp string, le int32) {
	h.seq++
	h.Truncations++
	p := h.part(tp)
	p.truncLEs = append(p.truncLEs, le)
	p.truncSeqs = append(p.truncSeqs, h.seq)
}

// RecordTruncationPoint records a truncation point (SPEC §6.2f) that
// installed leader epoch le on tp and cut the log from offset: only offsets
// ≥ offset may change across it (RecordTruncation covers every offset).
func (h *History) RecordTruncationPoint(tp string, le int32, offset int64) {
	h.seq++
	h.Truncations++
	p := h.part(tp)
	p.points = append(p.points, truncPoint{le: le, offset: offset})
}

// RecordLossyShutdown records that broker lost every offset ≥ from of tp in an
// unclean shutdown (unsynced data gone).
func (h *History) RecordLossyShutdown(tp string, broker int32, from int64) {
	h.seq++
	h.LossyShutdowns++
	p := h.part(tp)
	p.lossy = append(p.lossy, lossy{broker: broker, from: from, seq: h.seq})
}

// RecordAck records an acknowledged write of value at offset, appended in
// leader epoch le. acksAll writes were below the HW when acknowledged, so
// they count as shown (SPEC §8.13) and must survive (§8.12); m is
// min(min.insync.replicas, |R|) at the ack.
func (h *History) RecordAck(tp string, offset int64, value string, le int32, acksAll bool, m int) {
	h.seq++
	p := h.part(tp)
	if !acksAll && h.Reappends {
		// An acks=1 answer is not a shown record: a stale leader in an
		// older LE may append a producer's retry a second time in its
		// log, which has diverged and will be cut, and answer it; the
		// copy the log keeps is checked when read or in the final log.
		h.AckedOne++
		return
	}
	h.checkValue(p, tp, offset, value, le)
	if !acksAll {
		h.AckedOne++
		return
	}
	h.AckedAll++
	p.acked[offset] = ackRecord{value: value, le: le, seq: h.seq, m: m}
	h.observe(p, tp, offset, observation{value: value, le: le, source: "ack"})
}

// RecordRead records that consumer read value at offset of tp from a leader
// in leader epoch le.
func (h *History) RecordRead(consumer, tp string, offset int64, value string, le int32) {
	h.seq++
	h.Reads++
	p := h.part(tp)
	h.checkValue(p, tp, offset, value, le)
	h.observe(p, tp, offset, observation{value: value, le: le, source: "read by " + consumer})
	c := h.consumers[consumer]
	if c == nil {
		c = &consumerHistory{last: map[string]int64{}}
		h.consumers[consumer] = c
	}
	if last, ok := c.last[tp]; ok && offset <= last {
		h.violate("non-monotonic read", tp, "consumer %s read offset %d after %d", consumer, offset, last)
	}
	c.last[tp] = offset
}

// Exempt records the SPEC §8 exemption (§6.8) for tp: a tainted replica was
// elected uncleanly, so replicas may hold different records of one epoch
// number below the next truncation point (§8.9 may fail, §6.10 case 2), and a
// consumer that reads from two of them sees two values at one offset with no
// recorded truncation between. From here on such an offset is counted in
// ExemptConflicts instead of violating §8.13; the other checks stand.
func (h *History) Exempt(tp string) {
	h.seq++
	h.part(tp).exempt = true
}

// RecordReset records that consumer repositioned on tp (after
// OFFSET_OUT_OF_RANGE or LOG_TRUNCATED): its next read may go back.
func (h *History) RecordReset(consumer, tp string) {
	h.seq++
	h.Resets++
	if c := h.consumers[consumer]; c != nil {
		delete(c.last, tp)
	}
}

// RecordReposition records that consumer moved on tp to next (LOG_TRUNCATED
// or a position check with OffsetForLeaderEpoch, SPEC §4.4): its next read
// may go back, but not below next.
func (h *History) RecordReposition(consumer, tp string, next int64) {
	h.seq++
	h.Repositions++
	c := h.consumers[consumer]
	if c == nil {
		c = &consumerHistory{last: map[string]int64{}}
		h.consumers[consumer] = c
	}
	c.last[tp] = next - 1
}

// lossyBrokers is the number of brokers that lost offset in a lossy
// unclean shutdown recorded after history position seq.
func (p *partHistory) lossyBrokers(seq uint64, offset int64) int {
	brokers := map[int32]bool{}
	for _, l := range p.lossy {
		if l.seq > seq && l.from <= offset {
			brokers[l.broker] = true
		}
	}
	return len(brokers)
}

func (h *History) checkValue(p *partHistory, tp string, offset int64, value string, le int32) {
	seen, ok := p.valueAt[value]
	switch {
	case !ok:
	case seen.offset == offset:
		le = max(le, seen.le)
	case h.Reappends && p.generation(seen.le, seen.offset) != p.generation(le, seen.offset):
		h.Reappended++
	default:
		h.violate("§8.13 value at two offsets", tp, "value %q at offsets %d (LE %d) and %d (LE %d) with no recorded truncation of the first between (%s)",
			value, seen.offset, seen.le, offset, le, p.truncationsString())
		return
	}
	p.valueAt[value] = valueSeen{offset: offset, le: le}
}

func (h *History) observe(p *partHistory, tp string, offset int64, ob observation) {
	for _, prev := range p.seen[offset] {
		if prev.value == ob.value {
			continue
		}
		if p.generation(prev.le, offset) == p.generation(ob.le, offset) {
			if p.exempt {
				h.ExemptConflicts++
				break
			}
			h.violate("§8.13 offset with two values", tp,
				"offset %d: %q (LE %d, %s) and %q (LE %d, %s) with no recorded truncation between (%s)",
				offset, prev.value, prev.le, prev.source, ob.value, ob.le, ob.source, p.truncationsString())
			return
		}
	}
	for _, prev := range p.seen[offset] {
		if prev.value == ob.value && p.generation(prev.le, offset) == p.generation(ob.le, offset) {
			return // nothing new
		}
	}
	p.seen[offset] = append(p.seen[offset], ob)
}

// Final checks the healed log of tp: final maps offsets below the final HW to
// their values, served in leader epoch le. Every acks=all write must be there
// with its value (SPEC §8.12) unless a recorded truncation covering its
// offset installed a later leader epoch than the ack's, or at least m lossy
// unclean shutdowns lost its offset after the ack. The final values also count as reads (§8.13).
func (h *History) Final(tp string, final map[int64]string, le int32) {
	h.seq++
	p := h.part(tp)
	offs := make([]int64, 0, len(final))
	for o := range final {
		offs = append(offs, o)
	}
	slices.Sort(offs)
	for _, o := range offs {
		h.checkValue(p, tp, o, final[o], le)
		h.observe(p, tp, o, observation{value: final[o], le: le, source: "final log"})
	}
	acked := make([]int64, 0, len(p.acked))
	for o := range p.acked {
		acked = append(acked, o)
	}
	slices.Sort(acked)
	lost := 0
	var first []string
	for _, o := range acked {
		a := p.acked[o]
		if v, ok := final[o]; ok && v == a.value {
			continue
		}
		if !p.owed(o, a, le) {
			continue
		}
		lost++
		if len(first) < 5 {
			got, ok := final[o]
			if !ok {
				got = "<absent>"
			}
			first = append(first, fmt.Sprintf("offset %d acked %q at LE %d, final %q", o, a.value, a.le, got))
		}
	}
	if lost > 0 {
		h.violate("§8.12 acked write lost", tp, "%d acks=all writes lost without a recorded truncation (final LE %d, %s): %s",
			lost, le, p.truncationsString(), strings.Join(first, "; "))
	}
}

// owed reports whether the ack a at offset o must still be in a log served
// in leader epoch le (SPEC §8.12): not if a truncation recorded since the
// ack covers o (it installed an epoch above the ack's, in le or before), nor
// if at least m lossy unclean shutdowns lost o after it.
func (p *partHistory) owed(o int64, a ackRecord, le int32) bool {
	return p.generation(le, o) == p.generation(a.le, o) && p.lossyBrokers(a.seq, o) < a.m
}

// Summary is a one-line account of the history.
func (h *History) Summary() string {
	names := make([]string, 0, len(h.parts))
	for n := range h.parts {
		names = append(names, n)
	}
	sort.Strings(names)
	repos := ""
	if h.Repositions > 0 {
		repos = fmt.Sprintf(", consumer repositions %d", h.Repositions)
	}
	if h.ExemptConflicts > 0 {
		repos += fmt.Sprintf(", exempt two-value offsets %d", h.ExemptConflicts)
	}
	return fmt.Sprintf("partitions %v: acked all=%d one=%d, reads %d, recorded truncations %d, lossy shutdowns %d, consumer resets %d%s, violations %d",
		names, h.AckedAll, h.AckedOne, h.Reads, h.Truncations, h.LossyShutdowns, h.Resets, repos, len(h.violations))
}

// The accessors below are read-only views for a driver that checks across
// two histories: the two-cluster simulator hands the source cluster's
// acks=all writes to the destination at a failover and excuses their loss
// by what the source recorded. They never create a partition, so asking
// does not change Summary.

// Seq returns the history's position: the number of events recorded so
// far. Compare it with a later Seq, an Ack's Seq or TruncatedSince to order
// something the driver saw against the history.
func (h *History) Seq() uint64 { return h.seq }

// Ack is an acks=all write as RecordAck recorded it.
type Ack struct {
	Offset      int64
	Value       string
	LeaderEpoch int32  // the leader epoch that appended it
	Seq         uint64 // its position in the history (Seq)
	MinISR      int    // m at the ack: min(min.insync.replicas, |R|)
}

// Acks returns the acks=all writes recorded on tp, one per offset (the
// latest), by offset; nil if there are none.
func (h *History) Acks(tp string) []Ack {
	p := h.parts[tp]
	if p == nil || len(p.acked) == 0 {
		return nil
	}
	offs := slices.Sorted(maps.Keys(p.acked))
	out := make([]Ack, len(offs))
	for i, o := range offs {
		a := p.acked[o]
		out[i] = Ack{Offset: o, Value: a.value, LeaderEpoch: a.le, Seq: a.seq, MinISR: a.m}
	}
	return out
}

// Owed returns the acks=all writes of tp that every later log must still
// hold, by offset: Acks without those a recorded truncation or lossy
// shutdowns have excused since (Final's rule, applied with every truncation
// recorded so far). A failover hands the destination only these: an ack the
// source no longer owes is owed by nobody (sweep seed 2208455: the source's
// LMLE truncation dropped an ack, a tainted replica's unclean election
// (§6.8) brought its record back, the destination copied it, and handing
// the ack over made the destination owe a record its own replicas never
// agreed on).
func (h *History) Owed(tp string) []Ack {
	p := h.parts[tp]
	if p == nil {
		return nil
	}
	var out []Ack
	for _, a := range h.Acks(tp) {
		if p.owed(a.Offset, p.acked[a.Offset], math.MaxInt32) {
			out = append(out, a)
		}
	}
	return out
}

// TruncatedAbove reports whether a truncation recorded on tp with
// RecordTruncation installed a leader epoch above le. Truncation points
// recorded with their offset (RecordTruncationPoint) do not count.
func (h *History) TruncatedAbove(tp string, le int32) bool {
	p := h.parts[tp]
	return p != nil && slices.ContainsFunc(p.truncLEs, func(t int32) bool { return t > le })
}

// TruncatedSince reports whether a truncation was recorded on tp with
// RecordTruncation after history position seq (see Seq). Truncation points
// recorded with their offset do not count.
func (h *History) TruncatedSince(tp string, seq uint64) bool {
	p := h.parts[tp]
	return p != nil && slices.ContainsFunc(p.truncSeqs, func(t uint64) bool { return t > seq })
}

// LossyBrokersSince is the number of distinct brokers with a lossy
// unclean shutdown of tp recorded after history position seq.
func (h *History) LossyBrokersSince(tp string, seq uint64) int {
	p := h.parts[tp]
	if p == nil {
		return 0
	}
	var brokers []int32
	for _, l := range p.lossy {
		if l.seq > seq && !slices.Contains(brokers, l.broker) {
			brokers = append(brokers, l.broker)
		}
	}
	return len(brokers)
}

// Exempted reports whether tp is under the §6.8 exemption (Exempt).
func (h *History) Exempted(tp string) bool {
	p := h.parts[tp]
	return p != nil && p.exempt
}
