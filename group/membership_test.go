package group

import (
	"bytes"
	"slices"
	"testing"
)

// TestJoinValidation: the checks before a join reaches a group, and the
// first round of KIP-394.
func TestJoinValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*JoinGroupRequest)
		want   ErrorCode
	}{
		{"v4+ without member id gets one", func(r *JoinGroupRequest) { r.Version = 4 }, MemberIDRequired},
		{"empty group id", func(r *JoinGroupRequest) { r.GroupID = "" }, InvalidGroupID},
		{"session timeout below min", func(r *JoinGroupRequest) { r.SessionTimeoutMs = 5999 }, InvalidSessionTimeout},
		{"session timeout above max", func(r *JoinGroupRequest) { r.SessionTimeoutMs = 1_800_001 }, InvalidSessionTimeout},
		{"member id of an unknown group", func(r *JoinGroupRequest) { r.MemberID = "m-1" }, UnknownMemberID},
		{"no protocol type", func(r *JoinGroupRequest) { r.ProtocolType = "" }, InconsistentGroupProtocol},
		{"no protocols", func(r *JoinGroupRequest) { r.Protocols = nil }, InconsistentGroupProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, testConfig())
			req := jreq("g", "")
			tc.mutate(&req)
			j := e.mustJoin(e.join(req), tc.want)
			if tc.want == MemberIDRequired && (len(j.MemberID) < len("client-")+36 || j.MemberID[:7] != "client-") {
				t.Fatalf("member id %q: want client id, dash, UUID", j.MemberID)
			}
		})
	}
	// Before v4 the first join is the join.
	e := newEnv(t, testConfig())
	req := jreq("g", "")
	req.Version = 3
	r := e.join(req)
	e.advance(0)
	if j := e.mustJoin(r, None); j.GenerationID != 1 || j.Leader != j.MemberID {
		t.Fatalf("v3 join: %+v", j)
	}
	// A different protocol type than the group's is inconsistent.
	req = jreq("g", "")
	req.ProtocolType = "connect"
	e.mustJoin(e.join(req), InconsistentGroupProtocol)
	// So is a protocol no member supports.
	req = jreq("g", "")
	req.Protocols = []Protocol{{Name: "roundrobin"}}
	e.mustJoin(e.join(req), InconsistentGroupProtocol)
}

// TestRebalanceMembers brings 1..n members to Stable in one generation:
// one leader with the member list, every member its own assignment.
func TestRebalanceMembers(t *testing.T) {
	for n := 1; n <= 6; n++ {
		e := newEnv(t, testConfig())
		ids := e.stableGroup("g", n)
		g := e.group("g")
		if g.Generation != 1 || len(g.Members) != n || *g.Protocol != "range" || g.ProtocolType != "consumer" {
			t.Fatalf("n=%d: %+v", n, g)
		}
		for i, m := range g.Members {
			if m.MemberID != ids[i] || string(m.Assignment) != ids[i] {
				t.Fatalf("n=%d: member %d %+v", n, i, m)
			}
		}
		// The group's metadata record holds the generation.
		last, err := DecodeRecord(e.log[len(e.log)-1])
		if err != nil || last.Metadata == nil || last.Metadata.Generation != 1 || len(last.Metadata.Members) != n {
			t.Fatalf("n=%d: last record %+v %v", n, last, err)
		}
	}
}

// TestLeaderGetsMembers: only the leader's JoinGroup lists the members,
// sorted, with their metadata for the chosen protocol.
func TestLeaderGetsMembers(t *testing.T) {
	e := newEnv(t, testConfig())
	a, ra := e.newMember(jreq("g", ""))
	req := jreq("g", "")
	req.Protocols = []Protocol{{Name: "sticky", Metadata: []byte("s")}, {Name: "range", Metadata: consumerMeta("u")}}
	b, rb := e.newMember(req)
	e.advance(0)
	ja, jb := e.mustJoin(ra, None), e.mustJoin(rb, None)
	if ja.Leader != a || jb.Leader != a || len(jb.Members) != 0 || *ja.ProtocolName != "range" {
		t.Fatalf("leader %s: %+v / %+v", a, ja, jb)
	}
	want := []JoinGroupMember{{MemberID: a, Metadata: consumerMeta("t")}, {MemberID: b, Metadata: consumerMeta("u")}}
	slices.SortFunc(want, func(x, y JoinGroupMember) int { return bytes.Compare([]byte(x.MemberID), []byte(y.MemberID)) })
	if len(ja.Members) != 2 || ja.Members[0].MemberID != want[0].MemberID || !bytes.Equal(ja.Members[1].Metadata, want[1].Metadata) {
		t.Fatalf("leader's members %+v, want %+v", ja.Members, want)
	}
}

