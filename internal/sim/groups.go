package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/coord"
	"github.com/twinlog/twinlog/broker/kafka"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/errcode"
	"github.com/twinlog/twinlog/group"
	"github.com/twinlog/twinlog/metadata"
)

// Consumer groups in the simulator (issue 16; Config.Groups): every broker
// hosts the shipped group coordinators (broker/coord.Host, each shard a
// group.Coordinator) over simGroupsEnv, as broker/groups.go hosts them
// over the broker; __consumer_offsets is created by the host's own
// FindCoordinator path (EnsureInternalTopic to the controller), hosted
// and replicated like any partition, and written by acks=all appends
// through the coordinator's own partition. Members of Config.Groups
// groups consume topic t: they find the coordinator through a random
// broker, join, sync (the leader assigns round-robin), fetch their
// committed offsets and commit their positions in their generation while
// heartbeating, over the lossy network; now and then one restarts
// without leaving (its session expires) or leaves. A member does not
// read the records over the network, but its position only moves over
// records the partition's leader holds below its HW on the member's
// cluster (consume: the simulator's omniscient view of a consumer's
// fetch), and each commit carries the leader epoch of the record before
// the position (the last one consumed, as Kafka clients commit it; -1
// at position 0), so a failback's truncation can leave a commit in
// truncated history for the offset sync's truncation pass.
//
// The check ("a committed offset never goes backwards unless a truncation
// or reset explains it"): every commit a coordinator acknowledged is the
// group's offset from then on, so every later OffsetFetch answer, and
// every later acknowledged commit, is at least the highest acknowledged
// so far, unless a truncation recorded on the coordinator's partition
// since the acknowledgement (an unclean election), or lossy unclean
// shutdowns of at least min.insync.replicas of its replicas, explain the
// loss, or the answer came from a coordinator in an older leader epoch
// than the one that acknowledged (a deposed leader still serving from
// memory, as a Kafka coordinator can until it learns of its successor;
// counted in GroupReport.StaleReads). The sim has no offset resets. After
// healing, each group's coordinator is asked once more (the final check).

// GroupReport is what the groups of a run did.
type GroupReport struct {
	Joins, Syncs, Commits, CommitAcks, Fetches int
	// Rebalances are generations completed (JoinGroup answers to leaders).
	Rebalances int
	// Restarts are members that started again without leaving; Leaves
	// those that left.
	Restarts, Leaves int
	// Excused counts answers below an acknowledged commit that a recorded
	// truncation or lossy shutdowns explain; StaleReads those answered by
	// a coordinator in an older leader epoch.
	Excused, StaleReads int
	// FinalChecked counts groups checked after healing.
	FinalChecked int
	// SyncAcks counts the offset sync's commits acknowledged here; Resets
	// the answers below an acknowledged commit that a later sync commit
	// explains (its acknowledgement lost).
	SyncAcks, Resets int
	// TruncationMoves counts the offset sync's commits out of truncated
	// history (controller fixTruncated) acknowledged here, of which
	// TruncationMovesBack went below the group's acknowledged offset (each
	// explained by a recorded truncation: checkTruncationMove).
	TruncationMoves, TruncationMovesBack int
}

// groupRequestTimeoutMs bounds a member's wait for one answer (a
// JoinGroup waits for its rebalance: longer).
const (
	groupRequestTimeoutMs = 1000
	groupJoinTimeoutMs    = groupRebalanceTimeoutMs + 1000
	groupSessionTimeoutMs = 1000
	// groupRebalanceTimeoutMs is the members' rebalance timeout.
	groupRebalanceTimeoutMs = 2000
	groupHeartbeatMs        = 250
)

// groupsConfig is the coordinators' configuration in the simulator:
// Kafka's, with its delays and session floor scaled to simulated time.
func groupsConfig() group.Config {
	return group.Config{InitialRebalanceDelayMs: 100, MinSessionTimeoutMs: 200}
}

// simGroups is one broker incarnation's coordinator host.
type simGroups struct {
	b    *simBroker
	inc  int
	host *coord.Host
	// closed: the incarnation ended (crash or stop); nothing of it runs
	// or answers any more.
	closed bool
}

func (g *simGroups) live() bool { return !g.closed && g.b.up && g.b.inc == g.inc }

