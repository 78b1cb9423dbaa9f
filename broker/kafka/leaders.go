package kafka

import (
	"context"
	"slices"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Leader discovery (KIP-951): a Produce (v10+) or Fetch (v16+) that a
// broker answers NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH for a
// partition also names the partition's current leader and leader epoch as
// the broker's metadata has them, and the Kafka listener of each leader
// named, so the client moves to it without first asking for metadata:
// after a leader change (a broker stopped, an election) its produce and
// fetch resume one round trip sooner. A client that ignores the hints
// refreshes its metadata as before.

// Kafka's codes that carry a leader hint.
const (
	notLeaderOrFollower int16 = 6
	fencedLeaderEpoch   int16 = 74
)

// movedCode reports whether a partition answered code gets a leader hint.
func movedCode(code int16) bool { return code == notLeaderOrFollower || code == fencedLeaderEpoch }

// leaderHint is a partition's current leader and leader epoch.
type leaderHint struct{ id, epoch int32 }

// movedPartition is a partition answered with a movedCode, and how to
// write its hint into the answer.
type movedPartition struct {
	tp
	set func(leaderHint)
}

// hintMoved writes each moved partition's hint, if there is one, and
// returns the Kafka listeners of the leaders named, in id order. Without
// an answer from the broker's metadata there are no hints (the client
// refreshes its metadata).
func (s *Server) hintMoved(ctx context.Context, moved []movedPartition) []*pb.MetadataBroker {
	if len(moved) == 0 {
		return nil
	}
	var names []string
	for _, m := range moved {
		if !slices.Contains(names, m.topic) {
			names = append(names, m.topic)
		}
	}
	md, err := s.backend.Metadata(ctx, &pb.MetadataRequest{Topics: names})
	if err != nil {
		return nil
	}
	brokers := map[int32]*pb.MetadataBroker{}
	for _, b := range md.GetBrokers() {
		if b.GetKafkaPort() > 0 {
			brokers[b.GetId()] = b
		}
	}
	leaders := map[tp]leaderHint{}
	for _, t := range md.GetTopics() {
		for _, p := range t.GetPartitions() {
			leaders[tp{t.GetName(), p.GetIndex()}] = leaderHint{p.GetLeaderId(), p.GetLeaderEpoch()}
		}
	}
	var named []*pb.MetadataBroker
	for _, m := range moved {
		h, ok := leaders[m.tp]
		b := brokers[h.id]
		if !ok || b == nil {
			continue
		}
		m.set(h)
		if !slices.Contains(named, b) {
			named = append(named, b)
		}
	}
	slices.SortFunc(named, func(x, y *pb.MetadataBroker) int { return int(x.GetId()) - int(y.GetId()) })
	return named
}