// TestProtocolVote: the protocol every member supports with most votes,
// each member voting for its most preferred candidate.
func TestProtocolVote(t *testing.T) {
	for _, tc := range []struct {
		prefs [][]string
		want  string
	}{
		{[][]string{{"a"}}, "a"},
		{[][]string{{"a", "b"}, {"b", "a"}, {"b", "a"}}, "b"},
		{[][]string{{"a", "b"}, {"a", "b"}, {"b", "a"}}, "a"},
		{[][]string{{"c", "a", "b"}, {"b", "a"}, {"a"}}, "a"}, // only a is common
		{[][]string{{"b", "a"}, {"a", "b"}}, "a"},             // a tie: the smallest name
	} {
		e := newEnv(t, testConfig())
		var refs []Ref
		for _, ps := range tc.prefs {
			req := jreq("g", "")
			req.Protocols = nil
			for _, p := range ps {
				req.Protocols = append(req.Protocols, Protocol{Name: p})
			}
			_, r := e.newMember(req)
			refs = append(refs, r)
		}
		e.advance(0)
		for _, r := range refs {
			if j := e.mustJoin(r, None); *j.ProtocolName != tc.want {
				t.Fatalf("%v: chose %s, want %s", tc.prefs, *j.ProtocolName, tc.want)
			}
		}
	}
}

// TestInitialRebalanceDelay: a new group's first rebalance waits
// group.initial.rebalance.delay.ms, once more for each step in which new
// members arrived, within the rebalance timeout.
func TestInitialRebalanceDelay(t *testing.T) {
	e := newEnv(t, Config{}) // Kafka's 3000 ms
	_, ra := e.newMember(jreq("g", ""))
	if e.tickAt != 3000 {
		t.Fatalf("tick at %d, want 3000", e.tickAt)
	}
	e.advance(2000)
	_, rb := e.newMember(jreq("g", "")) // extends the delay
	e.advance(1000)
	if e.joinResp(ra) != nil || e.state("g") != PreparingRebalance {
		t.Fatal("rebalance completed at 3000 although a member joined during the delay")
	}
	if e.tickAt != 6000 {
		t.Fatalf("tick at %d, want 6000", e.tickAt)
	}
	e.advance(2999)
	if e.joinResp(rb) != nil {
		t.Fatal("completed before 6000")
	}
	e.advance(1)
	e.mustJoin(ra, None)
	e.mustJoin(rb, None)

	// Members arriving every step: bounded by the rebalance timeout.
	e = newEnv(t, Config{})
	req := jreq("h", "")
	req.RebalanceTimeoutMs = 10_000
	_, r := e.newMember(req)
	for e.joinResp(r) == nil && e.now < 20_000 {
		e.newMember(req)
		e.advance(3000)
	}
	if e.now != 12_000 {
		t.Fatalf("initial rebalance ended at %d, want 12000 (delay steps up to the 10 s timeout)", e.now)
	}
}

// TestRebalanceTimeout: members that do not rejoin within the rebalance
// timeout are dropped; the ones that did form the next generation.
func TestRebalanceTimeout(t *testing.T) {
	e := newEnv(t, testConfig())
	ids := e.stableGroup("g", 3)
	// ids[0] rejoins with new metadata: a rebalance.
	req := jreq("g", ids[0])
	req.Protocols = []Protocol{{Name: "range", Metadata: consumerMeta("t", "u")}}
	r0 := e.join(req)
	if e.state("g") != PreparingRebalance {
		t.Fatal("no rebalance")
	}
	if c := e.heartbeat("g", ids[1], 1); c != RebalanceInProgress {
		t.Fatalf("heartbeat during rebalance: %v", c)
	}
	r1 := e.join(jreq("g", ids[1]))
	// ids[2] heartbeats (REBALANCE_IN_PROGRESS) but does not rejoin.
	for range 5 {
		e.advance(5000)
		if c := e.heartbeat("g", ids[2], 1); c != RebalanceInProgress {
			t.Fatalf("heartbeat of a member yet to rejoin: %v", c)
		}
	}
	e.advance(4999)
	if e.joinResp(r0) != nil {
		t.Fatal("completed before the rebalance timeout")
	}
	e.advance(1)
	j0, j1 := e.mustJoin(r0, None), e.mustJoin(r1, None)
	if j0.GenerationID != 2 || j1.GenerationID != 2 {
		t.Fatalf("generations %d %d", j0.GenerationID, j1.GenerationID)
	}
	g := e.group("g")
	if len(g.Members) != 2 || g.State != CompletingRebalance {
		t.Fatalf("after timeout: %+v", g)
	}
	if c := e.heartbeat("g", ids[2], 1); c != UnknownMemberID {
		t.Fatalf("dropped member's heartbeat: %v", c)
	}
}