// startGroups creates and starts b's coordinator host for this
// incarnation (broker.go's Start).
func (b *simBroker) startGroups() {
	s := b.s
	if s.cfg.Groups <= 0 {
		return
	}
	g := &simGroups{b: b, inc: b.inc}
	rng := rand.New(rand.NewPCG(s.rng.Uint64(), uint64(b.id)))
	h, err := coord.New(coord.Config{Group: groupsConfig(), ReconcileInterval: 2 * time.Duration(s.cfg.ReplicaTickMs) * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Rand: func() group.Rand { return rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())) }}, simGroupsEnv{g})
	if err != nil {
		s.fail("setup", "group coordinator: %v", err)
		return
	}
	g.host = h
	b.groups = g
	h.Start()
}

// stopGroups ends the incarnation's host: a clean stop answers what its
// coordinators parked (NOT_COORDINATOR, as broker.Close does); a crash
// answers nothing.
func (b *simBroker) stopGroups(clean bool) {
	g := b.groups
	if g == nil {
		return
	}
	b.groups = nil
	if !clean {
		g.closed = true
	}
	g.host.Close()
	g.closed = true
}

// simGroupsEnv is coord.Env over a simulated broker incarnation.
type simGroupsEnv struct{ g *simGroups }

var _ coord.Env = simGroupsEnv{}

func (e simGroupsEnv) NowMs() int64 { return e.g.b.s.clock().UnixMilli() }

func (e simGroupsEnv) AfterFunc(d time.Duration, f func()) (stop func()) {
	stopped := false
	e.g.b.s.after(d.Milliseconds(), func() {
		if !stopped && e.g.live() {
			f()
		}
	})
	return func() { stopped = true }
}

func (e simGroupsEnv) Go(f func(ctx context.Context)) {
	e.g.b.s.after(0, func() {
		if e.g.live() {
			f(context.Background())
		}
	})
}

func (e simGroupsEnv) Partitions() (int32, bool) { return coord.PartitionsIn(e.g.b.image) }

// leader is b's replica of __consumer_offsets partition sp when it leads
// it (in epoch, unless epoch is -1).
func (e simGroupsEnv) leader(sp, epoch int32) *simPart {
	b := e.g.b
	if !e.g.live() {
		return nil
	}
	p := b.parts[offsetsTP(sp)]
	if p == nil || p.r.Role() != replica.RoleLeader || (epoch >= 0 && int32(p.r.LeaderEpoch()) != epoch) {
		return nil
	}
	return p
}

func offsetsTP(sp int32) twinlog.TopicPartition {
	return twinlog.TopicPartition{Topic: metadata.ConsumerOffsetsTopic, Partition: sp}
}

func (e simGroupsEnv) Leads(sp int32) (int32, bool) {
	p := e.leader(sp, -1)
	if p == nil {
		return 0, false
	}
	return int32(p.r.LeaderEpoch()), true
}

func (e simGroupsEnv) Read(sp, epoch int32, from int64) ([]group.Record, int64, bool, error) {
	p := e.leader(sp, epoch)
	if p == nil {
		return nil, 0, false, fmt.Errorf("%s: not its leader in epoch %d", offsetsTP(sp), epoch)
	}
	return coord.ReadLog(p.log, from, p.r.HighWatermark(), p.r.LogEndOffset(), 1+e.g.b.s.rng.IntN(4096))
}

// Append proposes the batch to the partition's leader replica with
// acks=all (the broker's producePartition); the outcome comes from the
// replica's Ready (or its timeout, or the incarnation's end), never
// before Append returns.
func (e simGroupsEnv) Append(sp, epoch int32, recs []group.Record, done func(group.ErrorCode)) group.ErrorCode {
	b, s := e.g.b, e.g.b.s
	refuse := func(c pb.ErrorCode) group.ErrorCode { return group.ErrorCode(errcode.Of(c).Kafka) }
	p := e.leader(sp, epoch)
	if p == nil {
		return refuse(pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER)
	}
	batch, err := coord.EncodeAppend(e.NowMs(), recs)
	if err != nil {
		return refuse(pb.ErrorCode_ERROR_CODE_INVALID_RECORD)
	}
	inAppend := true
	var early *pb.ErrorCode
	proposed := b.handleProduce(p.tp, replica.AcksAll, batch, make([]string, len(recs)), s.cfg.ProduceTimeoutMs, func(code pb.ErrorCode, base int64, _ int32) {
		s.tracef("broker %d coordinator append %s at %d: %s", b.id, p.key, base, shortCode(code))
		if inAppend {
			early = &code
			return
		}
		done(refuse(code))
	})
	inAppend = false
	switch {
	case !proposed && early != nil:
		return refuse(*early)
	case !proposed:
		return refuse(pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER)
	case early != nil:
		code := *early
		s.after(0, func() { done(refuse(code)) })
	}
	return group.None
}

