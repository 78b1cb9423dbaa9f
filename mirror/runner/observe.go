package runner

import (
	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/mirror/plan"
)

// TopicView is what a mirror runner reads of its topic in the broker's
// metadata image when it observes: the mirror the topic belongs to ("" if
// none), the mirror's source bootstrap addresses, the desired state, and
// the status fields the topic's configs give (min.insync.replicas,
// mirror.support.unclean.leader.election).
type TopicView struct {
	Mirror         string
	Bootstrap      []string
	Desired        plan.Desired
	MinISR         int
	SupportUnclean bool
}

// Status completes a leader's status (LeaderStatus; the zero status when
// not leading) with the topic's configs.
func (v TopicView) Status(leader plan.ReplicaStatus) plan.ReplicaStatus {
	leader.MinInsyncReplicas = v.MinISR
	leader.SupportUncleanLeaderElection = v.SupportUnclean
	return leader
}

// ViewOf reads topic's TopicView from img (the caller holds whatever lock
// guards img). A topic the image does not have gives the zero view.
func ViewOf(img *metadata.Image, topic string) TopicView {
	var v TopicView
	t := img.Topic(topic)
	if t == nil {
		return v
	}
	v.Mirror = t.GetMirrorName()
	if m := img.Mirror(v.Mirror); m != nil {
		v.Bootstrap = m.GetSourceBootstrap()
		v.Desired.SourceClusterID = m.GetSourceClusterId()
		for _, mt := range m.GetTopics() {
			if mt.GetTopic() == topic {
				v.Desired.State, v.Desired.Generation = mt.GetDesiredState(), mt.GetGeneration()
			}
		}
	}
	v.MinISR = img.MinISR(topic, 0)
	v.SupportUnclean = img.TopicConfig(topic, metadata.KeyMirrorSupportUnclean) == "true"
	return v
}

// LeaderStatus is the leader's part of the status of broker self's leading
// replica r (read under the partition's lock): the ISR, the maximal ISR,
// the partition's replicas, and each follower's aligned epoch in this
// leadership.
func LeaderStatus(r *replica.Replica, replicas []twinlog.BrokerID, self twinlog.BrokerID) plan.ReplicaStatus {
	var st plan.ReplicaStatus
	st.ISR = r.ISR()
	st.MaximalISR = r.MaximalISR()
	st.Replicas = replicas
	st.FollowerAlignedEpoch = map[twinlog.BrokerID]twinlog.Epoch{}
	for _, id := range replicas {
		if id == self {
			continue
		}
		if e := r.FollowerAlignedEpoch(id); e >= 0 {
			st.FollowerAlignedEpoch[id] = e
		}
	}
	return st
}

// TruncationPointsOf is a partition record's truncation points (SPEC
// §6.2f) as the machine takes them with BecameLeader.
func TruncationPointsOf(rec *pb.PartitionRecord) []plan.TruncationPoint {
	var out []plan.TruncationPoint
	for _, t := range rec.GetTruncationPoints() {
		out = append(out, plan.TruncationPoint{LeaderEpoch: twinlog.Epoch(t.GetLeaderEpoch()), Offset: twinlog.Offset(t.GetOffset())})
	}
	return out
}
