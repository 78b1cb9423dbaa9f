// Package assign turns a broker's metadata image into the state of the
// partitions it hosts: which partitions the image assigns to the broker,
// the replica's view of each, and how that view is handed to the replica.
// It is the one copy of those decisions; the broker shell's reconcile
// (broker/metadata.go) and the simulator's both run it.
package assign

import (
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
