package runner

import (
	"sync"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/storage/epoch"
)

// Core is what a partition's Runner keeps and steps: the machine,
// the leadership, and the desired state and replica status last stepped
// into the machine. Its Runner uses it on its turns; hosts read it
// (Runner.Core) on theirs.
type Core struct {
	// M is the machine, nil until the host creates it on its first
	// leadership.
	M          *plan.Machine
	Leadership Leadership
	desired    plan.Desired
	replicas   *plan.ReplicaStatus
	// Rejected, if set, hears of every event the machine refused (the
	// host logs or traces it).
	Rejected func(ev plan.Event, err error)
}

// Step steps the machine with ev.
func (c *Core) Step(ev plan.Event) {
	if err := c.M.Step(ev); err != nil && c.Rejected != nil {
		c.Rejected(ev, err)
	}
}

// Post steps an outcome the host performed for the machine (a bump's
// answer, a write's ack, a fetch's result), noting it in the leadership
// first (Leadership.Note). Without a machine it is dropped.
func (c *Core) Post(ev plan.Event) {
	if c.M == nil {
		return
	}
	c.Leadership.Note(ev)
	c.Step(ev)
}

// Began records a leadership the machine did not cause, in leader epoch
// le, whose records the host has loaded: the machine is about to get its
// BecameLeader, with desired as its desired state, and the replica status
// goes to it afresh.
func (c *Core) Began(le twinlog.Epoch, desired plan.Desired) {
	c.Leadership.Leading = true
	c.Leadership.KnownLE = le
	c.desired = desired
	c.replicas = nil
}

// Desired is the desired state last stepped into the machine.
func (c *Core) Desired() plan.Desired { return c.desired }

// Ended ends the leadership the machine knows (Leadership.Observe said
// it ended): the machine, if any, steps LostLeadership.
func (c *Core) Ended() {
	c.Leadership.Leading = false
	if c.M != nil {
		c.Step(plan.LostLeadership{})
	}
}

// ApplyDesired steps the change from the last desired state to d
// (plan.DesiredChange).
func (c *Core) ApplyDesired(d plan.Desired) {
	old := c.desired
	c.desired = d
	for _, ev := range plan.DesiredChange(old, d, c.M.State()) {
		c.Step(ev)
	}
}

// NoteStatus steps the replica status st if it differs from the last one
// stepped.
func (c *Core) NoteStatus(st plan.ReplicaStatus) {
	if c.replicas == nil || !c.replicas.Equal(st) {
		cp := st
		c.replicas = &cp
		c.Step(plan.ReplicaStatusChanged{Status: st})
	}
}

// Drain performs every action the machine has ready, in order: each
// Ready is advanced before its actions are performed (mirror/plan/doc.go).
// It stops early if stop (may be nil) reports true.
func (c *Core) Drain(perform func(plan.Action), stop func() bool) {
	if c.M == nil {
		return
	}
	for c.M.HasReady() && (stop == nil || !stop()) {
		rd := c.M.Ready()
		c.M.Advance()
		for _, a := range rd.Actions {
			perform(a)
		}
	}
}

// ReplicaLog is plan.Log over a partition's replica, which its host keeps
// in lockstep with storage. Lock, if set (the broker's partition lock), is
// taken for each read.
type ReplicaLog struct {
	Replica *replica.Replica
	Lock    sync.Locker
}

func (l ReplicaLog) read() func() {
	if l.Lock == nil {
		return func() {}
	}
	l.Lock.Lock()
	return l.Lock.Unlock
}

func (l ReplicaLog) EpochCache() *epoch.Cache {
	defer l.read()()
	// The replica's entries are a valid cache by construction.
	c, _ := epoch.NewCache(l.Replica.EpochEntries())
	return c
}

func (l ReplicaLog) LogStartOffset() twinlog.Offset {
	defer l.read()()
	return l.Replica.LogStartOffset()
}

func (l ReplicaLog) LogEndOffset() twinlog.Offset {
	defer l.read()()
	return l.Replica.LogEndOffset()
}

func (l ReplicaLog) HighWatermark() twinlog.Offset {
	defer l.read()()
	return l.Replica.HighWatermark()
}

func (l ReplicaLog) AlignedEpoch() twinlog.Epoch {
	defer l.read()()
	return l.Replica.AlignedEpoch()
}
