package group

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// checkInvariants panics-free check of the coordinator's internal
// consistency, for the property tests.
func (c *Coordinator) checkInvariants() error {
	for id, g := range c.groups {
		awaiting, static := 0, 0
		counts := map[string]int{}
		for mid, m := range g.members {
			if m.id != mid {
				return fmt.Errorf("%s: member %s filed under %s", id, m.id, mid)
			}
			if m.join != nil {
				awaiting++
			}
			if m.instanceID != nil {
				static++
				if g.static[*m.instanceID] != mid {
					return fmt.Errorf("%s: instance %s maps to %s, not %s", id, *m.instanceID, g.static[*m.instanceID], mid)
				}
			}
			for _, p := range m.protocols {
				counts[p.Name]++
			}
			if m.sync != nil && g.state != CompletingRebalance {
				return fmt.Errorf("%s: %s has a parked sync in %v", id, mid, g.state)
			}
			if g.pendingJoin[mid] {
				return fmt.Errorf("%s: %s both member and pending", id, mid)
			}
			if (g.state == CompletingRebalance || g.state == Stable) && m.metadata(*g.protocolName) == nil && !slices.ContainsFunc(m.protocols, func(p Protocol) bool { return p.Name == *g.protocolName }) {
				return fmt.Errorf("%s: %s does not support %s", id, mid, *g.protocolName)
			}
		}
		if awaiting != g.awaitingJoin || static != len(g.static) || !maps.Equal(counts, g.protocolCounts) {
			return fmt.Errorf("%s: awaiting %d/%d static %d/%d protocols %v/%v", id, awaiting, g.awaitingJoin, static, len(g.static), counts, g.protocolCounts)
		}
		switch {
		case g.state == Empty && (len(g.members) > 0 || g.leader != ""):
			return fmt.Errorf("%s: Empty with members %d, leader %q", id, len(g.members), g.leader)
		case (g.state == CompletingRebalance || g.state == Stable) && (len(g.members) == 0 || g.protocolName == nil):
			return fmt.Errorf("%s: %v without members or protocol", id, g.state)
		case len(g.members) > 0 && g.members[g.leader] == nil:
			return fmt.Errorf("%s: leader %q is not a member", id, g.leader)
		}
	}
	// Our deletions write the offsets' tombstones with the group's, so no
	// offsets outlive their group (a log of Kafka's could leave some).
	for id := range c.offsets {
		if c.groups[id] == nil {
			return fmt.Errorf("offsets of %s outlive it: %v", id, c.offsets[id])
		}
	}
	inflight := map[string]map[topicPartition]int{}
	for i, b := range c.pending {
		if i > 0 && b.id <= c.pending[i-1].id {
			return fmt.Errorf("appends out of order: %v", c.pendingIDs())
		}
		for _, r := range b.records {
			d, err := DecodeRecord(r)
			if err != nil {
				return err
			}
			if d.Kind == OffsetCommitRecord {
				if inflight[d.Group] == nil {
					inflight[d.Group] = map[topicPartition]int{}
				}
				inflight[d.Group][d.Partition]++
			}
		}
	}
	if !reflect.DeepEqual(inflight, c.inflight) && (len(inflight) > 0 || len(c.inflight) > 0) {
		return fmt.Errorf("in-flight offsets %v, pending appends hold %v", c.inflight, inflight)
	}
	return nil
}

// client is a simulated group member; it sends what it knows, which may be
// stale, and its requests' answers arrive whenever the coordinator gives
// them.
type client struct {
	group    string
	clientID string
	instance *string
	memberID string
	gen      int32
	// members is the leader's member list of gen.
	members []JoinGroupMember
	// synced is the generation it has an assignment of; waiting counts
	// its requests not answered yet.
	synced  int32
	waiting int
}

type refKind uint8

const (
	refJoin refKind = iota
	refSync
	refCommit
	refDelete
	refOffsetDelete
	refOther
)

type sent struct {
	kind   refKind
	client int
	group  string
	member string
	// who is the member's identity in assignments: its instance id if
	// static (a replaced static member keeps its assignment), else its id.
	who string
	gen int32
	// commits are an OffsetCommit's offsets, by partition.
	commits map[topicPartition]int64
}

