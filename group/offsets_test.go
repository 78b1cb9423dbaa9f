package group

import (
	"reflect"
	"testing"
)

func commitReq(g string, gen int32, member string, topic string, part int32, off int64) OffsetCommitRequest {
	return OffsetCommitRequest{Version: 8, GroupID: g, GenerationID: gen, MemberID: member, RetentionTimeMs: -1,
		Topics: []CommitTopic{{Name: topic, Partitions: []CommitPartition{{Partition: part, Offset: off, LeaderEpoch: 3, Metadata: ptr("md")}}}}}
}

func (e *env) commitCode(req OffsetCommitRequest) ErrorCode {
	e.t.Helper()
	return e.mustResp(e.commit(req)).(*OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// fetchOne is the committed offset of one partition (-1 for none).
func (e *env) fetchOne(g, topic string, part int32) int64 {
	f := e.c.OffsetFetch(OffsetFetchRequest{GroupID: g, Topics: []FetchTopic{{Name: topic, Partitions: []int32{part}}}})
	return f.Topics[0].Partitions[0].Offset
}

// TestOffsetCommit: who may commit when, and what OffsetFetch returns.
func TestOffsetCommit(t *testing.T) {
	e := newEnv(t, testConfig())
	// A simple consumer creates its group with its first commit.
	if c := e.commitCode(commitReq("simple", -1, "", "t", 0, 10)); c != None {
		t.Fatalf("simple commit: %v", c)
	}
	if g := e.group("simple"); g.State != Empty || g.ProtocolType != "" {
		t.Fatalf("simple group: %+v", g)
	}
	f := e.c.OffsetFetch(OffsetFetchRequest{GroupID: "simple", Topics: []FetchTopic{{Name: "t", Partitions: []int32{0, 1}}}})
	want := []FetchedPartition{{Partition: 0, Offset: 10, LeaderEpoch: 3, Metadata: "md"}, {Partition: 1, Offset: -1, LeaderEpoch: -1}}
	if !reflect.DeepEqual(f.Topics[0].Partitions, want) {
		t.Fatalf("fetch: %+v, want %+v", f.Topics[0].Partitions, want)
	}
	// A generation of a group that does not exist.
	if c := e.commitCode(commitReq("nogroup", 1, "m", "t", 0, 1)); c != IllegalGeneration {
		t.Fatalf("v8 commit to an unknown group: %v", c)
	}
	req := commitReq("nogroup", 1, "m", "t", 0, 1)
	req.Version = 9
	if c := e.commitCode(req); c != GroupIDNotFound {
		t.Fatalf("v9 commit to an unknown group: %v", c)
	}
	// Members commit in their generation; simple commits need an Empty group.
	ids := e.stableGroup("g", 2)
	if c := e.commitCode(commitReq("g", 1, ids[0], "t", 0, 5)); c != None {
		t.Fatalf("member commit: %v", c)
	}
	if c := e.commitCode(commitReq("g", -1, "", "t", 0, 6)); c != UnknownMemberID {
		t.Fatalf("simple commit to a Stable group: %v", c)
	}
	if c := e.commitCode(commitReq("g", 1, ids[0], "t", 0, 7)); c != None || e.fetchOne("g", "t", 0) != 7 {
		t.Fatalf("second commit: %v, fetched %d", c, e.fetchOne("g", "t", 0))
	}
	// Metadata over offset.metadata.max.bytes.
	big := commitReq("g", 1, ids[0], "t", 1, 1)
	big.Topics[0].Partitions[0].Metadata = ptr(string(make([]byte, 4097)))
	big.Topics[0].Partitions = append(big.Topics[0].Partitions, CommitPartition{Partition: 2, Offset: 2, LeaderEpoch: -1})
	resp := e.mustResp(e.commit(big)).(*OffsetCommitResponse)
	if resp.Topics[0].Partitions[0].ErrorCode != OffsetMetadataTooLarge || resp.Topics[0].Partitions[1].ErrorCode != None || e.fetchOne("g", "t", 2) != 2 {
		t.Fatalf("too large metadata: %+v", resp)
	}
	// Fetching all: sorted by topic and partition.
	e.commitCode(commitReq("g", 1, ids[1], "a", 4, 40))
	all := e.c.OffsetFetch(OffsetFetchRequest{GroupID: "g"})
	if len(all.Topics) != 2 || all.Topics[0].Name != "a" || all.Topics[1].Name != "t" || len(all.Topics[1].Partitions) != 2 || all.Topics[1].Partitions[1].Partition != 2 {
		t.Fatalf("fetch all: %+v", all)
	}
	// A commit is invisible until durable, and a failed one changes nothing.
	e.hold = true
	r := e.commit(commitReq("g", 1, ids[0], "t", 0, 100))
	if e.fetchOne("g", "t", 0) != 7 {
		t.Fatal("fetch shows a commit that is not durable")
	}
	e.fail(NotEnoughReplicas)
	if c := e.mustResp(r).(*OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != CoordinatorNotAvailable || e.fetchOne("g", "t", 0) != 7 {
		t.Fatalf("failed commit: %v, fetched %d", c, e.fetchOne("g", "t", 0))
	}
	r = e.commit(commitReq("g", 1, ids[0], "t", 0, 101))
	e.ack()
	if c := e.mustResp(r).(*OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != None || e.fetchOne("g", "t", 0) != 101 {
		t.Fatalf("fetched %d after the commit", e.fetchOne("g", "t", 0))
	}
	e.hold = false
	// An unknown group has no offsets.
	if f := e.c.OffsetFetch(OffsetFetchRequest{GroupID: "nogroup"}); f.ErrorCode != None || len(f.Topics) != 0 {
		t.Fatalf("fetch of an unknown group: %+v", f)
	}
}

// TestOffsetCommitKeepsSession: a member's commits keep its session in a
// Stable group (Kafka's classic protocol).
func TestOffsetCommitKeepsSession(t *testing.T) {
	e := newEnv(t, testConfig())
	ids := e.stableGroup("g", 1)
	for range 5 {
		e.advance(5000)
		if c := e.commitCode(commitReq("g", 1, ids[0], "t", 0, 1)); c != None {
			t.Fatalf("commit: %v", c)
		}
	}
	if e.state("g") != Stable {
		t.Fatalf("member expired although committing: %v", e.state("g"))
	}
}

// TestOffsetExpiration: offsets expire offsets.retention after their
// group became Empty (not after the commit), a simple group's after their
// commit, explicit retentions at their expiry; an Empty group left without
// offsets is deleted.
func TestOffsetExpiration(t *testing.T) {
	cfg := testConfig()
	cfg.OffsetsRetentionMs = 100_000
	cfg.OffsetsRetentionCheckIntervalMs = 1000
	e := newEnv(t, cfg)
	ids := e.stableGroup("g", 1)
	e.commitCode(commitReq("g", 1, ids[0], "t", 0, 5)) // at 0
	e.commitCode(commitReq("simple", -1, "", "t", 0, 9))
	ret := commitReq("simple", -1, "", "t", 1, 9)
	ret.RetentionTimeMs = 50_000
	e.commitCode(ret)
	for range 40 {
		e.advance(5000)
		e.heartbeat("g", ids[0], 1)
	}
	// 200 000: the Stable group's offsets stay (subscribed topic).
	if e.fetchOne("g", "t", 0) != 5 {
		t.Fatal("a Stable group's offset of a subscribed topic expired")
	}
	if e.fetchOne("simple", "t", 0) != -1 || e.fetchOne("simple", "t", 1) != -1 {
		t.Fatal("the simple group's offsets did not expire")
	}
	if _, err := e.c.Group("simple"); err == nil {
		t.Fatal("the simple group outlived its offsets")
	}
	e.leave("g", LeaveMember{MemberID: ids[0]}) // Empty at 200 000
	e.advance(99_000)
	if e.fetchOne("g", "t", 0) != 5 {
		t.Fatal("expired before retention after the group became Empty")
	}
	e.advance(1000)
	if e.fetchOne("g", "t", 0) != -1 {
		t.Fatal("not expired at retention after the group became Empty")
	}
	if l := e.c.ListGroups(ListGroupsRequest{}); len(l.Groups) != 0 {
		t.Fatalf("groups left: %+v", l.Groups)
	}
	// The tombstones are in the log.
	var tombstones int
	for _, r := range e.log {
		if r.Value == nil {
			tombstones++
		}
	}
	if tombstones != 5 { // 3 offsets, 2 groups
		t.Fatalf("%d tombstones, want 5", tombstones)
	}

	// An explicit retention expires at its time, even in an Empty group.
	e.commitCode(ret)
	e.advance(49_000)
	if e.fetchOne("simple", "t", 1) != 9 {
		t.Fatal("expired before its explicit retention")
	}
	e.advance(1000)
	if e.fetchOne("simple", "t", 1) != -1 {
		t.Fatal("not expired at its explicit retention")
	}
}

// TestOffsetExpirationUnsubscribed: a Stable consumer group's offsets of
// topics no member subscribes to expire after their commit.
func TestOffsetExpirationUnsubscribed(t *testing.T) {
	cfg := testConfig()
	cfg.OffsetsRetentionMs = 20_000
	cfg.OffsetsRetentionCheckIntervalMs = 1000
	e := newEnv(t, cfg)
	ids := e.stableGroup("g", 1)
	e.commitCode(commitReq("g", 1, ids[0], "t", 0, 5))
	e.commitCode(commitReq("g", 1, ids[0], "old", 0, 5))
	for range 5 {
		e.advance(4000)
		e.heartbeat("g", ids[0], 1)
	}
	if e.fetchOne("g", "old", 0) != -1 || e.fetchOne("g", "t", 0) != 5 {
		t.Fatalf("after retention: old %d, t %d", e.fetchOne("g", "old", 0), e.fetchOne("g", "t", 0))
	}
}

// TestDeleteGroups: only Empty groups are deleted, with their offsets.
func TestDeleteGroups(t *testing.T) {
	e := newEnv(t, testConfig())
	e.stableGroup("busy", 1)
	e.commitCode(commitReq("idle", -1, "", "t", 0, 1))
	e.commitCode(commitReq("idle", -1, "", "t", 1, 1))
	e.hold = true
	r := e.ref()
	e.c.DeleteGroups(e.now, r, []string{"busy", "idle", "nogroup", ""})
	e.drain()
	if st := e.state("idle"); st != Dead || len(e.pending) != 1 || len(e.pending[0].Records) != 3 {
		t.Fatalf("deleting: state %v, appends %+v", st, e.pending)
	}
	// While the deletion is appended, the group takes no commits.
	rc := e.commit(commitReq("idle", -1, "", "t", 0, 2))
	e.ack()
	e.hold = false
	got := e.mustResp(r).(*DeleteGroupsResponse).Results
	want := []DeletedGroup{{"busy", NonEmptyGroup}, {"idle", None}, {"nogroup", GroupIDNotFound}, {"", InvalidGroupID}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("delete: %+v, want %+v", got, want)
	}
	if c := e.mustResp(rc).(*OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != CoordinatorNotAvailable {
		t.Fatalf("commit to a group being deleted: %v", c)
	}
	if _, err := e.c.Group("idle"); err == nil || e.fetchOne("idle", "t", 0) != -1 {
		t.Fatal("idle group not deleted")
	}
	// A commit on its way when the group is deleted is deleted with it.
	e.commitCode(commitReq("idle", -1, "", "t", 4, 1))
	e.hold = true
	e.commit(commitReq("idle", -1, "", "t", 5, 1))
	r = e.ref()
	e.c.DeleteGroups(e.now, r, []string{"idle"})
	e.drain()
	e.ackAll()
	e.hold = false
	if got := e.mustResp(r).(*DeleteGroupsResponse).Results[0].ErrorCode; got != None {
		t.Fatalf("delete with a commit in flight: %v", got)
	}
	e.commitCode(commitReq("idle", -1, "", "t", 6, 1))
	if f := e.c.OffsetFetch(OffsetFetchRequest{GroupID: "idle"}); len(f.Topics) != 1 || len(f.Topics[0].Partitions) != 1 || f.Topics[0].Partitions[0].Partition != 6 {
		t.Fatalf("offsets of the recreated group: %+v", f.Topics)
	}
	// A failed deletion leaves the group as it was.
	e.commitCode(commitReq("idle", -1, "", "t", 0, 3))
	e.hold = true
	r = e.ref()
	e.c.DeleteGroups(e.now, r, []string{"idle"})
	e.drain()
	e.fail(NotEnoughReplicas)
	e.hold = false
	if got := e.mustResp(r).(*DeleteGroupsResponse).Results[0].ErrorCode; got != CoordinatorNotAvailable {
		t.Fatalf("failed delete: %v", got)
	}
	if e.state("idle") != Empty || e.fetchOne("idle", "t", 0) != 3 {
		t.Fatal("failed delete changed the group")
	}
}

// TestOffsetDelete: offsets of topics the group does not consume go;
// those it consumes stay (GROUP_SUBSCRIBED_TO_TOPIC).
func TestOffsetDelete(t *testing.T) {
	e := newEnv(t, testConfig())
	ids := e.stableGroup("g", 1) // subscribed to t
	e.commitCode(commitReq("g", 1, ids[0], "t", 0, 1))
	e.commitCode(commitReq("g", 1, ids[0], "u", 0, 1))
	del := func(g string, topics ...FetchTopic) *OffsetDeleteResponse {
		r := e.ref()
		e.c.OffsetDelete(e.now, r, OffsetDeleteRequest{GroupID: g, Topics: topics})
		e.drain()
		return e.mustResp(r).(*OffsetDeleteResponse)
	}
	resp := del("g", FetchTopic{Name: "t", Partitions: []int32{0}}, FetchTopic{Name: "u", Partitions: []int32{0, 1}})
	if resp.ErrorCode != None || resp.Topics[0].Partitions[0].ErrorCode != GroupSubscribedToTopic || resp.Topics[1].Partitions[0].ErrorCode != None || resp.Topics[1].Partitions[1].ErrorCode != None {
		t.Fatalf("offset delete: %+v", resp)
	}
	if e.fetchOne("g", "t", 0) != 1 || e.fetchOne("g", "u", 0) != -1 {
		t.Fatal("wrong offsets deleted")
	}
	if r := del("nogroup"); r.ErrorCode != GroupIDNotFound {
		t.Fatalf("unknown group: %+v", r)
	}
	// A Stable group of another protocol type: NON_EMPTY_GROUP.
	req := jreq("c", "")
	req.ProtocolType = "connect"
	e.newMember(req)
	e.advance(0)
	if r := del("c", FetchTopic{Name: "u", Partitions: []int32{0}}); r.ErrorCode != NonEmptyGroup {
		t.Fatalf("non-consumer group: %+v", r)
	}
	// Once Empty, every topic's offsets may go.
	e.leave("g", LeaveMember{MemberID: ids[0]})
	if r := del("g", FetchTopic{Name: "t", Partitions: []int32{0}}); r.Topics[0].Partitions[0].ErrorCode != None || e.fetchOne("g", "t", 0) != -1 {
		t.Fatalf("empty group: %+v", r)
	}
}

// TestListAndDescribe: ListGroups filters by state and type; DescribeGroups
// shows metadata and assignments of Stable groups only.
func TestListAndDescribe(t *testing.T) {
	e := newEnv(t, testConfig())
	ids := e.stableGroup("stable", 2)
	e.commitCode(commitReq("empty", -1, "", "t", 0, 1))
	e.newMember(jreq("preparing", ""))
	l := e.c.ListGroups(ListGroupsRequest{})
	want := []ListedGroup{
		{"empty", "", "Empty", "classic"},
		{"preparing", "consumer", "PreparingRebalance", "classic"},
		{"stable", "consumer", "Stable", "classic"},
	}
	if !reflect.DeepEqual(l.Groups, want) {
		t.Fatalf("list: %+v", l.Groups)
	}
	if l := e.c.ListGroups(ListGroupsRequest{StatesFilter: []string{"STABLE", " empty"}}); len(l.Groups) != 2 {
		t.Fatalf("state filter: %+v", l.Groups)
	}
	if l := e.c.ListGroups(ListGroupsRequest{TypesFilter: []string{"consumer"}}); len(l.Groups) != 0 {
		t.Fatalf("type filter: %+v", l.Groups)
	}
	d := e.c.DescribeGroups([]string{"stable", "preparing", "nogroup"})
	s := d[0]
	if s.GroupState != "Stable" || s.ProtocolData != "range" || len(s.Members) != 2 || s.Members[0].MemberID != ids[0] ||
		string(s.Members[0].MemberAssignment) != ids[0] || string(s.Members[0].MemberMetadata) != string(consumerMeta("t")) ||
		s.Members[0].ClientHost != "/10.0.0.1" {
		t.Fatalf("describe stable: %+v", s)
	}
	if p := d[1]; p.GroupState != "PreparingRebalance" || p.ProtocolData != "" || p.Members[0].MemberMetadata != nil {
		t.Fatalf("describe preparing: %+v", p)
	}
	if n := d[2]; n.GroupState != "Dead" || n.ErrorCode != None {
		t.Fatalf("describe unknown: %+v", n)
	}
}
