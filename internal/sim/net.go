package sim

import (
	"slices"
)

// nodeID names a simulated endpoint: 0 the controller, 1..N brokers,
// clients from clientBase on.
type nodeID int32

const (
	controllerNode nodeID = 0
	clientBase     nodeID = 1000
)

// message is one packet in flight. deliver runs at delivery time on the
// receiving side; it is dropped instead if either end restarted since the
// send (a new incarnation has new connections) or the link is cut then.
type message struct {
	seq      uint64
	at       int64
	from, to nodeID
	fromInc  int
	toInc    int
	kind     string
	deliver  func()
}

// network is the TigerBeetle-style packet simulator: every send draws a
// delay (which also reorders) and may be dropped; links can be cut.
type network struct {
	s     *Sim
	queue []*message
	ready []*message // due's result, reused: read before the next due
	seq   uint64
	cuts  map[[2]nodeID]int64 // cut link (ordered pair) -> heal time
}

func newNetwork(s *Sim) *network {
	return &network{s: s, cuts: map[[2]nodeID]int64{}}
}

func link(a, b nodeID) [2]nodeID {
	if a > b {
		a, b = b, a
	}
	return [2]nodeID{a, b}
}

func (n *network) cut(a, b nodeID) bool {
	_, ok := n.cuts[link(a, b)]
	return ok
}

// send queues kind from → to. deliver runs on arrival.
func (n *network) send(from, to nodeID, kind string, deliver func()) {
	s := n.s
	n.seq++
	if n.cut(from, to) {
		s.report.Faults["drop-cut"]++
		return
	}
	if s.faultsOn && s.chance(s.cfg.DropProb) {
		s.report.Faults["drop"]++
		s.tracef("drop %s %d->%d", kind, from, to)
		return
	}
	delay := int64(1 + s.rng.IntN(int(s.cfg.MaxDelayMs)))
	if s.faultsOn && s.chance(s.cfg.SlowProb) {
		delay += int64(s.rng.IntN(int(s.cfg.SlowDelayMs)))
		s.report.Faults["delay"]++
	}
	m := &message{seq: n.seq, at: s.now + delay, from: from, to: to, fromInc: s.incarnation(from), toInc: s.incarnation(to), kind: kind, deliver: deliver}
	n.queue = append(n.queue, m)
	s.report.Messages++
}

// due removes and returns the messages to deliver at or before now, in
// (time, send order) order.
func (n *network) due(now int64) []*message {
	out, keep := n.ready[:0], n.queue[:0]
	for _, m := range n.queue {
		if m.at <= now {
			out = append(out, m)
		} else {
			keep = append(keep, m)
		}
	}
	clear(n.queue[len(keep):])
	n.queue, n.ready = keep, out
	slices.SortFunc(out, func(a, b *message) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return int(a.seq - b.seq)
	})
	return out
}

// healExpired restores cut links whose time has come.
func (n *network) healExpired(now int64) {
	expired := false
	for _, heal := range n.cuts {
		if heal <= now {
			expired = true
			break
		}
	}
	if !expired {
		return
	}
	for _, l := range n.sortedCuts() {
		if n.cuts[l] <= now {
			delete(n.cuts, l)
			n.s.tracef("heal link %d-%d", l[0], l[1])
		}
	}
}

func (n *network) sortedCuts() [][2]nodeID {
	out := make([][2]nodeID, 0, len(n.cuts))
	for l := range n.cuts {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b [2]nodeID) int {
		if a[0] != b[0] {
			return int(a[0] - b[0])
		}
		return int(a[1] - b[1])
	})
	return out
}