// sim is the property tests' host: random clients, random time, appends
// that become durable or fail at random, failovers.
type sim struct {
	t   *rapid.T
	cfg Config
	c   *Coordinator
	now int64
	// log is every durable record; pending the appends not yet reported.
	log     []Record
	pending []Append
	nextRef Ref
	sent    map[Ref]sent
	// rand is shared by every coordinator, so member ids never repeat.
	rand    *rand.Rand
	clients []*client
	seq     int64

	// model: the last successful commits (group → partition → offset).
	model map[string]map[topicPartition]int64
	// joined are the (group, member, generation) that got a successful
	// JoinGroup (or came from a loaded record).
	joined map[string]bool
	// syncTag is, per group and generation, the leader request whose
	// assignment members received; maxSyncGen the latest generation a
	// member was given an assignment of (reset when the group is deleted).
	syncTag    map[string]string
	maxSyncGen map[string]int32
	// durableGen is each group's generation in its last durable record,
	// -1 after its tombstone.
	durableGen map[string]int32
	// noEmptyFail: appends holding an empty group's metadata never fail
	// (the replay test; such a failure leaves memory and log apart, as in
	// Kafka).
	noEmptyFail bool
	// stats counts what the run exercised (see TestSimCoverage).
	stats map[string]int
}

var simGroups = []string{"g0", "g1"}

func newSim(t *rapid.T) *sim {
	cfg := Config{
		InitialRebalanceDelayMs: rapid.SampledFrom([]int64{NoInitialRebalanceDelay, 1000, 3000}).Draw(t, "initialDelay"),
		MaxSize:                 rapid.IntRange(1, 5).Draw(t, "maxSize"),
		// No expiry of committed offsets, so the model is exact; empty
		// groups without offsets are still deleted.
		OffsetsRetentionMs:              1 << 50,
		OffsetsRetentionCheckIntervalMs: 20_000,
	}
	s := &sim{
		t: t, cfg: cfg, sent: map[Ref]sent{}, model: map[string]map[topicPartition]int64{},
		joined: map[string]bool{}, syncTag: map[string]string{}, maxSyncGen: map[string]int32{}, durableGen: map[string]int32{},
		rand:  rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1)),
		stats: map[string]int{},
	}
	n := rapid.IntRange(1, 5).Draw(t, "clients")
	for i := range n {
		cl := &client{group: rapid.SampledFrom(simGroups).Draw(t, "group"), clientID: "c" + strconv.Itoa(i), gen: -1, synced: -1}
		if rapid.Bool().Draw(t, "static") {
			cl.instance = ptr("i" + strconv.Itoa(i))
		}
		s.clients = append(s.clients, cl)
	}
	s.start()
	return s
}

// start makes a new coordinator from the durable log (a failover).
func (s *sim) start() {
	c, err := New(s.cfg, Deps{Rand: s.rand})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := c.Load(s.now, s.log); err != nil {
		s.t.Fatal(err)
	}
	s.c = c
	// Loaded members joined their generation before.
	for _, id := range c.GroupIDs() {
		g, _ := c.Group(id)
		for _, m := range g.Members {
			s.joined[joinKeyOf(id, m.MemberID, g.Generation)] = true
		}
	}
	s.drain()
}

func joinKeyOf(g, m string, gen int32) string {
	return g + "\x00" + m + "\x00" + strconv.Itoa(int(gen))
}

func (s *sim) ref(st sent) Ref {
	s.nextRef++
	s.sent[s.nextRef] = st
	return s.nextRef
}

func (s *sim) drain() {
	rd := s.c.Ready()
	s.pending = append(s.pending, rd.Appends...)
	for _, r := range rd.Responses {
		s.handle(r)
	}
}

func (s *sim) ack() {
	a := s.pending[0]
	s.pending = s.pending[1:]
	s.log = append(s.log, a.Records...)
	for _, r := range a.Records {
		d, _ := DecodeRecord(r)
		if d.Kind != GroupMetadataRecord {
			continue
		}
		if d.Metadata == nil {
			s.durableGen[d.Group] = -1
			delete(s.maxSyncGen, d.Group)
			for k := range s.syncTag {
				if strings.HasPrefix(k, d.Group+"\x00") {
					delete(s.syncTag, k)
				}
			}
		} else {
			s.durableGen[d.Group] = d.Metadata.Generation
		}
	}
	s.c.Appended(s.now, a.ID)
	s.drain()
}