// TestGenerationFencing: requests of another generation or of strangers.
func TestGenerationFencing(t *testing.T) {
	e := newEnv(t, testConfig())
	ids := e.stableGroup("g", 2)
	for _, tc := range []struct {
		name string
		gen  int32
		id   string
		want ErrorCode
	}{
		{"current", 1, ids[0], None},
		{"old generation", 0, ids[0], IllegalGeneration},
		{"future generation", 2, ids[0], IllegalGeneration},
		{"unknown member", 1, "nobody", UnknownMemberID},
	} {
		if c := e.heartbeat("g", tc.id, tc.gen); c != tc.want {
			t.Errorf("heartbeat %s: %v, want %v", tc.name, c, tc.want)
		}
		e.mustSync(e.sync(SyncGroupRequest{GroupID: "g", GenerationID: tc.gen, MemberID: tc.id}), tc.want)
		r := e.commit(OffsetCommitRequest{Version: 8, GroupID: "g", GenerationID: tc.gen, MemberID: tc.id,
			Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 5}}}}})
		if c := e.mustResp(r).(*OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != tc.want {
			t.Errorf("commit %s: %v, want %v", tc.name, c, tc.want)
		}
	}
	if c := e.heartbeat("nogroup", ids[0], 1); c != UnknownMemberID {
		t.Errorf("heartbeat of an unknown group: %v", c)
	}
	e.mustSync(e.sync(SyncGroupRequest{GroupID: "g", GenerationID: 1, MemberID: ids[0], ProtocolName: ptr("sticky")}), InconsistentGroupProtocol)

	// A new generation is waiting for its assignment: commits are
	// REBALANCE_IN_PROGRESS, the old generation's sync ILLEGAL_GENERATION.
	req := jreq("g", ids[0])
	req.Protocols[0].Metadata = consumerMeta("t", "u") // forces a rebalance
	r0, r1 := e.join(req), e.join(jreq("g", ids[1]))
	e.mustJoin(r0, None)
	e.mustJoin(r1, None)
	r := e.commit(OffsetCommitRequest{Version: 8, GroupID: "g", GenerationID: 2, MemberID: ids[1],
		Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 5}}}}})
	if c := e.mustResp(r).(*OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != RebalanceInProgress {
		t.Errorf("commit while completing: %v", c)
	}
	e.mustSync(e.sync(SyncGroupRequest{GroupID: "g", GenerationID: 1, MemberID: ids[1]}), IllegalGeneration)
	// Heartbeats of the new generation are fine while it completes.
	if c := e.heartbeat("g", ids[1], 2); c != None {
		t.Errorf("heartbeat while completing: %v", c)
	}
}

