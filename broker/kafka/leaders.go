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

// leaderHints are KIP-951's hints for the partitions in moved: each one's
// leader (absent when the metadata has none) and the leaders' brokers,
// by id, with a Kafka listener. Without an answer from the broker's
// metadata there are no hints (the client refreshes its metadata).
func (s *Server) leaderHints(ctx context.Context, moved []tp) (map[tp]leaderHint, map[int32]*pb.MetadataBroker) {
	if len(moved) == 0 {
		return nil, nil
	}
	var names []string
	for _, k := range moved {
		if !slices.Contains(names, k.topic) {
			names = append(names, k.topic)
		}
	}
	md, err := s.backend.Metadata(ctx, &pb.MetadataRequest{Topics: names})
	if err != nil {
		return nil, nil
	}
	brokers := map[int32]*pb.MetadataBroker{}
	for _, b := range md.GetBrokers() {
		if b.GetKafkaPort() > 0 {
			brokers[b.GetId()] = b
		}
	}
	hints := map[tp]leaderHint{}
	used := map[int32]*pb.MetadataBroker{}
	for _, t := range md.GetTopics() {
		for _, p := range t.GetPartitions() {
			k := tp{t.GetName(), p.GetIndex()}
			b := brokers[p.GetLeaderId()]
			if !slices.Contains(moved, k) || b == nil {
				continue
			}
			hints[k] = leaderHint{p.GetLeaderId(), p.GetLeaderEpoch()}
			used[b.GetId()] = b
		}
	}
	return hints, used
}

// sortedBrokers are brokers in id order (a deterministic answer).
func sortedBrokers(bs map[int32]*pb.MetadataBroker) []*pb.MetadataBroker {
	out := make([]*pb.MetadataBroker, 0, len(bs))
	for _, b := range bs {
		out = append(out, b)
	}
	slices.SortFunc(out, func(x, y *pb.MetadataBroker) int { return int(x.GetId()) - int(y.GetId()) })
	return out
}