func (s *sim) fail() {
	a := s.pending[0]
	if s.noEmptyFail {
		for _, r := range a.Records {
			if d, _ := DecodeRecord(r); d.Metadata != nil && len(d.Metadata.Members) == 0 {
				s.ack()
				return
			}
		}
	}
	s.pending = s.pending[1:]
	s.stats["appendFailed"]++
	s.c.AppendFailed(s.now, a.ID, rapid.SampledFrom([]ErrorCode{NotEnoughReplicas, NotLeaderOrFollower, UnknownTopicOrPartition}).Draw(s.t, "appendErr"))
	s.drain()
}

// handle checks a response and updates the clients and the model.
func (s *sim) handle(r Response) {
	st, ok := s.sent[r.Ref]
	if !ok {
		s.t.Fatalf("response to unknown ref %d: %#v", r.Ref, r.Body)
	}
	delete(s.sent, r.Ref)
	if st.kind == refJoin || st.kind == refSync {
		s.clients[st.client].waiting--
	}
	if _, ok := r.Body.(*Superseded); ok {
		s.stats["superseded"]++
		return
	}
	switch st.kind {
	case refJoin:
		j := r.Body.(*JoinGroupResponse)
		cl := s.clients[st.client]
		switch j.ErrorCode {
		case None:
			s.stats["joined"]++
			s.joined[joinKeyOf(st.group, j.MemberID, j.GenerationID)] = true
			cl.memberID, cl.gen, cl.members = j.MemberID, j.GenerationID, nil
			cl.members = j.Members
		case MemberIDRequired:
			cl.memberID, cl.gen = j.MemberID, -1
		case UnknownMemberID, FencedInstanceID, IllegalGeneration:
			cl.memberID, cl.gen = "", -1
		}
	case refSync:
		sy := r.Body.(*SyncGroupResponse)
		if sy.ErrorCode != None {
			if sy.ErrorCode == UnknownMemberID || sy.ErrorCode == FencedInstanceID {
				s.clients[st.client].memberID = ""
			}
			return
		}
		s.clients[st.client].synced = st.gen
		s.stats["assignment"]++
		if !s.joined[joinKeyOf(st.group, st.member, st.gen)] {
			s.t.Fatalf("%s got an assignment of generation %d of %s, which it did not join", st.member, st.gen, st.group)
		}
		if dg := s.durableGen[st.group]; dg != st.gen {
			s.t.Fatalf("assignment of %s generation %d answered with generation %d durable", st.group, st.gen, dg)
		}
		if max, ok := s.maxSyncGen[st.group]; ok && st.gen < max {
			s.t.Fatalf("assignment of %s generation %d after one of generation %d", st.group, st.gen, max)
		}
		s.maxSyncGen[st.group] = st.gen
		if len(sy.Assignment) > 0 {
			// group|gen|leader request|member
			f := strings.Split(string(sy.Assignment), "|")
			if f[0] != st.group || f[1] != strconv.Itoa(int(st.gen)) || f[3] != st.who {
				s.t.Fatalf("%s of generation %d of %s got assignment %q", st.member, st.gen, st.group, sy.Assignment)
			}
			k := st.group + "\x00" + f[1]
			if tag, ok := s.syncTag[k]; ok && tag != f[2] {
				s.t.Fatalf("generation %d of %s handed out assignments of two leader requests (%s, %s)", st.gen, st.group, tag, f[2])
			}
			s.syncTag[k] = f[2]
		}
	case refCommit:
		for _, t := range r.Body.(*OffsetCommitResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == None {
					s.stats["committed"]++
					tp := topicPartition{Topic: t.Name, Partition: p.Partition}
					if s.model[st.group] == nil {
						s.model[st.group] = map[topicPartition]int64{}
					}
					s.model[st.group][tp] = st.commits[tp]
				}
			}
		}
	case refDelete:
		for _, g := range r.Body.(*DeleteGroupsResponse).Results {
			if g.ErrorCode == None {
				delete(s.model, g.GroupID)
			}
		}
	case refOffsetDelete:
		od := r.Body.(*OffsetDeleteResponse)
		if od.ErrorCode != None {
			return
		}
		for _, t := range od.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == None {
					delete(s.model[st.group], topicPartition{Topic: t.Name, Partition: p.Partition})
				}
			}
		}
	}
}