func (e simGroupsEnv) Coordinator(sp int32) (kafka.Coordinator, bool) {
	return coord.CoordinatorIn(e.g.b.image, sp)
}

// errCreating: the simulated broker has asked the controller for
// __consumer_offsets (the answer comes later, over the network).
var errCreating = errors.New("asked the controller to create it")

// CreateTopic sends EnsureInternalTopic to the controller (the broker's
// call, not awaited: the simulator cannot block) and reports that the
// topic is not there yet; FindCoordinator answers
// COORDINATOR_NOT_AVAILABLE and the member asks again.
func (e simGroupsEnv) CreateTopic(context.Context) error {
	b := e.g.b
	req := &pb.EnsureInternalTopicRequest{BrokerId: b.id, BrokerEpoch: b.epoch, Topic: metadata.ConsumerOffsetsTopic}
	askController(b, "ensure-internal-topic", "ensure-internal-topic-resp", b.s.cfg.RPCTimeoutMs, func(c *controller) *pb.EnsureInternalTopicResponse {
		return rpc(c, fmt.Sprintf("ensure __consumer_offsets %d", b.id), false, brokerCaller(b.s, b.id, pb.ControllerService_EnsureInternalTopic_FullMethodName), c.svc.EnsureInternalTopic, req)
	}, func(resp *pb.EnsureInternalTopicResponse, err error) {
		b.s.tracef("broker %d ensure __consumer_offsets: %v %v", b.id, resp.GetError(), err)
	})
	return errCreating
}

func (e simGroupsEnv) PartitionExists(topic string, partition int32) bool {
	return e.g.b.image.Partition(topic, partition) != nil
}

// ---- members ----

type memberState int

const (
	memberFind memberState = iota
	memberJoin
	memberSync
	memberFetch
	memberStable
	memberGone // left; comes back later
)

var memberStateNames = [...]string{"find", "join", "sync", "fetch", "stable", "gone"}

// simGroup is one consumer group of topic t.
type simGroup struct {
	id      string
	members []*member
	// acked is, per partition of t, the highest commit a coordinator
	// acknowledged (or the offset sync's last, a reset); sent the highest
	// offset any commit carried (what a coordinator can hold at most).
	acked map[int32]commitAck
	sent  map[int32]int64
	// resets are the offset sync's commits that reached a coordinator
	// here (offsetsync.go), acknowledged or not.
	resets map[int32][]commitAck
}

// commitAck is an acknowledged commit and where it was made.
type commitAck struct {
	offset int64
	epoch  int32  // the commit's leader epoch (of the record before offset)
	seq    uint64 // History position at the acknowledgement
	n      uint64 // order among the cluster's acknowledgements and resets
	cp     int32  // the coordinator's __consumer_offsets partition
	le     int32  // its leader epoch at the coordinator that answered
	m      int    // min.insync.replicas of __consumer_offsets then
	// value is the record the commit names (the one at offset-1, the
	// last consumed) as the member read it from its leader; "" unknown
	// (the offset sync's commits, a position resumed from an unknown
	// commit).
	value string
}

// member is one consumer of a group, one request in flight at a time.
type member struct {
	s     *Sim
	g     *simGroup
	idx   int
	name  string
	state memberState

	coordinator int32 // broker id
	memberID    string
	generation  int32
	leader      bool
	// pendingAssign is the leader's assignment for its SyncGroup.
	pendingAssign []group.SyncAssignment
	assigned      []int32
	// stable: the member looks for a new coordinator from Stable (it
	// resumes heartbeating in its generation there).
	stable bool
	// pos is the position on each assigned partition; epoch the leader
	// epoch of the record before it (the last consumed; -1 unknown).
	pos   map[int32]int64
	epoch map[int32]int32
	// named is the value of the record before the position ("" unknown):
	// what a commit of it names (offsetsync.go's checkLeftInTruncated).
	named map[int32]string

	// main carries FindCoordinator, JoinGroup, SyncGroup and
	// OffsetFetch; heartbeats and commits have their own lines, as a
	// Kafka client's heartbeat thread and asynchronous commits do.
	main, hb, commits slot
	nextHB            int64
	nextCommit        int64
	backAt            int64 // a member that left comes back then
}

// slot is one of a member's request lines: one request in flight each.
type slot struct {
	inflight bool
	req      int // id of the request in flight; answers of others are ignored
}

func (m *member) node() nodeID { return clientBase + 900 + nodeID(m.idx) }

func (m *member) tracef(format string, args ...any) {
	m.s.tracef("member %s: %s", m.name, fmt.Sprintf(format, args...))
}