// TestSessionExpiry: a member that stops heartbeating is removed at its
// session timeout and the others rebalance; a pending member (KIP-394)
// that never rejoins is forgotten.
func TestSessionExpiry(t *testing.T) {
	e := newEnv(t, testConfig())
	ids := e.stableGroup("g", 2)
	for range 2 {
		e.advance(4000)
		if c := e.heartbeat("g", ids[0], 1); c != None {
			t.Fatalf("heartbeat: %v", c)
		}
	}
	e.advance(1999)
	if e.state("g") != Stable {
		t.Fatal("expired early")
	}
	// ids[1] last heard of at 0 (its sync): expired at 10 000.
	e.advance(1)
	g := e.group("g")
	if g.State != PreparingRebalance || len(g.Members) != 1 || g.Members[0].MemberID != ids[0] {
		t.Fatalf("after expiry: %+v", g)
	}
	r := e.join(jreq("g", ids[0]))
	if j := e.mustJoin(r, None); j.GenerationID != 2 || j.Leader != ids[0] {
		t.Fatalf("rejoin: %+v", j)
	}

	// A pending member expires after its session timeout.
	j := e.mustJoin(e.join(jreq("h", "")), MemberIDRequired)
	e.advance(10_000)
	e.mustJoin(e.join(jreq("h", j.MemberID)), UnknownMemberID)

	// A member that never syncs is removed at the rebalance timeout.
	e = newEnv(t, testConfig())
	a, ra := e.newMember(jreq("s", ""))
	b, rb := e.newMember(jreq("s", ""))
	e.advance(0)
	ja := e.mustJoin(ra, None)
	e.mustJoin(rb, None)
	leader, other := a, b
	if ja.Leader != a {
		leader, other = b, a
	}
	sr := e.sync(SyncGroupRequest{GroupID: "s", GenerationID: 1, MemberID: leader})
	e.mustSync(sr, None)
	for range 6 {
		e.advance(5000) // to 30 s after the join phase
		e.heartbeat("s", leader, 1)
		e.heartbeat("s", other, 1)
	}
	g = e.group("s")
	if g.State != PreparingRebalance || len(g.Members) != 1 || g.Members[0].MemberID != leader {
		t.Fatalf("after the sync timeout: %+v", g)
	}
}

// TestNewMemberJoinTimeout: a new member's parked join is expired after
// NewMemberJoinTimeoutMs when the rebalance waits for someone else.
func TestNewMemberJoinTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.NewMemberJoinTimeoutMs = 20_000
	e := newEnv(t, cfg)
	ids := e.stableGroup("g", 1)
	// A static member would hold the rebalance; here the old member just
	// keeps heartbeating without rejoining until its rebalance timeout.
	_, rn := e.newMember(jreq("g", ""))
	for range 3 {
		e.advance(5000)
		e.heartbeat("g", ids[0], 1)
	}
	e.advance(4999)
	if e.joinResp(rn) != nil {
		t.Fatal("expired early")
	}
	e.advance(1)
	e.mustJoin(rn, UnknownMemberID)
}