func (s *sim) protocols(cl *client) []Protocol {
	topics := []string{"t0"}
	if rapid.Bool().Draw(s.t, "twoTopics") {
		topics = append(topics, "t1")
	}
	ps := []Protocol{{Name: "range", Metadata: consumerMeta(topics...)}}
	if rapid.Bool().Draw(s.t, "sticky") {
		ps = append([]Protocol{{Name: "sticky", Metadata: consumerMeta(topics...)}}, ps...)
	}
	return ps
}

// step runs one random action.
func (s *sim) step(failover bool) {
	t := s.t
	cl := s.clients[rapid.IntRange(0, len(s.clients)-1).Draw(t, "client")]
	ci := slices.Index(s.clients, cl)
	op := rapid.IntRange(0, 27).Draw(t, "op") - 14
	if op < 0 {
		// The client's next step in the protocol, as a real one takes it.
		switch {
		case len(s.pending) > 0 && rapid.Bool().Draw(t, "ackFirst"):
			op = 10
		case cl.waiting > 0:
			op = rapid.SampledFrom([]int{4, 9}).Draw(t, "wait")
		case cl.gen < 0:
			op = 0
		case cl.synced < cl.gen:
			op = 2
		default:
			op = rapid.SampledFrom([]int{4, 6, 9}).Draw(t, "next")
		}
	}
	switch op {
	case 0, 1: // join
		member := cl.memberID
		if rapid.IntRange(0, 9).Draw(t, "forgetID") == 0 {
			member = "" // a restart
		}
		req := JoinGroupRequest{
			Version: rapid.SampledFrom([]int16{9, 9, 8, 3}).Draw(t, "version"), GroupID: cl.group, MemberID: member,
			GroupInstanceID: cl.instance, SessionTimeoutMs: int32(rapid.IntRange(10_000, 30_000).Draw(t, "sessionTimeout")),
			RebalanceTimeoutMs: int32(rapid.IntRange(6000, 20_000).Draw(t, "rebalanceTimeout")),
			ProtocolType:       "consumer", Protocols: s.protocols(cl), ClientID: cl.clientID, ClientHost: "/h",
		}
		cl.waiting++
		s.c.JoinGroup(s.now, s.ref(sent{kind: refJoin, client: ci, group: cl.group}), req)
	case 2, 3: // sync
		s.seq++
		req := SyncGroupRequest{GroupID: cl.group, GenerationID: cl.gen, MemberID: cl.memberID, GroupInstanceID: cl.instance}
		for _, m := range cl.members {
			who := m.MemberID
			if m.GroupInstanceID != nil {
				who = *m.GroupInstanceID
			}
			req.Assignments = append(req.Assignments, SyncAssignment{MemberID: m.MemberID,
				Assignment: []byte(fmt.Sprintf("%s|%d|%d|%s", cl.group, cl.gen, s.seq, who))})
		}
		who := cl.memberID
		if cl.instance != nil {
			who = *cl.instance
		}
		cl.waiting++
		s.c.SyncGroup(s.now, s.ref(sent{kind: refSync, client: ci, group: cl.group, member: cl.memberID, who: who, gen: cl.gen}), req)
	case 4: // heartbeat
		gen := cl.gen
		if rapid.IntRange(0, 4).Draw(t, "staleGen") == 0 {
			gen--
		}
		s.c.Heartbeat(s.now, s.ref(sent{kind: refOther}), HeartbeatRequest{GroupID: cl.group, MemberID: cl.memberID, GenerationID: gen, GroupInstanceID: cl.instance})
	case 5: // leave
		lm := LeaveMember{MemberID: cl.memberID, GroupInstanceID: cl.instance}
		if cl.instance != nil && rapid.Bool().Draw(t, "byInstance") {
			lm.MemberID = ""
		}
		s.c.LeaveGroup(s.now, s.ref(sent{kind: refOther}), LeaveGroupRequest{GroupID: cl.group, Members: []LeaveMember{lm}})
	case 6, 7: // commit, as a member or as a simple consumer
		req := OffsetCommitRequest{Version: 8, GroupID: cl.group, GenerationID: cl.gen, MemberID: cl.memberID, GroupInstanceID: cl.instance, RetentionTimeMs: -1}
		if op == 7 {
			req = OffsetCommitRequest{Version: 9, GroupID: rapid.SampledFrom([]string{"simple", cl.group}).Draw(t, "simpleGroup"), GenerationID: -1, RetentionTimeMs: -1}
		}
		st := sent{kind: refCommit, group: req.GroupID, commits: map[topicPartition]int64{}}
		for _, topic := range []string{"t0", "t1", "t2"} {
			if !rapid.Bool().Draw(t, "commitTopic") {
				continue
			}
			ct := CommitTopic{Name: topic}
			for p := range int32(2) {
				if rapid.Bool().Draw(t, "commitPartition") {
					s.seq++
					ct.Partitions = append(ct.Partitions, CommitPartition{Partition: p, Offset: s.seq, LeaderEpoch: -1})
					st.commits[topicPartition{Topic: topic, Partition: p}] = s.seq
				}
			}
			req.Topics = append(req.Topics, ct)
		}
		s.c.OffsetCommit(s.now, s.ref(st), req)
	case 8: // admin
		g := rapid.SampledFrom(append([]string{"simple"}, simGroups...)).Draw(t, "adminGroup")
		if rapid.Bool().Draw(t, "deleteGroup") {
			s.c.DeleteGroups(s.now, s.ref(sent{kind: refDelete}), []string{g})
		} else {
			s.c.OffsetDelete(s.now, s.ref(sent{kind: refOffsetDelete, group: g}), OffsetDeleteRequest{GroupID: g,
				Topics: []FetchTopic{{Name: rapid.SampledFrom([]string{"t0", "t1", "t2"}).Draw(t, "deleteTopic"), Partitions: []int32{0, 1}}}})
		}
	case 9: // time
		if rapid.IntRange(0, 9).Draw(t, "bigStep") == 0 {
			s.now += int64(rapid.IntRange(0, 40_000).Draw(t, "dt"))
		} else {
			s.now += int64(rapid.IntRange(0, 4000).Draw(t, "dt"))
		}
		s.c.Tick(s.now)
	case 10, 11, 12: // an append becomes durable
		if len(s.pending) > 0 {
			s.ack()
		}
	case 13: // an append fails, or a failover
		switch {
		case failover && rapid.IntRange(0, 7).Draw(t, "failover") == 0:
			s.c.Unload()
			s.drain()
			if len(s.sent) > 0 {
				s.t.Fatalf("requests left unanswered at unload: %v", s.sent)
			}
			s.pending = nil
			s.stats["failover"]++
			s.start()
		case len(s.pending) > 0:
			s.fail()
		}
	}
	s.drain()
}

