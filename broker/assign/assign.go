// Package assign turns a broker's metadata image into the state of the
// partitions it hosts: which partitions the image assigns to the broker,
// the replica's view of each, and how that view is handed to the replica.
// It is the one copy of those decisions; the broker shell's reconcile
// (broker/metadata.go) and the simulator's both run it.
package assign

import (
	"cmp"
	"slices"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/mirror/runner"
)

// Assignment is one partition the image assigns to a broker.
type Assignment struct {
	TP     twinlog.TopicPartition
	Record *pb.PartitionRecord
	// MinISR is the topic's effective min.insync.replicas.
	MinISR int
	// InMirror: the topic is a mirror topic (read-only until its runner
	// makes it writable, SPEC §6.2a).
	InMirror bool
	// HasTaints: the topic is mirrored or was once, so __mirror_state may
	// hold durable taints of its replicas (SPEC §6.4).
	HasTaints bool
}

// Of returns the partitions img assigns to broker id (it is one of their
// replicas), by topic name and partition.
func Of(img *metadata.Image, id twinlog.BrokerID) []Assignment {
	var out []Assignment
	for _, name := range img.TopicNames() {
		t := img.Topic(name)
		m := img.MinISR(name, 0)
		for i := int32(0); i < t.GetPartitionCount(); i++ {
			pr := img.Partition(name, i)
			if pr == nil || !hosts(pr, id) {
				continue
			}
			out = append(out, Assignment{
				TP: twinlog.TopicPartition{Topic: name, Partition: i}, Record: pr, MinISR: m,
				InMirror: t.GetMirrorName() != "", HasTaints: t.GetMirrorName() != "" || t.GetOnceMirrored(),
			})
		}
	}
	return out
}

func hosts(pr *pb.PartitionRecord, id twinlog.BrokerID) bool {
	for _, r := range pr.GetReplicas() {
		if twinlog.BrokerID(r) == id {
			return true
		}
	}
	return false
}

// State is the replica's view of the assignment, with the image's broker
// epochs (metadata.Image.BrokerEpochs: every registration, and the
// acceptable brokers among them).
func (a Assignment) State(registered, acceptable map[twinlog.BrokerID]twinlog.BrokerEpoch) replica.PartitionState {
	rec := a.Record
	st := replica.PartitionState{
		Leader:         twinlog.BrokerID(rec.GetLeader()),
		LeaderEpoch:    twinlog.Epoch(rec.GetLeaderEpoch()),
		PartitionEpoch: twinlog.PartitionEpoch(rec.GetPartitionEpoch()),
		Replicas:       IDs(rec.GetReplicas()),
		ISR:            IDs(rec.GetIsr()),
		ELR:            IDs(rec.GetElr()),
		LastKnownELR:   IDs(rec.GetLastKnownElr()),
		AddingReplicas: IDs(rec.GetAddingReplicas()),
		RecoveryState:  rec.GetRecoveryState(),
		MinISR:         a.MinISR,
		Brokers:        acceptable,
		Registered:     registered,
	}
	for _, t := range rec.GetTruncationPoints() {
		st.TruncationPoints = append(st.TruncationPoints, replica.TruncationPoint{
			LeaderEpoch: twinlog.Epoch(t.GetLeaderEpoch()), Offset: twinlog.Offset(t.GetOffset())})
	}
	return st
}

// Apply hands st, the state of assignment a, to broker self's replica r
// (under the partition's lock): first the mirror flags
// (runner.ApplyMirrorFlags, with writable and writableLE the mirror
// runner's: its writable flag and the LE it set it in), then
// ApplyPartitionState, then, when this starts a leadership of a topic that
// may have taints, taints pending: no follower fetch is served until the
// mirror runner has loaded them (SPEC §6.4), and setting it under the same
// lock as the leadership leaves no fetch the gap. It returns the runner's
// writable flag as it now stands. The caller then drains r's Ready.
func Apply(r *replica.Replica, a Assignment, st replica.PartitionState, self twinlog.BrokerID, writable bool, writableLE twinlog.Epoch, nowMs int64) bool {
	writable = runner.ApplyMirrorFlags(r, a.InMirror, runner.BecomingLeader(r, st, self, writableLE), writable)
	wasLeader, le := r.Role() == replica.RoleLeader, r.LeaderEpoch()
	r.ApplyPartitionState(st, nowMs)
	if a.HasTaints && r.Role() == replica.RoleLeader && (!wasLeader || r.LeaderEpoch() != le) {
		r.SetTaintsPending(true)
	}
	return writable
}

// IDs converts broker ids from the wire.
func IDs(in []int32) []twinlog.BrokerID {
	out := make([]twinlog.BrokerID, len(in))
	for i, v := range in {
		out[i] = twinlog.BrokerID(v)
	}
	return out
}

// Plan is a broker's reconcile for one image: the hosted partitions to
// remove, then the assignments to host (opened if not hosted, their state
// applied).
type Plan struct {
	// Remove are the hosted partitions no assignment wants, or wanted with
	// another topic id (the topic was deleted and created again, SPEC
	// §2.1), by topic name and partition.
	Remove []twinlog.TopicPartition
	// Host are the assignments, as Of returns them.
	Host []Assignment

	wanted map[twinlog.TopicPartition]bool
}

// Wanted reports whether the image assigns tp to the broker: a log dir on
// disk that it does not is deleted (SPEC §2.1).
func (p Plan) Wanted(tp twinlog.TopicPartition) bool { return p.wanted[tp] }

// Orphans are the partitions of onDisk, log dirs found on a broker's
// disks, that the image does not assign to it, by topic name and
// partition: they are deleted (SPEC §2.1). The plan's removals come first,
// so none of them is hosted by then.
func (p Plan) Orphans(onDisk []twinlog.TopicPartition) []twinlog.TopicPartition {
	var out []twinlog.TopicPartition
	for _, tp := range onDisk {
		if !p.wanted[tp] {
			out = append(out, tp)
		}
	}
	sortPartitions(out)
	return out
}

// Reconcile plans broker self's reconcile for img; hosted maps each
// partition it hosts to its topic id. ok is false, and nothing is to be
// done, until the image has caught up with the broker's registration in
// epoch (0: not registered): a restarted broker must not act on leadership
// it held before, nor remove what an old image no longer shows.
func Reconcile(img *metadata.Image, self twinlog.BrokerID, epoch int64, hosted map[twinlog.TopicPartition]string) (plan Plan, ok bool) {
	if epoch <= 0 || img.Offset() < epoch {
		return Plan{}, false
	}
	plan.Host = Of(img, self)
	plan.wanted = make(map[twinlog.TopicPartition]bool, len(plan.Host))
	ids := make(map[twinlog.TopicPartition]string, len(plan.Host))
	for _, a := range plan.Host {
		plan.wanted[a.TP] = true
		ids[a.TP] = a.Record.GetTopicId()
	}
	for tp, id := range hosted {
		if want, ok := ids[tp]; !ok || want != id {
			plan.Remove = append(plan.Remove, tp)
		}
	}
	sortPartitions(plan.Remove)
	return plan, true
}

// sortPartitions sorts tps by topic name, then partition.
func sortPartitions(tps []twinlog.TopicPartition) {
	slices.SortFunc(tps, func(x, y twinlog.TopicPartition) int {
		if c := cmp.Compare(x.Topic, y.Topic); c != 0 {
			return c
		}
		return cmp.Compare(x.Partition, y.Partition)
	})
}
