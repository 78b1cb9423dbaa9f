package group

import (
	"errors"
	"testing"

	"github.com/twinlog/twinlog"
)

// TestLoad replays a partition's records as Kafka does: the latest record
// of a key wins, tombstones delete, an offset of a group without metadata
// makes a simple group; loaded members' sessions start at Loaded.
func TestLoad(t *testing.T) {
	tp := func(topic string, p int32) twinlog.TopicPartition {
		return twinlog.TopicPartition{Topic: topic, Partition: p}
	}
	off := func(o int64) *OffsetAndMetadata {
		return &OffsetAndMetadata{Offset: o, LeaderEpoch: -1, CommitTimestampMs: 1, ExpireTimestampMs: -1}
	}
	member := func(id string, inst *string) MemberMetadata {
		return MemberMetadata{MemberID: id, GroupInstanceID: inst, ClientID: "c", ClientHost: "/h", RebalanceTimeoutMs: -1,
			SessionTimeoutMs: 20_000, Subscription: consumerMeta("t"), Assignment: []byte(id)}
	}
	gen := func(n int32, leader string, ms ...MemberMetadata) *GroupMetadata {
		return &GroupMetadata{ProtocolType: "consumer", Generation: n, Protocol: ptr("range"), Leader: ptr(leader), CurrentStateTimestampMs: 7, Members: ms}
	}
	log := []Record{
		EncodeGroupMetadata("g", gen(1, "a", member("a", nil))),
		EncodeOffsetCommit("g", tp("t", 0), off(10)),
		EncodeGroupMetadata("g", gen(2, "b", member("a", nil), member("b", ptr("ib")))),
		EncodeOffsetCommit("g", tp("t", 0), off(11)),
		EncodeOffsetCommit("g", tp("t", 1), off(5)),
		EncodeOffsetCommit("g", tp("t", 1), nil),
		EncodeOffsetCommit("simple", tp("u", 0), off(3)),
		EncodeGroupMetadata("gone", gen(4, "x", member("x", nil))),
		EncodeGroupMetadata("gone", nil),
		EncodeGroupMetadata("empty", &GroupMetadata{ProtocolType: "consumer", Generation: 9, CurrentStateTimestampMs: 100}),
	}
	e := newEnv(t, testConfig())
	c, err := New(testConfig(), Deps{Rand: newRand()})
	if err != nil {
		t.Fatal(err)
	}
	e.c, e.now = c, 1000
	c.JoinGroup(e.now, e.ref(), jreq("g", "")) // loading: not served
	if err := c.Replay(e.now, log[:5]); err != nil {
		t.Fatal(err)
	}
	if err := c.Replay(e.now, log[5:]); err != nil {
		t.Fatal(err)
	}
	c.Loaded(e.now)
	e.drain()
	if j := e.joinResp(e.next); j.ErrorCode != CoordinatorLoadInProgress {
		t.Fatalf("join while loading: %+v", j)
	}
	if ids := c.GroupIDs(); len(ids) != 3 || ids[0] != "empty" || ids[1] != "g" || ids[2] != "simple" {
		t.Fatalf("groups %v", ids)
	}
	g := e.group("g")
	if g.State != Stable || g.Generation != 2 || g.Leader != "b" || len(g.Members) != 2 || *g.Members[1].GroupInstanceID != "ib" ||
		g.Members[0].RebalanceTimeoutMs != 20_000 || string(g.Members[1].Assignment) != "b" {
		t.Fatalf("g: %+v", g)
	}
	if e.fetchOne("g", "t", 0) != 11 || e.fetchOne("g", "t", 1) != -1 || e.fetchOne("simple", "u", 0) != 3 {
		t.Fatal("offsets")
	}
	if s := e.group("simple"); s.State != Empty || s.ProtocolType != "" {
		t.Fatalf("simple: %+v", s)
	}
	if em := e.group("empty"); em.State != Empty || em.Generation != 9 || em.StateTimestampMs != 100 {
		t.Fatalf("empty: %+v", em)
	}
	// The loaded generation goes on: b syncs and heartbeats; a's session,
	// started at Loaded, expires.
	if s := e.mustSync(e.sync(SyncGroupRequest{GroupID: "g", GenerationID: 2, MemberID: "b", GroupInstanceID: ptr("ib")}), None); string(s.Assignment) != "b" {
		t.Fatalf("loaded assignment %q", s.Assignment)
	}
	for range 3 {
		e.advance(5000)
		if c := e.heartbeat("g", "b", 2); c != None {
			t.Fatalf("heartbeat of a loaded member: %v", c)
		}
	}
	e.advance(4999)
	if e.state("g") != Stable {
		t.Fatal("a expired early")
	}
	e.advance(1) // 20 s after Loaded
	if g := e.group("g"); g.State != PreparingRebalance || len(g.Members) != 1 {
		t.Fatalf("after a's session: %+v", g)
	}

	// A group over group.max.size rebalances when loaded.
	cfg := testConfig()
	cfg.MaxSize = 1
	c2, _ := New(cfg, Deps{Rand: newRand()})
	if err := c2.Load(0, log); err != nil {
		t.Fatal(err)
	}
	if g, _ := c2.Group("g"); g.State != PreparingRebalance {
		t.Fatalf("over capacity: %v", g.State)
	}
	// Records of other types, and corrupt ones, fail the load.
	c3, _ := New(cfg, Deps{Rand: newRand()})
	if err := c3.Load(0, []Record{{Key: []byte{0, 5, 0, 0}}}); !errors.Is(err, ErrUnsupportedRecord) {
		t.Fatalf("key version 5: %v", err)
	}
}