// checkOffsets: OffsetFetch returns exactly the last successful commits.
func (s *sim) checkOffsets() {
	groups := map[string]bool{}
	for g := range s.model {
		groups[g] = true
	}
	for _, g := range s.c.GroupIDs() {
		groups[g] = true
	}
	for g := range groups {
		got := map[topicPartition]int64{}
		for _, t := range s.c.OffsetFetch(OffsetFetchRequest{GroupID: g}).Topics {
			for _, p := range t.Partitions {
				got[topicPartition{Topic: t.Name, Partition: p.Partition}] = p.Offset
			}
		}
		want := s.model[g]
		if len(got) != len(want) || (len(want) > 0 && !maps.Equal(got, want)) {
			s.t.Fatalf("group %s: fetched %v, last successful commits %v", g, got, want)
		}
	}
}

// TestCoordinatorProperty: random members join, sync, heartbeat, leave and
// commit against one coordinator over random time, with appends that are
// durable late or fail, and failovers to a coordinator loaded from the log.
// After every step: the coordinator's invariants hold; a member never gets
// an assignment (SyncGroup success) of a generation it did not join, nor
// before that generation's metadata is durable; a generation's members get
// the assignment of one leader request, and no older generation's
// assignment follows a newer one; OffsetFetch returns the last successful
// commits.
func TestCoordinatorProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := newSim(rt)
		steps := rapid.IntRange(50, 300).Draw(rt, "steps")
		for range steps {
			s.step(true)
			if err := s.c.checkInvariants(); err != nil {
				rt.Fatal(err)
			}
			s.checkOffsets()
		}
	})
}

// observable is what a client or tool can see of a group, plus its
// generation and leader.
type observable struct {
	State        State
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	TimestampMs  int64
	Members      []string
}