// TestStaticMembership: a static member restarting with a new member id
// replaces the old one without a rebalance; the old id is fenced.
func TestStaticMembership(t *testing.T) {
	e := newEnv(t, testConfig())
	sreq := func(inst, member string, version int16) JoinGroupRequest {
		r := jreq("g", member)
		r.GroupInstanceID, r.Version = ptr(inst), version
		return r
	}
	ra := e.join(sreq("a", "", 9)) // static members need no second round
	rb := e.join(sreq("b", "", 9))
	e.advance(0)
	ja, jb := e.mustJoin(ra, None), e.mustJoin(rb, None)
	leader := ja.Leader
	for _, j := range []*JoinGroupResponse{ja, jb} {
		req := SyncGroupRequest{GroupID: "g", GenerationID: 1, MemberID: j.MemberID}
		if j.MemberID == leader {
			req.Assignments = []SyncAssignment{{ja.MemberID, []byte("A")}, {jb.MemberID, []byte("B")}}
		}
		e.mustSync(e.sync(req), None)
	}
	// b restarts: new member id, same generation, no rebalance.
	e.hold = true
	rb2 := e.join(sreq("b", "", 8))
	if len(e.pending) != 1 || e.joinResp(rb2) != nil {
		t.Fatalf("replacement: %d appends pending, response %+v; want the group record first", len(e.pending), e.joinResp(rb2))
	}
	e.ackAll()
	e.hold = false
	jb2 := e.mustJoin(rb2, None)
	if jb2.MemberID == jb.MemberID || jb2.GenerationID != 1 || e.state("g") != Stable {
		t.Fatalf("replacement: %+v, state %v", jb2, e.state("g"))
	}
	// The old id is fenced; the new one heartbeats and keeps b's assignment.
	r := e.ref()
	e.c.Heartbeat(e.now, r, HeartbeatRequest{GroupID: "g", MemberID: jb.MemberID, GroupInstanceID: ptr("b"), GenerationID: 1})
	e.drain()
	if c := e.resp[r].(*HeartbeatResponse).ErrorCode; c != FencedInstanceID {
		t.Fatalf("old id's heartbeat: %v", c)
	}
	if s := e.mustSync(e.sync(SyncGroupRequest{GroupID: "g", GenerationID: 1, MemberID: jb2.MemberID, GroupInstanceID: ptr("b")}), None); string(s.Assignment) != "B" {
		t.Fatalf("new id's assignment %q", s.Assignment)
	}

	// The leader restarting on v9 is told to skip the assignment.
	la := "a"
	if leader == jb.MemberID {
		la = "b"
	}
	jl := e.mustJoin(e.join(sreq(la, "", 9)), None)
	if !jl.SkipAssignment || jl.Leader != jl.MemberID || len(jl.Members) != 2 {
		t.Fatalf("leader replaced on v9: %+v", jl)
	}

	// A failed append reverts the replacement.
	before := e.group("g")
	e.hold = true
	rf := e.join(sreq("a", "", 9))
	e.fail(NotEnoughReplicas)
	e.hold = false
	if j := e.mustJoin(rf, CoordinatorNotAvailable); j.MemberID != "" {
		t.Fatalf("failed replacement answered %+v", j)
	}
	if after := e.group("g"); after.Members[0].MemberID != before.Members[0].MemberID || after.Members[1].MemberID != before.Members[1].MemberID {
		t.Fatalf("replacement not reverted: %+v, was %+v", after.Members, before.Members)
	}

	// A static member rejoining with protocols the others lack is
	// inconsistent; with protocols that leave the group's choice as it is,
	// it takes over without a rebalance (as in Kafka).
	req := sreq("a", "", 9)
	req.Protocols = []Protocol{{Name: "sticky"}}
	e.mustJoin(e.join(req), InconsistentGroupProtocol) // b does not support it
	req.Protocols = []Protocol{{Name: "sticky"}, {Name: "range", Metadata: consumerMeta("t", "u")}}
	e.mustJoin(e.join(req), None)
	if g := e.group("g"); g.State != Stable || g.Generation != 1 {
		t.Fatalf("%+v, want no rebalance", g)
	}
	// Alone, the same change picks another protocol: a rebalance.
	solo := jreq("h", "")
	solo.GroupInstanceID = ptr("solo")
	rs := e.join(solo)
	e.advance(0)
	js := e.mustJoin(rs, None)
	e.mustSync(e.sync(SyncGroupRequest{GroupID: "h", GenerationID: 1, MemberID: js.MemberID}), None)
	solo.Protocols = []Protocol{{Name: "sticky"}, {Name: "range", Metadata: consumerMeta("t")}}
	if j := e.mustJoin(e.join(solo), None); j.GenerationID != 2 || *j.ProtocolName != "sticky" || j.MemberID == js.MemberID {
		t.Fatalf("static member changing the group's protocol: %+v", j)
	}
}

// TestStaticMemberWaitedFor: a static member that does not rejoin is not
// dropped at the rebalance timeout: the group waits, then expires it with
// its session.
func TestStaticMemberWaitedFor(t *testing.T) {
	e := newEnv(t, testConfig())
	req := jreq("g", "")
	req.GroupInstanceID = ptr("s")
	rs := e.join(req)
	e.advance(0)
	js := e.mustJoin(rs, None)
	e.mustSync(e.sync(SyncGroupRequest{GroupID: "g", GenerationID: 1, MemberID: js.MemberID}), None)
	_, rd := e.newMember(jreq("g", "")) // a dynamic member joins: rebalance
	for e.now < 30_000 {
		e.advance(3000)
		e.heartbeat("g", js.MemberID, 1)
	}
	// The rebalance timed out with only the dynamic member rejoined: it
	// becomes leader of generation 2 with the static member kept.
	j := e.mustJoin(rd, None)
	if j.GenerationID != 2 || len(j.Members) != 2 {
		t.Fatalf("generation 2: %+v", j)
	}
}