// setupGroups creates Config.Groups groups of 2–3 members.
func (s *Sim) setupGroups() {
	idx := 0
	for gi := range s.cfg.Groups {
		g := &simGroup{id: "g" + strconv.Itoa(gi), acked: map[int32]commitAck{}, sent: map[int32]int64{}, resets: map[int32][]commitAck{}}
		for range 2 + s.rng.IntN(2) {
			m := &member{s: s, g: g, idx: idx, name: fmt.Sprintf("%s.%d", g.id, len(g.members)), pos: map[int32]int64{}, epoch: map[int32]int32{}, named: map[int32]string{}}
			g.members = append(g.members, m)
			idx++
		}
		s.groups = append(s.groups, g)
	}
}

// groupClients runs each member's next step now and then.
func (s *Sim) groupClients() {
	for _, g := range s.groups {
		for _, m := range g.members {
			if s.chance(0.3) {
				m.act()
			}
		}
	}
}

// ask sends one request of m's to broker to: serve runs there on the
// incarnation the message reaches (its coordinator host) and answers
// through reply, which the network carries back to done. No answer within
// timeoutMs (a dropped message, a crashed broker, a superseded request)
// ends the request; the member goes on from its state.
func ask[T any](m *member, sl *slot, to int32, kind string, timeoutMs int64, serve func(g *simGroups, reply func(T)), done func(T)) {
	s := m.s
	b := s.brokers[to-1]
	sl.req++
	id := sl.req
	sl.inflight = true
	back := s.once(timeoutMs, func() {
		if sl.req == id {
			sl.inflight = false
			m.tracef("%s to broker %d: no answer", kind, to)
		}
	})
	s.net.send(m.node(), b.node(), kind, func() {
		g := b.groups
		if g == nil || !g.live() {
			return
		}
		serve(g, func(t T) {
			if !g.live() {
				return
			}
			s.net.send(b.node(), m.node(), kind+"-resp", func() {
				back(func() {
					if sl.req == id {
						sl.inflight = false
						done(t)
					}
				})
			})
		})
	})
}

// coordinatorEpoch is the leader epoch in which b's replica leads the
// __consumer_offsets partition of group id (-1 if it does not).
func (g *simGroups) coordinatorEpoch(id string) (int32, int32) {
	n, ok := coord.PartitionsIn(g.b.image)
	if !ok {
		return -1, -1
	}
	cp := group.PartitionFor(id, n)
	if le, ok := (simGroupsEnv{g}).Leads(cp); ok {
		return cp, le
	}
	return cp, -1
}

// answered is a coordinator's answer with where it came from.
type answered[T any] struct {
	resp T
	cp   int32
	le   int32
}

func serveStart[T any](id string, start func(h *coord.Host, done func(T, error)) func()) func(g *simGroups, reply func(answered[T])) {
	return func(g *simGroups, reply func(answered[T])) {
		s := g.b.s
		start(g.host, func(t T, err error) {
			if err != nil {
				s.fail("group coordinator", "broker %d: %v", g.b.id, err)
				return
			}
			cp, le := g.coordinatorEpoch(id)
			reply(answered[T]{t, cp, le})
		})
	}
}

// act is the member's next step.
func (m *member) act() {
	s := m.s
	if s.w != nil && s.w.groupsOn != s {
		return // its cluster is not the writable one (offsetsync.go)
	}
	switch m.state {
	case memberGone:
		if s.now >= m.backAt && s.producing {
			m.state = memberFind
		}
		return
	case memberStable:
		if !s.producing {
			return // healing: members stop
		}
		if s.chance(0.0005) {
			m.restart()
			return
		}
		if s.chance(0.0003) {
			m.leave()
			return
		}
	}
	if m.state == memberStable {
		if !m.hb.inflight && s.now >= m.nextHB {
			m.heartbeat()
		}
		if !m.commits.inflight && s.now >= m.nextCommit && len(m.assigned) > 0 {
			m.commit()
		}
		return
	}
	if m.main.inflight {
		return
	}
	switch m.state {
	case memberFind:
		to := int32(1 + s.rng.IntN(len(s.brokers)))
		ask(m, &m.main, to, "find-coordinator", groupRequestTimeoutMs, func(g *simGroups, reply func(kafka.Coordinator)) {
			c, err := g.host.FindCoordinator(context.Background(), 0, m.g.id)
			if err != nil {
				s.fail("group coordinator", "FindCoordinator on broker %d: %v", g.b.id, err)
				return
			}
			reply(c)
		}, func(c kafka.Coordinator) {
			if c.ErrorCode != group.None {
				m.tracef("find: %v %s", c.ErrorCode, c.Message)
				return
			}
			m.coordinator = c.NodeID
			// A member of a generation goes on heartbeating with the new
			// coordinator (which loaded the group), as Kafka clients do.
			m.state = memberJoin
			if m.stable {
				m.state = memberStable
			}
		})
	case memberJoin:
		m.join()
	case memberSync:
		m.sync()
	case memberFetch:
		m.fetch()
	}
}

