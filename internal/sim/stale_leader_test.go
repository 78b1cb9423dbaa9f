package sim

import (
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage/epoch"
)

// TestKnownBugStaleReplicaHWAboveTruncationPoint: a protocol gap in SPEC
// §6.2f + §4.2 (broker/replica), the case the simulator's staleLeader used
// to suspend §8.7/§8.9 for; see the analysis at world.staleLeader. Minimal
// reproduction on broker/replica directly, mirror partition t-0, R {1,2,3}:
//
//   - LE 1: leader 1; 2 and 3 follow; X = [0, 10) of record epoch 1, HW 10.
//   - Leader 1 bumps to LE 2 with truncation offset 7 (point (2, 7)), cuts
//     [7, 10) (HW 7) and copies Y = [7, 12) of source epoch 2. Replica 3
//     fetches in LE 2 (truncates, copies Y; HW stays 7 because replica 2, an
//     ISR member, has not fetched in LE 2). Replica 2 never fetches.
//   - Leader 1 dies; replica 2 (ISR) is elected cleanly in LE 3. Its HW is
//     the 10 it learned in LE 1, so consumers in LE 3 read X's [7, 10) —
//     records the recorded truncation removed.
//   - Replica 2 dies before its mirror machine re-truncates (its run record
//     says MIRRORING, so it would only after a DivergingEpoch from the
//     source); replica 3 (ISR) is elected cleanly in LE 4 and serves Y at
//     7.. to the same consumer, with no truncation point newer than LE 3:
//     no LOG_TRUNCATED, offset 7 shows two records (§8.13), and the clean
//     leader of LE 4 lacks records below trueHW 10 (§8.7).
//
// Fixed: broker/replica caps the HW of a replica becoming leader in LE e1
// at o for every truncation point (e, o) with validated < e < e1
// (Replica.capHWAtTruncationPoints), validated being the last LE in which
// this replica's log was checked against a leader: its persisted
// aligned_epoch (a follower raises it on every fetch answered NONE without
// DivergingEpoch), or, in memory, an LE it led with the cap applied and its
// owed truncation done. Only the HW moves: the records stay and become
// committed again once every maximal-ISR member has fetched in e1 without
// DivergingEpoch (§4.2, KAFKA-7128), i.e. after they truncated to agree
// with it; until then consumers wait. The point at e1 itself is the
// leader's own owed truncation (plan.BecameLeader.TruncationPoints).
func TestKnownBugStaleReplicaHWAboveTruncationPoint(t *testing.T) {
	tp := twinlog.TopicPartition{Topic: "t", Partition: 0}
	brokers := map[twinlog.BrokerID]twinlog.BrokerEpoch{2: 1, 3: 1}
	points := []replica.TruncationPoint{{LeaderEpoch: 2, Offset: 7}}
	lead := func(id twinlog.BrokerID, st replica.LogState, le twinlog.Epoch, isr []twinlog.BrokerID) *replica.Replica {
		t.Helper()
		r, err := replica.New(replica.Config{ID: id, Partition: tp}, st)
		if err != nil {
			t.Fatal(err)
		}
		r.SetMirrorPartition(true)
		r.SetWritable(false)
		r.ApplyPartitionState(replica.PartitionState{Leader: id, LeaderEpoch: le, PartitionEpoch: 10, Replicas: []twinlog.BrokerID{1, 2, 3},
			ISR: isr, MinISR: 1, Brokers: brokers, TruncationPoints: points}, 1000)
		if r.Role() != replica.RoleLeader {
			t.Fatalf("replica %d: role %v", id, r.Role())
		}
		return r
	}
	consume := func(r *replica.Replica, le twinlog.Epoch) replica.FetchDecision {
		return r.HandleFollowerFetch(replica.FetchRequest{ReplicaID: twinlog.NoBroker, BrokerEpoch: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER,
			FetchOffset: 7, CurrentLeaderEpoch: le, LastFetchedEpoch: twinlog.NoEpoch}, 1000)
	}

	// Replica 2: X [0, 10) epoch 1, HW 10, last fetched in LE 1.
	r2 := lead(2, replica.LogState{LogEndOffset: 10, HighWatermark: 10, Epochs: []epoch.Entry{{Epoch: 1, StartOffset: 0}}, AlignedEpoch: 1}, 3, []twinlog.BrokerID{2, 3})
	if d := consume(r2, 3); d.Error != pb.ErrorCode_ERROR_CODE_NONE || d.ReadUpTo > 7 {
		t.Errorf("leader 2 in LE 3 serves a consumer [%d, %d) (%v): it has not fetched since truncation point (2, 7), so [7, 10) may be records that truncation removed", d.ReadFrom, d.ReadUpTo, d.Error)
	}

	// Replica 3 validated in LE 2 (aligned 2): Y [7, 12) epoch 2 is the
	// post-truncation log; capping it would be needless.
	r3 := lead(3, replica.LogState{LogEndOffset: 12, HighWatermark: 7, Epochs: []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 7}}, AlignedEpoch: 2}, 4, []twinlog.BrokerID{3})
	d := consume(r3, 4)
	if d.Error != pb.ErrorCode_ERROR_CODE_NONE || d.ReadUpTo != 12 {
		t.Fatalf("leader 3 in LE 4 serves [%d, %d) (%v), want [7, 12)", d.ReadFrom, d.ReadUpTo, d.Error)
	}
}