// TestLeaveGroup: a batch of members leaves, including a static member by
// instance id alone; strangers get UNKNOWN_MEMBER_ID; the emptied group's
// metadata is written.
func TestLeaveGroup(t *testing.T) {
	e := newEnv(t, testConfig())
	ids := e.stableGroup("g", 3)
	resp := e.leave("g", LeaveMember{MemberID: ids[0]}, LeaveMember{MemberID: "nobody"}, LeaveMember{MemberID: ids[1]})
	if resp.ErrorCode != None || resp.Members[0].ErrorCode != None || resp.Members[1].ErrorCode != UnknownMemberID || resp.Members[2].ErrorCode != None {
		t.Fatalf("leave: %+v", resp)
	}
	// ids[2] alone: the join phase needs only it.
	if e.state("g") != PreparingRebalance {
		t.Fatalf("state %v", e.state("g"))
	}
	e.leave("g", LeaveMember{MemberID: ids[2]})
	g := e.group("g")
	if g.State != Empty || g.Generation != 2 || g.Leader != "" {
		t.Fatalf("emptied group: %+v", g)
	}
	d, _ := DecodeRecord(e.log[len(e.log)-1])
	if d.Metadata == nil || d.Metadata.Generation != 2 || len(d.Metadata.Members) != 0 || d.Metadata.ProtocolType != "consumer" {
		t.Fatalf("emptied group's record: %+v", d.Metadata)
	}
	if r := e.leave("nogroup", LeaveMember{MemberID: ids[0]}); r.ErrorCode != UnknownMemberID {
		t.Fatalf("leave an unknown group: %+v", r)
	}
	// A static member removed by an admin (instance id, no member id).
	req := jreq("h", "")
	req.GroupInstanceID = ptr("s")
	e.join(req)
	e.advance(0)
	if r := e.leave("h", LeaveMember{GroupInstanceID: ptr("s")}, LeaveMember{GroupInstanceID: ptr("x")}); r.Members[0].ErrorCode != None || r.Members[1].ErrorCode != UnknownMemberID {
		t.Fatalf("admin removal: %+v", r)
	}
	if e.state("h") != Empty {
		t.Fatalf("h: %v", e.state("h"))
	}
	// A parked join of a leaving member is answered.
	ks := e.stableGroup("k", 2)
	req = jreq("k", ks[0])
	req.Protocols[0].Metadata = consumerMeta("other")
	rj := e.join(req) // starts a rebalance, parked
	e.leave("k", LeaveMember{MemberID: ks[0]})
	e.mustJoin(rj, UnknownMemberID)
}

// TestSyncWaitsForDurability: the leader's assignment is answered to every
// member only once its record is durable; a failed append sends them back
// to rejoin.
func TestSyncWaitsForDurability(t *testing.T) {
	e := newEnv(t, testConfig())
	a, ra := e.newMember(jreq("g", ""))
	b, rb := e.newMember(jreq("g", ""))
	e.advance(0)
	leader, follower := a, b
	if e.mustJoin(ra, None).Leader != a {
		leader, follower = b, a
	}
	e.mustJoin(rb, None)
	e.hold = true
	rf := e.sync(SyncGroupRequest{GroupID: "g", GenerationID: 1, MemberID: follower})
	rl := e.sync(SyncGroupRequest{GroupID: "g", GenerationID: 1, MemberID: leader,
		Assignments: []SyncAssignment{{leader, []byte("L")}, {follower, []byte("F")}}})
	rl2 := e.sync(SyncGroupRequest{GroupID: "g", GenerationID: 1, MemberID: leader,
		Assignments: []SyncAssignment{{leader, []byte("X")}, {follower, []byte("Y")}}})
	if len(e.pending) != 1 || e.syncResp(rf) != nil || e.syncResp(rl2) != nil {
		t.Fatalf("before durability: %d appends (want one assignment), answers %v %v", len(e.pending), e.syncResp(rf), e.syncResp(rl2))
	}
	e.ack()
	if _, ok := e.resp[rl].(*Superseded); !ok {
		t.Fatalf("retried leader sync: first answered %#v, want Superseded", e.resp[rl])
	}
	if s := e.mustSync(rf, None); string(s.Assignment) != "F" {
		t.Fatalf("follower got %q", s.Assignment)
	}
	e.mustSync(rl2, None)

	// Generation 2, and its assignment fails to append.
	rj := []Ref{e.join(jreq("g", leader)), e.join(jreq("g", follower))}
	e.hold = false
	e.advance(0)
	e.hold = true
	for _, r := range rj {
		e.mustJoin(r, None)
	}
	rf = e.sync(SyncGroupRequest{GroupID: "g", GenerationID: 2, MemberID: follower})
	rl = e.sync(SyncGroupRequest{GroupID: "g", GenerationID: 2, MemberID: leader, Assignments: []SyncAssignment{{leader, []byte("L2")}}})
	e.fail(NotEnoughReplicas)
	e.mustSync(rf, CoordinatorNotAvailable)
	e.mustSync(rl, CoordinatorNotAvailable)
	if e.state("g") != PreparingRebalance {
		t.Fatalf("after a failed assignment: %v", e.state("g"))
	}
}

