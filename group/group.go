package group

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
)

// State is a classic group's state (Kafka's ClassicGroupState).
type State uint8

const (
	// Empty: no members; the group may still have committed offsets.
	Empty State = iota
	// PreparingRebalance: members are (re)joining for a new generation.
	PreparingRebalance
	// CompletingRebalance: the generation is decided; the members wait
	// for the leader's assignment (SyncGroup).
	CompletingRebalance
	// Stable: the generation's assignment is durable and handed out.
	Stable
	// Dead: the group is being deleted (its tombstone awaits durability).
	Dead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

// String is Kafka's name of the state, as ListGroups and DescribeGroups
// return it.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// validPrevious are the states each state may be entered from.
var validPrevious = [...][]State{
	Empty:               {PreparingRebalance},
	PreparingRebalance:  {Stable, CompletingRebalance, Empty},
	CompletingRebalance: {PreparingRebalance},
	Stable:              {CompletingRebalance},
	Dead:                {Stable, PreparingRebalance, CompletingRebalance, Empty, Dead},
}

// consumerProtocolType is the protocol type of Kafka's consumers, whose
// subscriptions the coordinator reads (offset expiration, OffsetDelete).
const consumerProtocolType = "consumer"

// member is one member of a group (Kafka's ClassicGroupMember).
type member struct {
	id                 string
	instanceID         *string
	clientID           string
	clientHost         string
	rebalanceTimeoutMs int32
	sessionTimeoutMs   int32
	protocolType       string
	protocols          []Protocol
	assignment         []byte
	// join is the member's parked JoinGroup, sync its parked SyncGroup.
	join, sync *Ref
	// isNew: the member joined but has not completed a rebalance yet; its
	// session may expire while its join is parked.
	isNew bool
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches: the member's protocols (names, metadata and order) are these.
func (m *member) matches(ps []Protocol) bool {
	return slices.EqualFunc(m.protocols, ps, func(a, b Protocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

// vote is the member's most preferred protocol among the candidates.
func (m *member) vote(candidates map[string]bool) string {
	for _, p := range m.protocols {
		if candidates[p.Name] {
			return p.Name
		}
	}
	panic("group: member " + m.id + " supports none of the candidate protocols")
}

// hasSatisfiedHeartbeat: a member waiting in a rebalance needs no
// heartbeat, unless it is new (its first join may be abandoned).
func (m *member) hasSatisfiedHeartbeat() bool {
	return !m.isNew && (m.join != nil || m.sync != nil)
}

func (m *member) isStatic() bool { return m.instanceID != nil }

// group is one classic group (Kafka's ClassicGroup). Its methods change
// only the group; the coordinator answers requests and sets timers.
type group struct {
	id        string
	state     State
	prevState State
	// stateTimestampMs is when the group entered its state, -1 when
	// unknown (loaded from a record without it).
	stateTimestampMs int64
	// protocolType is "" for none (a simple group, or never joined).
	protocolType string
	protocolName *string
	generation   int32
	leader       string // "" for none
	members      map[string]*member
	// static maps group.instance.id to the member id holding it.
	static map[string]string
	// pendingJoin are member ids handed out with MEMBER_ID_REQUIRED that
	// have not joined with them yet.
	pendingJoin map[string]bool
	// awaitingJoin counts members with a parked JoinGroup.
	awaitingJoin int
	// protocolCounts counts, per protocol name, the members supporting it.
	protocolCounts map[string]int
	// pendingSync are members of the generation that have not sent
	// SyncGroup yet.
	pendingSync map[string]bool
	// subscribed is the consumer group's subscribed topics as of its
	// generation, when known (subscribedKnown).
	subscribed      map[string]bool
	subscribedKnown bool
	// newMemberAdded extends the initial rebalance delay.
	newMemberAdded bool
	// syncAppending is the generation whose leader assignment is being
	// appended, -1 for none: a retried leader SyncGroup writes no second
	// assignment for it.
	syncAppending int32
	// deleting holds the state and timestamp the group had before a
	// deletion made it Dead, to restore them if the tombstone fails.
	deletingFrom   State
	deletingFromTs int64
}

func newGroup(id string, nowMs int64) *group {
	return &group{
		id:               id,
		state:            Empty,
		prevState:        Dead,
		stateTimestampMs: nowMs,
		members:          map[string]*member{},
		static:           map[string]string{},
		pendingJoin:      map[string]bool{},
		protocolCounts:   map[string]int{},
		pendingSync:      map[string]bool{},
		syncAppending:    -1,
	}
}

// sortedMembers are the members by member id: wherever the order shows
// (responses, records, leader choice) it is this one, where Kafka's is its
// hash map's.
func (g *group) sortedMembers() []*member {
	out := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *member) int { return strings.Compare(a.id, b.id) })
	return out
}

func (g *group) isLeader(id string) bool { return g.leader != "" && g.leader == id }

func (g *group) usesConsumerProtocol() bool { return g.protocolType == consumerProtocolType }

func (g *group) transition(s State, nowMs int64) {
	if !slices.Contains(validPrevious[s], g.state) {
		panic("group: " + g.id + " cannot go from " + g.state.String() + " to " + s.String())
	}
	g.prevState, g.state, g.stateTimestampMs = g.state, s, nowMs
}

func (g *group) canRebalance() bool {
	return slices.Contains(validPrevious[PreparingRebalance], g.state)
}

// add adds a member (ClassicGroup.add): the first member sets the
// protocol type and, without a leader, becomes it.
func (g *group) add(m *member) {
	if m.instanceID != nil {
		if _, ok := g.static[*m.instanceID]; ok {
			panic("group: static member " + *m.instanceID + " added twice to " + g.id)
		}
		g.static[*m.instanceID] = m.id
	}
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.protocolType != m.protocolType || !g.supportsProtocols(m.protocolType, m.protocols) {
		panic("group: member " + m.id + " added to " + g.id + " with unsupported protocols")
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.members[m.id] = m
	g.countProtocols(m, 1)
	if m.join != nil {
		g.awaitingJoin++
	}
	delete(g.pendingJoin, m.id)
}

// remove removes a member or pending member (ClassicGroup.remove); a
// removed leader is replaced by the first remaining member.
func (g *group) remove(id string) {
	if m := g.members[id]; m != nil {
		delete(g.members, id)
		g.countProtocols(m, -1)
		if m.join != nil {
			g.awaitingJoin--
		}
		if m.instanceID != nil {
			delete(g.static, *m.instanceID)
		}
	}
	if g.isLeader(id) {
		g.leader = ""
		if ms := g.sortedMembers(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
	delete(g.pendingJoin, id)
	delete(g.pendingSync, id)
}

func (g *group) countProtocols(m *member, d int) {
	for _, p := range m.protocols {
		g.protocolCounts[p.Name] += d
		if g.protocolCounts[p.Name] == 0 {
			delete(g.protocolCounts, p.Name)
		}
	}
}

// setJoin parks ref as the member's JoinGroup (nil: none), keeping the
// count of awaiting members; it returns the ref it replaced.
func (g *group) setJoin(m *member, ref *Ref) (old *Ref) {
	switch {
	case ref != nil && m.join == nil:
		g.awaitingJoin++
	case ref == nil && m.join != nil:
		g.awaitingJoin--
	}
	old, m.join = m.join, ref
	return old
}

// updateMember replaces a member's protocols and timeouts and parks its
// JoinGroup (ClassicGroup.updateMember); it returns the ref it replaced.
func (g *group) updateMember(m *member, ps []Protocol, rebalanceTimeoutMs, sessionTimeoutMs int32, ref *Ref) (old *Ref) {
	g.countProtocols(m, -1)
	m.protocols = ps
	g.countProtocols(m, 1)
	m.rebalanceTimeoutMs = rebalanceTimeoutMs
	m.sessionTimeoutMs = sessionTimeoutMs
	return g.setJoin(m, ref)
}

// maybeElectNewJoinedLeader keeps a leader that rejoined, else makes the
// first member that rejoined leader; false when none rejoined.
func (g *group) maybeElectNewJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if g.members[g.leader].join != nil {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.join != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

func (g *group) hasAllMembersJoined() bool {
	return len(g.members) == g.awaitingJoin && len(g.pendingJoin) == 0
}

// rebalanceTimeoutMs is the members' largest rebalance timeout.
func (g *group) rebalanceTimeoutMs() int64 {
	var max int32
	for _, m := range g.members {
		max = maxOf(max, m.rebalanceTimeoutMs)
	}
	return int64(max)
}

func maxOf[T int32 | int64](a, b T) T {
	if a > b {
		return a
	}
	return b
}

// validateMember checks a request's member id and instance id
// (ClassicGroup.validateMember).
func (g *group) validateMember(memberID string, instanceID *string) ErrorCode {
	if instanceID != nil {
		existing, ok := g.static[*instanceID]
		if !ok {
			return UnknownMemberID
		}
		if existing != memberID {
			return FencedInstanceID
		}
	}
	if g.members[memberID] == nil {
		return UnknownMemberID
	}
	return None
}

// supportsProtocols: a joining member with this protocol type and
// protocols fits the group: any non-empty ones when it is Empty, else the
// group's type and at least one protocol every member supports.
func (g *group) supportsProtocols(protocolType string, ps []Protocol) bool {
	if g.state == Empty {
		return protocolType != "" && len(ps) > 0
	}
	if g.protocolType != protocolType {
		return false
	}
	for _, p := range ps {
		if g.protocolCounts[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol every member supports with the most
// member votes, each member voting for its most preferred candidate
// (ClassicGroup.selectProtocol); a tie goes to the smallest name.
func (g *group) selectProtocol() string {
	if len(g.members) == 0 {
		panic("group: selecting a protocol for empty group " + g.id)
	}
	candidates := map[string]bool{}
	for name, n := range g.protocolCounts {
		if n == len(g.members) {
			candidates[name] = true
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		votes[m.vote(candidates)]++
	}
	best, bestVotes := "", -1
	for name, n := range votes {
		if n > bestVotes || n == bestVotes && name < best {
			best, bestVotes = name, n
		}
	}
	return best
}

// initNextGeneration starts the next generation: CompletingRebalance with
// a protocol, or Empty without members.
func (g *group) initNextGeneration(nowMs int64) {
	g.generation++
	if len(g.members) > 0 {
		p := g.selectProtocol()
		g.protocolName = &p
		g.computeSubscribedTopics()
		g.transition(CompletingRebalance, nowMs)
	} else {
		g.protocolName = nil
		g.computeSubscribedTopics()
		g.transition(Empty, nowMs)
	}
	clear(g.pendingSync)
}

// computeSubscribedTopics reads a consumer group's subscribed topics from
// its members' subscriptions for the chosen protocol, parsed with the
// consumer protocol's version 0 schema (every version starts with it).
func (g *group) computeSubscribedTopics() {
	g.subscribed, g.subscribedKnown = nil, false
	if g.protocolType != consumerProtocolType {
		return
	}
	if len(g.members) == 0 {
		g.subscribed, g.subscribedKnown = map[string]bool{}, true
		return
	}
	if g.protocolName == nil {
		return
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		ts, ok := subscriptionTopics(m.metadata(*g.protocolName))
		if !ok {
			return // unparseable: the topics stay unknown, as in Kafka
		}
		for _, t := range ts {
			topics[t] = true
		}
	}
	g.subscribed, g.subscribedKnown = topics, true
}

// isSubscribedToTopic: the group consumes the topic, or (a consumer group
// whose subscriptions are unknown) may.
func (g *group) isSubscribedToTopic(topic string) bool {
	if g.subscribedKnown {
		return g.subscribed[topic]
	}
	return g.usesConsumerProtocol()
}

// subscriptionTopics parses a ConsumerProtocolSubscription's version and
// its v0 fields: topics ([]string) and user data (nullable bytes).
func subscriptionTopics(b []byte) ([]string, bool) {
	r := reader{b: b}
	r.int16() // version
	n := r.int32()
	if n < 0 || r.bad {
		return nil, false
	}
	var topics []string
	for range n {
		s := r.bytes(int(r.int16()))
		if r.bad {
			return nil, false
		}
		topics = append(topics, string(s))
	}
	if l := r.int32(); l >= 0 {
		r.bytes(int(l))
	}
	return topics, !r.bad
}

// reader reads big-endian fields; bad is set by a read past the end.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) bytes(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) int16() int16 {
	if b := r.bytes(2); !r.bad {
		return int16(binary.BigEndian.Uint16(b))
	}
	return -1
}

func (r *reader) int32() int32 {
	if b := r.bytes(4); !r.bad {
		return int32(binary.BigEndian.Uint32(b))
	}
	return -1
}

// expiryBase is when a committed offset's retention starts counting
// (ClassicGroup.offsetExpirationCondition), false when the group's
// offsets do not expire now: for an Empty group with a protocol type,
// when the group became Empty; for a Stable consumer group with known
// subscriptions, the commit (only unsubscribed topics are considered);
// for a simple group (no protocol type), the commit.
func (g *group) expiryBase(o OffsetAndMetadata) (int64, bool) {
	switch {
	case g.protocolType == "":
		return o.CommitTimestampMs, true
	case g.state == Empty:
		if g.stateTimestampMs >= 0 {
			return g.stateTimestampMs, true
		}
		return o.CommitTimestampMs, true
	case g.usesConsumerProtocol() && g.subscribedKnown && g.state == Stable:
		return o.CommitTimestampMs, true
	}
	return 0, false
}

// metadataRecord is the group's GroupMetadataValue with these
// assignments (members without one get an empty assignment).
func (g *group) metadataRecord(assignments map[string][]byte) *GroupMetadata {
	v := &GroupMetadata{
		ProtocolType:            g.protocolType,
		Generation:              g.generation,
		Protocol:                g.protocolName,
		CurrentStateTimestampMs: g.stateTimestampMs,
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	for _, m := range g.sortedMembers() {
		if g.protocolName == nil {
			panic("group: writing members of " + g.id + " without a protocol")
		}
		a := assignments[m.id]
		if a == nil {
			a = []byte{}
		}
		v.Members = append(v.Members, MemberMetadata{
			MemberID:           m.id,
			GroupInstanceID:    m.instanceID,
			ClientID:           m.clientID,
			ClientHost:         m.clientHost,
			RebalanceTimeoutMs: m.rebalanceTimeoutMs,
			SessionTimeoutMs:   m.sessionTimeoutMs,
			Subscription:       m.metadata(*g.protocolName),
			Assignment:         a,
		})
	}
	return v
}

// assignments are the members' current assignments.
func (g *group) assignments() map[string][]byte {
	out := make(map[string][]byte, len(g.members))
	for id, m := range g.members {
		out[id] = m.assignment
	}
	return out
}

// groupFromRecord is a group as its GroupMetadataValue leaves it (Kafka's
// GroupMetadataManager.replay): Stable with its members, or Empty. Each
// member supports the group's protocol only, with its subscription.
func groupFromRecord(id string, v *GroupMetadata) *group {
	g := newGroup(id, v.CurrentStateTimestampMs)
	g.generation = v.Generation
	g.protocolType = v.ProtocolType
	g.protocolName = v.Protocol
	if v.Leader != nil {
		g.leader = *v.Leader
	}
	if len(v.Members) > 0 {
		g.state = Stable
	}
	for _, mm := range v.Members {
		rt := mm.RebalanceTimeoutMs
		if rt == -1 {
			rt = mm.SessionTimeoutMs
		}
		m := &member{
			id:                 mm.MemberID,
			instanceID:         mm.GroupInstanceID,
			clientID:           mm.ClientID,
			clientHost:         mm.ClientHost,
			rebalanceTimeoutMs: rt,
			sessionTimeoutMs:   mm.SessionTimeoutMs,
			protocolType:       v.ProtocolType,
			assignment:         mm.Assignment,
		}
		name := ""
		if v.Protocol != nil {
			name = *v.Protocol
		}
		m.protocols = []Protocol{{Name: name, Metadata: mm.Subscription}}
		g.loadMember(m)
	}
	g.computeSubscribedTopics()
	return g
}

// loadMember adds a member from a record without the checks of add: a
// record is the truth.
func (g *group) loadMember(m *member) {
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.members[m.id] = m
	g.countProtocols(m, 1)
}