// rejoin sends the member back to JoinGroup (a new member id when it is
// unknown), or to FindCoordinator when the coordinator moved.
func (m *member) rejoin(code group.ErrorCode) {
	m.stable = false
	switch code {
	case group.UnknownMemberID, group.FencedInstanceID:
		m.memberID = ""
		m.state = memberJoin
	case group.NotCoordinator, group.CoordinatorNotAvailable, group.RequestTimedOut, group.NetworkException:
		m.stable = m.state == memberStable
		m.state = memberFind
		return
	case group.CoordinatorLoadInProgress:
		// the same coordinator, again
	case group.RebalanceInProgress, group.IllegalGeneration:
		m.state = memberJoin
	default:
		m.s.fail("group member", "%s: unexpected %v in state %s", m.name, code, memberStateNames[m.state])
	}
}

func (m *member) join() {
	s := m.s
	meta := (&kmsg.ConsumerMemberMetadata{Topics: []string{"t"}}).AppendTo(nil)
	req := group.JoinGroupRequest{Version: 9, GroupID: m.g.id, SessionTimeoutMs: groupSessionTimeoutMs, RebalanceTimeoutMs: groupRebalanceTimeoutMs,
		MemberID: m.memberID, ProtocolType: "consumer", Protocols: []group.Protocol{{Name: "roundrobin", Metadata: meta}},
		ClientID: m.name, ClientHost: "/sim"}
	ask(m, &m.main, m.coordinator, "join-group", groupJoinTimeoutMs, serveStart(m.g.id, func(h *coord.Host, done func(*group.JoinGroupResponse, error)) func() {
		return h.StartJoinGroup(req, done)
	}), func(a answered[*group.JoinGroupResponse]) {
		r := a.resp
		if r == nil {
			return
		}
		s.report.Groups.Joins++
		switch r.ErrorCode {
		case group.None:
			m.memberID, m.generation, m.leader = r.MemberID, r.GenerationID, r.Leader == r.MemberID
			m.state = memberSync
			m.tracef("joined generation %d as %s (leader %t, %d members)", r.GenerationID, r.MemberID, m.leader, len(r.Members))
			if m.leader {
				s.report.Groups.Rebalances++
				m.assign(r.Members)
			}
		case group.MemberIDRequired:
			m.memberID = r.MemberID
		default:
			m.tracef("join: %v", r.ErrorCode)
			m.rejoin(r.ErrorCode)
		}
	})
}

// assign is the leader's round-robin assignment of t's partitions to the
// members, kept for its SyncGroup.
func (m *member) assign(members []group.JoinGroupMember) {
	m.pendingAssign = nil
	parts := len(m.s.topics)
	for i, mm := range members {
		var ps []int32
		for p := i; p < parts; p += len(members) {
			ps = append(ps, int32(p))
		}
		a := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: ps}}}
		m.pendingAssign = append(m.pendingAssign, group.SyncAssignment{MemberID: mm.MemberID, Assignment: a.AppendTo(nil)})
	}
}

func (m *member) sync() {
	s := m.s
	req := group.SyncGroupRequest{GroupID: m.g.id, GenerationID: m.generation, MemberID: m.memberID}
	if m.leader {
		req.Assignments = m.pendingAssign
	}
	ask(m, &m.main, m.coordinator, "sync-group", groupJoinTimeoutMs, serveStart(m.g.id, func(h *coord.Host, done func(*group.SyncGroupResponse, error)) func() {
		return h.StartSyncGroup(req, done)
	}), func(a answered[*group.SyncGroupResponse]) {
		r := a.resp
		if r == nil {
			return
		}
		if r.ErrorCode != group.None {
			m.tracef("sync: %v", r.ErrorCode)
			m.rejoin(r.ErrorCode)
			return
		}
		s.report.Groups.Syncs++
		var as kmsg.ConsumerMemberAssignment
		if len(r.Assignment) > 0 {
			if err := as.ReadFrom(r.Assignment); err != nil {
				s.fail("group member", "%s: assignment: %v", m.name, err)
				return
			}
		}
		m.assigned = nil
		for _, t := range as.Topics {
			m.assigned = append(m.assigned, t.Partitions...)
		}
		slices.Sort(m.assigned)
		m.tracef("generation %d: assigned %v", m.generation, m.assigned)
		m.state = memberFetch
	})
}