func observe(c *Coordinator, id string) observable {
	g, err := c.Group(id)
	if err != nil {
		return observable{State: Dead}
	}
	o := observable{State: g.State, Generation: g.Generation, ProtocolType: g.ProtocolType, Leader: g.Leader, TimestampMs: -2}
	if g.Protocol != nil {
		o.Protocol = *g.Protocol
	}
	if g.State == Empty && g.ProtocolType != "" {
		// When it became Empty (offsets expire from there).
		o.TimestampMs = g.StateTimestampMs
	}
	for _, m := range g.Members {
		inst := ""
		if m.GroupInstanceID != nil {
			inst = *m.GroupInstanceID
		}
		var md []byte
		for _, p := range m.Protocols {
			if p.Name == o.Protocol {
				md = p.Metadata
			}
		}
		o.Members = append(o.Members, fmt.Sprintf("%s/%s/%s/%s timeouts %d %d metadata %x assignment %x",
			m.MemberID, inst, m.ClientID, m.ClientHost, m.SessionTimeoutMs, m.RebalanceTimeoutMs, md, m.Assignment))
	}
	return o
}

// TestReplay: after any sequence of operations, a coordinator loaded from
// the durable records shows the same committed offsets and the same
// groups: Empty and Stable groups exactly (generation, protocol, leader,
// members, metadata, assignments, when they became Empty); a group in the
// middle of a rebalance as a generation it had. Then, with everyone gone
// quiet until every session expired, the two agree on every group.
func TestReplay(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := newSim(rt)
		s.noEmptyFail = true
		steps := rapid.IntRange(50, 300).Draw(rt, "steps")
		for range steps {
			s.step(false)
		}
		compare := func(stage string, all bool) {
			for len(s.pending) > 0 {
				s.ack()
			}
			s.checkOffsets()
			loaded, err := New(s.cfg, Deps{Rand: newRand()})
			if err != nil {
				rt.Fatal(err)
			}
			if err := loaded.Load(s.now, s.log); err != nil {
				rt.Fatal(err)
			}
			if got, want := loaded.GroupIDs(), s.c.GroupIDs(); !slices.Equal(got, want) {
				rt.Fatalf("%s: loaded groups %v, live %v", stage, got, want)
			}
			for _, id := range s.c.GroupIDs() {
				if got, want := loaded.OffsetFetch(OffsetFetchRequest{GroupID: id}), s.c.OffsetFetch(OffsetFetchRequest{GroupID: id}); !reflect.DeepEqual(got, want) {
					rt.Fatalf("%s: group %s loaded offsets %+v, live %+v", stage, id, got, want)
				}
				live, ld := observe(s.c, id), observe(loaded, id)
				if live.State == Stable && len(live.Members) > s.c.cfg.MaxSize {
					// Over group.max.size (static members that did not
					// rejoin stay): Kafka rebalances such a group when
					// it loads it.
					live.State = PreparingRebalance
				}
				switch {
				case all || live.State == Empty || live.State == Stable:
					if !reflect.DeepEqual(live, ld) {
						rt.Fatalf("%s: group %s\nloaded %+v\n  live %+v", stage, id, ld, live)
					}
				case ld.Generation > live.Generation:
					rt.Fatalf("%s: group %s loaded generation %d, live %d", stage, id, ld.Generation, live.Generation)
				}
			}
		}
		compare("after the operations", false)
		// Silence: every session and rebalance ends.
		for range 10 {
			s.now += 40_000
			s.c.Tick(s.now)
			s.drain()
			for len(s.pending) > 0 {
				s.ack()
			}
		}
		compare("after every session expired", true)
	})
}

// TestSimCoverage keeps the properties above from passing vacuously: over
// many runs, the simulated members do get assignments and commit, appends
// fail, coordinators fail over, and groups end in every live state.
func TestSimCoverage(t *testing.T) {
	total := map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		s := newSim(rt)
		for range rapid.IntRange(50, 300).Draw(rt, "steps") {
			s.step(true)
		}
		for k, v := range s.stats {
			total[k] += v
		}
		for _, id := range s.c.GroupIDs() {
			g, _ := s.c.Group(id)
			total[g.State.String()]++
		}
	})
	for _, k := range []string{"assignment", "joined", "committed", "appendFailed", "failover", "superseded", "Empty", "PreparingRebalance", "CompletingRebalance", "Stable"} {
		if total[k] < 5 {
			t.Errorf("%s happened %d times in the runs: %v", k, total[k], total)
		}
	}
	t.Logf("exercised: %v", total)
}