// TestResponsesWaitForEarlierAppends: an answer that needs no append still
// waits for the appends before it, so it shows nothing a failover loses.
func TestResponsesWaitForEarlierAppends(t *testing.T) {
	e := newEnv(t, testConfig())
	ids := e.stableGroup("g", 1)
	e.hold = true
	rc := e.commit(OffsetCommitRequest{GroupID: "g", GenerationID: 1, MemberID: ids[0],
		Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 1}}}}})
	r := e.ref()
	e.c.Heartbeat(e.now, r, HeartbeatRequest{GroupID: "g", MemberID: ids[0], GenerationID: 1})
	e.drain()
	if _, ok := e.resp[r]; ok {
		t.Fatal("heartbeat answered before the commit before it is durable")
	}
	e.fail(NotLeaderOrFollower)
	if c := e.mustResp(rc).(*OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != NotCoordinator {
		t.Fatalf("failed commit: %v", c)
	}
	if c := e.mustResp(r).(*HeartbeatResponse).ErrorCode; c != None {
		t.Fatalf("heartbeat: %v", c)
	}
}

// TestGroupMaxSize: group.max.size bounds the members.
func TestGroupMaxSize(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSize = 2
	e := newEnv(t, cfg)
	ids := e.stableGroup("g", 2)
	e.mustJoin(e.join(jreq("g", "")), GroupMaxSizeReached)
	req := jreq("g", "")
	req.Version = 3
	e.mustJoin(e.join(req), GroupMaxSizeReached)
	// While it rebalances, the members that rejoined count: a new member
	// fits beside the one that rejoined, and then the other old one does
	// not.
	req = jreq("g", ids[0])
	req.Protocols[0].Metadata = consumerMeta("other")
	r0 := e.join(req)
	id, rn := e.newMember(jreq("g", ""))
	e.mustJoin(e.join(jreq("g", ids[1])), GroupMaxSizeReached)
	e.advance(30_000)
	e.mustJoin(r0, None)
	if j := e.mustJoin(rn, None); j.GenerationID != 2 || j.MemberID != id {
		t.Fatalf("new member: %+v", j)
	}
	if g := e.group("g"); len(g.Members) != 2 {
		t.Fatalf("after the rebalance: %+v", g)
	}
}

// TestLoadingAndUnload: a loading coordinator answers
// COORDINATOR_LOAD_IN_PROGRESS; an unloaded one NOT_COORDINATOR, also to
// the requests it had parked.
func TestLoadingAndUnload(t *testing.T) {
	c, err := New(testConfig(), Deps{Rand: newRand()})
	if err != nil {
		t.Fatal(err)
	}
	c.JoinGroup(0, 1, jreq("g", ""))
	c.Heartbeat(0, 2, HeartbeatRequest{GroupID: "g"})
	rd := c.Ready()
	if rd.Responses[0].Body.(*JoinGroupResponse).ErrorCode != CoordinatorLoadInProgress ||
		rd.Responses[1].Body.(*HeartbeatResponse).ErrorCode != CoordinatorLoadInProgress || rd.TickAtMs != NoTick {
		t.Fatalf("loading: %+v", rd)
	}
	if f := c.OffsetFetch(OffsetFetchRequest{GroupID: "g"}); f.ErrorCode != CoordinatorLoadInProgress {
		t.Fatalf("fetch while loading: %+v", f)
	}

	e := newEnv(t, testConfig())
	e.stableGroup("g", 1)
	_, rj := e.newMember(jreq("g", ""))
	e.hold = true
	rc := e.commit(OffsetCommitRequest{GroupID: "simple", GenerationID: -1,
		Topics: []CommitTopic{{Name: "t", Partitions: []CommitPartition{{Partition: 0, Offset: 1}}}}})
	e.c.Unload()
	e.drain()
	e.mustJoin(rj, NotCoordinator)
	if c := e.mustResp(rc).(*OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != NotCoordinator {
		t.Fatalf("pending commit at unload: %v", c)
	}
	e.mustJoin(e.join(jreq("g", "")), NotCoordinator)
	if l := e.c.ListGroups(ListGroupsRequest{}); l.ErrorCode != NotCoordinator {
		t.Fatalf("list after unload: %+v", l)
	}
	if err := e.c.Replay(0, nil); err != ErrNotLoading {
		t.Fatalf("replay after unload: %v", err)
	}
}