// fetch reads the group's committed offsets of the assigned partitions
// and checks them against the acknowledged commits known when it asked.
func (m *member) fetch() {
	s := m.s
	if len(m.assigned) == 0 {
		m.state, m.nextHB = memberStable, s.now+groupHeartbeatMs
		return
	}
	before := maps.Clone(m.g.acked)
	req := group.OffsetFetchRequest{GroupID: m.g.id, Topics: []group.FetchTopic{{Name: "t", Partitions: m.assigned}}}
	ask(m, &m.main, m.coordinator, "offset-fetch", groupRequestTimeoutMs, func(g *simGroups, reply func(answered[*group.OffsetFetchResponse])) {
		r, err := g.host.OffsetFetch(context.Background(), req)
		if err != nil {
			s.fail("group coordinator", "OffsetFetch on broker %d: %v", g.b.id, err)
			return
		}
		cp, le := g.coordinatorEpoch(m.g.id)
		reply(answered[*group.OffsetFetchResponse]{r, cp, le})
	}, func(a answered[*group.OffsetFetchResponse]) {
		r := a.resp
		if r.ErrorCode != group.None {
			m.tracef("offset fetch: %v", r.ErrorCode)
			m.rejoin(r.ErrorCode)
			return
		}
		s.report.Groups.Fetches++
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != group.None {
					m.tracef("offset fetch t-%d: %v", p.Partition, p.ErrorCode)
					return
				}
				s.checkCommitted(m.g, p.Partition, p.Offset, before, a.le, "OffsetFetch by "+m.name)
				// A Kafka client resumes at the committed offset with its
				// committed leader epoch.
				m.pos[p.Partition], m.epoch[p.Partition], m.named[p.Partition] = max(p.Offset, 0), -1, ""
				if p.Offset > 0 {
					m.epoch[p.Partition] = p.LeaderEpoch
					if a, ok := m.g.acked[p.Partition]; ok && a.offset == p.Offset && a.epoch == p.LeaderEpoch {
						m.named[p.Partition] = a.value
					}
				}
			}
		}
		m.tracef("generation %d: resumes at %v", m.generation, m.positions())
		m.state, m.nextHB, m.nextCommit = memberStable, s.now+groupHeartbeatMs, s.now+int64(s.rng.IntN(200))
	})
}

func (m *member) positions() []string {
	out := make([]string, 0, len(m.assigned))
	for _, p := range m.assigned {
		out = append(out, fmt.Sprintf("%d@%d(LE %d)", p, m.pos[p], m.epochOf(p)))
	}
	return out
}

// epochOf is the leader epoch a commit of partition p's position carries.
func (m *member) epochOf(p int32) int32 {
	if e, ok := m.epoch[p]; ok && m.pos[p] > 0 {
		return e
	}
	return -1
}

// consume moves the position on partition p over up to 64 records the
// partition's leader on the member's cluster holds below its HW (none if
// no leader answers or the position is at or above the HW), and keeps
// the leader epoch of the last record passed from the leader's epoch
// cache: what a consumer's fetch from the leader (the controller's, in
// its LE) would give it.
func (m *member) consume(p int32) {
	s := m.s
	n := 1 + int64(s.rng.IntN(64))
	lp := s.leaderPart(twinlog.TopicPartition{Topic: "t", Partition: p})
	if lp == nil {
		return
	}
	hw, pos := int64(lp.r.HighWatermark()), m.pos[p]
	if pos >= hw {
		return
	}
	next := min(pos+n, hw)
	m.pos[p], m.epoch[p] = next, int32(lp.log.Epochs().EpochForOffset(twinlog.Offset(next-1)))
	rec, _ := lp.shadow.at(next - 1)
	m.named[p] = rec.value
}

// current reports whether the member is still Stable in generation
// gen: an answer to an earlier generation's request changes nothing.
func (m *member) current(gen int32) bool { return m.state == memberStable && m.generation == gen }

func (m *member) heartbeat() {
	req := group.HeartbeatRequest{GroupID: m.g.id, GenerationID: m.generation, MemberID: m.memberID}
	ask(m, &m.hb, m.coordinator, "heartbeat", groupRequestTimeoutMs, serveStart(m.g.id, func(h *coord.Host, done func(*group.HeartbeatResponse, error)) func() {
		return h.StartHeartbeat(req, done)
	}), func(a answered[*group.HeartbeatResponse]) {
		if a.resp == nil || !m.current(req.GenerationID) {
			return
		}
		m.nextHB = m.s.now + groupHeartbeatMs
		code := a.resp.ErrorCode
		if code == group.None {
			return
		}
		m.tracef("heartbeat: %v", code)
		if code == group.RebalanceInProgress && !m.commits.inflight && len(m.assigned) > 0 {
			// Commit on revoke, in the generation ending, while the
			// JoinGroup goes out (a cooperative client's async commit).
			m.commit()
		}
		m.rejoin(code)
	})
}

// commit consumes on each assigned partition and commits the positions,
// with the leader epochs of their last records, in the member's
// generation.
func (m *member) commit() {
	s := m.s
	parts := make([]group.CommitPartition, len(m.assigned))
	named := make([]string, len(m.assigned))
	for i, p := range m.assigned {
		m.consume(p)
		parts[i] = group.CommitPartition{Partition: p, Offset: m.pos[p], LeaderEpoch: m.epochOf(p)}
		if m.pos[p] > 0 {
			named[i] = m.named[p]
		}
		m.g.sent[p] = max(m.g.sent[p], m.pos[p])
	}
	req := group.OffsetCommitRequest{Version: 8, GroupID: m.g.id, GenerationID: m.generation, MemberID: m.memberID, RetentionTimeMs: -1,
		Topics: []group.CommitTopic{{Name: "t", Partitions: parts}}}
	s.report.Groups.Commits++
	serve := serveStart(m.g.id, func(h *coord.Host, done func(*group.OffsetCommitResponse, error)) func() {
		return h.StartOffsetCommit(req, done)
	})
	ask(m, &m.commits, m.coordinator, "offset-commit", groupRequestTimeoutMs, func(g *simGroups, reply func(answered[*group.OffsetCommitResponse])) {
		serve(g, func(a answered[*group.OffsetCommitResponse]) {
			// The coordinator's answer is the acknowledgement: the commit
			// is durable and ordered from here, whether or not (and
			// however late) the answer reaches the member.
			if a.resp == nil {
				s.fail("group coordinator", "broker %d: a commit answered as superseded", g.b.id)
				return
			}
			for _, t := range a.resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode == group.None {
						i := slices.IndexFunc(parts, func(c group.CommitPartition) bool { return c.Partition == p.Partition })
						s.ackCommit(m.g, p.Partition, parts[i].Offset, parts[i].LeaderEpoch, named[i], a.cp, a.le, m.name)
					}
				}
			}
			reply(a)
		})
	}, func(a answered[*group.OffsetCommitResponse]) {
		m.nextCommit = s.now + 50 + int64(s.rng.IntN(250))
		var failed group.ErrorCode
		for _, t := range a.resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != group.None {
					failed = p.ErrorCode
				}
			}
		}
		if failed != group.None && m.current(req.GenerationID) {
			m.tracef("commit: %v", failed)
			m.rejoin(failed)
		}
	})
}

// restart is a member process that starts again: its old member id is
// forgotten (the coordinator expires it after its session).
func (m *member) restart() {
	m.s.report.Groups.Restarts++
	m.tracef("restarts (old member %s)", m.memberID)
	m.memberID, m.assigned, m.state = "", nil, memberFind
	m.forgetPositions()
}

// forgetPositions drops what the member consumed: a new member instance
// resumes from the group's committed offsets.
func (m *member) forgetPositions() {
	clear(m.pos)
	clear(m.epoch)
	clear(m.named)
}

// leave sends LeaveGroup (its answer is not awaited beyond the request's
// timeout) and stays away for a while.
func (m *member) leave() {
	s := m.s
	s.report.Groups.Leaves++
	req := group.LeaveGroupRequest{GroupID: m.g.id, Members: []group.LeaveMember{{MemberID: m.memberID}}}
	m.tracef("leaves (member %s)", m.memberID)
	ask(m, &m.main, m.coordinator, "leave-group", groupRequestTimeoutMs, serveStart(m.g.id, func(h *coord.Host, done func(*group.LeaveGroupResponse, error)) func() {
		return h.StartLeaveGroup(req, done)
	}), func(answered[*group.LeaveGroupResponse]) {})
	m.memberID, m.assigned, m.state, m.backAt = "", nil, memberGone, s.now+int64(500+s.rng.IntN(2000))
	m.forgetPositions()
}

// ---- the check ----

// ackCommit records an acknowledged commit, which must not be below the
// highest acknowledged before it (unless explained).
func (s *Sim) ackCommit(g *simGroup, p int32, off int64, epoch int32, value string, cp, le int32, by string) {
	s.report.Groups.CommitAcks++
	s.checkCommitted(g, p, off, g.acked, le, "a commit of "+by+" acknowledged")
	if s.failed {
		return
	}
	if prev, ok := g.acked[p]; !ok || off >= prev.offset || s.excused(prev) {
		g.acked[p] = commitAck{offset: off, epoch: epoch, seq: s.hist.Seq(), n: s.nextGroupEvent(), cp: cp, le: le, m: s.offsetsMinISR(), value: value}
	}
}

// offsetsMinISR is __consumer_offsets' min.insync.replicas now (1 before
// the topic exists).
func (s *Sim) offsetsMinISR() int {
	if s.ctl.image.Topic(metadata.ConsumerOffsetsTopic) == nil {
		return 1
	}
	return s.minISRNow(metadata.ConsumerOffsetsTopic)
}

// excused: a recorded truncation of the coordinator's partition since the
// acknowledgement, or lossy shutdowns of at least m of its replicas.
func (s *Sim) excused(a commitAck) bool {
	key := offsetsTP(a.cp).String()
	return s.hist.TruncatedSince(key, a.seq) || s.hist.LossyBrokersSince(key, a.seq) >= a.m
}

// checkCommitted checks one committed offset a coordinator in leader
// epoch le answered for group g's partition p against the acknowledged
// commits known before the question.
func (s *Sim) checkCommitted(g *simGroup, p int32, off int64, before map[int32]commitAck, le int32, what string) {
	s.report.Checks["group offset never backwards"]++
	a, ok := before[p]
	if !ok || off >= a.offset {
		return
	}
	switch {
	case s.excused(a):
		s.report.Groups.Excused++
	case s.resetExplains(g, p, off, a):
		s.report.Groups.Resets++
	case le < a.le:
		s.report.Groups.StaleReads++
		s.tracef("%s: %s t-%d at %d from a coordinator in LE %d; %d was acknowledged in LE %d", g.id, what, p, off, le, a.offset, a.le)
	default:
		s.fail("group offset went backwards", "%s t-%d: %s answers %d (coordinator %s LE %d), but %d was acknowledged (LE %d) with no truncation or lossy shutdowns of %s since",
			g.id, p, what, off, offsetsTP(a.cp), le, a.offset, a.le, offsetsTP(a.cp))
	}
}

// groupCoordinator is the broker that coordinates group id in the
// controller's image (the leader of its __consumer_offsets partition),
// nil when there is none or its coordinators are not live.
func (s *Sim) groupCoordinator(id string) *simBroker {
	n, ok := coord.PartitionsIn(s.ctl.image)
	if !ok {
		return nil
	}
	pr := s.ctl.image.Partition(metadata.ConsumerOffsetsTopic, group.PartitionFor(id, n))
	if pr.GetLeader() < 1 {
		return nil
	}
	b := s.brokers[pr.GetLeader()-1]
	if b.groups == nil || !b.groups.live() {
		return nil
	}
	return b
}

// committedNow asks group id's coordinator, in process (a check, not a
// client), for the group's committed offsets: its broker, its answer and
// the leader epoch it coordinates the group in; nil when there is no
// coordinator, it has no leader epoch or it answers an error.
func (s *Sim) committedNow(id string) (*simBroker, *group.OffsetFetchResponse, int32) {
	b := s.groupCoordinator(id)
	if b == nil {
		return nil, nil, -1
	}
	_, le := b.groups.coordinatorEpoch(id)
	r, err := b.groups.host.OffsetFetch(context.Background(), group.OffsetFetchRequest{GroupID: id})
	if err != nil || r.ErrorCode != group.None || le < 0 {
		return nil, nil, -1
	}
	return b, r, le
}

// finalGroupCheck asks each group's coordinator, after healing, for its
// committed offsets (in process: the check, not a client).
func (s *Sim) finalGroupCheck() {
	for _, g := range s.groups {
		b := s.groupCoordinator(g.id)
		if b == nil {
			continue
		}
		r, err := b.groups.host.OffsetFetch(context.Background(), group.OffsetFetchRequest{GroupID: g.id})
		if err != nil || r.ErrorCode != group.None {
			s.tracef("final check of %s on broker %d: %v %v", g.id, b.id, r.ErrorCode, err)
			continue
		}
		s.report.Groups.FinalChecked++
		got := map[int32]int64{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				got[p.Partition] = p.Offset
			}
		}
		_, le := b.groups.coordinatorEpoch(g.id)
		for _, p := range slices.Sorted(maps.Keys(g.acked)) {
			off, ok := got[p]
			if !ok {
				off = -1
			}
			s.checkCommitted(g, p, off, g.acked, le, "the final OffsetFetch")
		}
	}
}
