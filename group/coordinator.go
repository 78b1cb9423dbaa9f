package group

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Rand is the coordinator's randomness, for member ids (Kafka uses random
// UUIDs, so that ids from different coordinators never collide).
// *math/rand/v2.Rand satisfies it.
type Rand interface {
	IntN(n int) int
}

// Deps are the coordinator's dependencies.
type Deps struct {
	Rand Rand
}

type phase uint8

const (
	loading phase = iota
	active
	unloaded
)

// Coordinator is the group coordinator of one __consumer_offsets
// partition: the classic groups whose ids map to it, and their committed
// offsets. Not safe for concurrent use.
type Coordinator struct {
	cfg   Config
	rand  Rand
	phase phase
	nowMs int64

	groups map[string]*group
	// offsets are the durable committed offsets, per group.
	offsets map[string]map[topicPartition]OffsetAndMetadata
	// inflight counts, per group and partition, the offset records
	// (commits and tombstones) appended but not yet durable.
	inflight map[string]map[topicPartition]int

	timers timers
	// pending are the appends not yet reported, oldest first.
	pending    []*batch
	nextAppend AppendID
	out        Ready
	// completing is set while an append's outcome is applied: responses
	// then go out at once (everything they depend on is durable).
	completing bool
}

// batch is one Append and what follows from its outcome.
type batch struct {
	id      AppendID
	records []Record
	// durable and failed apply the outcome; either may be nil.
	durable func()
	failed  func(code ErrorCode)
	// held are responses released once this append is reported (they
	// were produced while it was the newest one pending).
	held []Response
}

// New returns a coordinator that is loading: it answers requests with
// COORDINATOR_LOAD_IN_PROGRESS until Loaded (or Load).
func New(cfg Config, deps Deps) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Rand == nil {
		return nil, fmt.Errorf("%w: no Rand", ErrInvalidConfig)
	}
	return &Coordinator{
		cfg:        cfg.withDefaults(),
		rand:       deps.Rand,
		groups:     map[string]*group{},
		offsets:    map[string]map[topicPartition]OffsetAndMetadata{},
		inflight:   map[string]map[topicPartition]int{},
		timers:     newTimers(),
		nextAppend: 1,
	}, nil
}

// advance moves the coordinator's clock; it never goes back.
func (c *Coordinator) advance(nowMs int64) {
	c.nowMs = max(c.nowMs, nowMs)
}

// unavailable is the code every request gets while the coordinator does
// not serve: loading, or unloaded.
func (c *Coordinator) unavailable() ErrorCode {
	switch c.phase {
	case loading:
		return CoordinatorLoadInProgress
	case unloaded:
		return NotCoordinator
	}
	return None
}

// Ready returns, and clears, what the host must do since the last Ready.
func (c *Coordinator) Ready() Ready {
	rd := c.out
	rd.TickAtMs = NoTick
	if c.phase == active {
		rd.TickAtMs = c.timers.next()
	}
	c.out = Ready{}
	return rd
}

// respond answers ref. A response leaves once every append made before it
// is reported, so that no answer shows state a failover could lose (as
// Kafka's runtime completes a write only when the high watermark passes
// its last written offset); responses produced by an append's outcome
// leave at once.
func (c *Coordinator) respond(ref Ref, body ResponseBody) {
	if c.phase == unloaded {
		body = body.withError(NotCoordinator)
	}
	r := Response{Ref: ref, Body: body}
	if c.completing || len(c.pending) == 0 {
		c.out.Responses = append(c.out.Responses, r)
		return
	}
	last := c.pending[len(c.pending)-1]
	last.held = append(last.held, r)
}

// emit appends records as one batch; durable and failed run when the host
// reports its outcome.
func (c *Coordinator) emit(records []Record, durable func(), failed func(ErrorCode)) {
	if c.phase != active {
		return
	}
	b := &batch{id: c.nextAppend, records: records, durable: durable, failed: failed}
	c.nextAppend++
	c.pending = append(c.pending, b)
	c.out.Appends = append(c.out.Appends, Append{ID: b.id, Records: records})
}

// takeBatch removes the oldest pending append, which must be id: appends
// to one partition become durable, or fail, in order.
func (c *Coordinator) takeBatch(id AppendID) *batch {
	if len(c.pending) == 0 || c.pending[0].id != id {
		panic(fmt.Sprintf("group: append %d reported out of order (pending %v)", id, c.pendingIDs()))
	}
	b := c.pending[0]
	c.pending[0] = nil
	c.pending = c.pending[1:]
	return b
}

func (c *Coordinator) pendingIDs() []AppendID {
	ids := make([]AppendID, len(c.pending))
	for i, b := range c.pending {
		ids[i] = b.id
	}
	return ids
}

// Appended reports that append id is durable (acks=all): its effects
// apply and the responses waiting on it are released. Appends are
// reported in the order Ready gave them.
func (c *Coordinator) Appended(nowMs int64, id AppendID) {
	if c.phase == unloaded {
		return
	}
	c.advance(nowMs)
	b := c.takeBatch(id)
	c.completing = true
	c.out.Responses = append(c.out.Responses, b.held...)
	if b.durable != nil {
		b.durable()
	}
	c.completing = false
}

// AppendFailed reports that append id is not in the log and never will be
// (rejected before it was written: code is the log's error, such as
// NOT_ENOUGH_REPLICAS). The requests waiting on it fail with the code
// Kafka's coordinator maps it to and their changes are undone. An append
// whose outcome is unknown (a timeout after it was written) is not a
// failure: the host gives up the partition (Unload) and the next
// coordinator loads whatever the log holds.
func (c *Coordinator) AppendFailed(nowMs int64, id AppendID, code ErrorCode) {
	if c.phase == unloaded {
		return
	}
	c.advance(nowMs)
	b := c.takeBatch(id)
	c.completing = true
	c.out.Responses = append(c.out.Responses, b.held...)
	if b.failed != nil {
		b.failed(appendErrorToResponse(code))
	}
	c.completing = false
}

// Tick runs the timers due at nowMs: session expirations, rebalance and
// sync timeouts, the end of an initial rebalance delay, and the periodic
// offsets expiration.
func (c *Coordinator) Tick(nowMs int64) {
	c.advance(nowMs)
	if c.phase != active {
		return
	}
	for t := c.timers.popDue(c.nowMs); t != nil; t = c.timers.popDue(c.nowMs) {
		switch t.key.kind {
		case timerHeartbeat:
			c.expireHeartbeat(t.key.group, t.key.member)
		case timerJoin:
			if g := c.groups[t.key.group]; g != nil {
				if t.initial {
					c.tryCompleteInitialRebalance(g, t.delayMs, t.remainMs)
				} else {
					c.completeJoin(g)
				}
			}
		case timerSync:
			c.expirePendingSync(t.key.group, t.generation)
		case timerCleanup:
			c.cleanup()
		}
	}
}

// Replay applies records of the partition, oldest first, while loading
// (Kafka's replay): the latest record of a key wins and a tombstone
// deletes. An offset commit of a group without metadata creates it as a
// simple group (Empty, no protocol type).
func (c *Coordinator) Replay(nowMs int64, records []Record) error {
	if c.phase != loading {
		return ErrNotLoading
	}
	c.advance(nowMs)
	for i, r := range records {
		d, err := DecodeRecord(r)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		switch d.Kind {
		case OffsetCommitRecord:
			c.applyOffset(d.Group, d.Partition, d.Offset)
		case GroupMetadataRecord:
			if d.Metadata == nil {
				delete(c.groups, d.Group)
			} else {
				c.groups[d.Group] = groupFromRecord(d.Group, d.Metadata)
			}
		}
	}
	return nil
}

// Loaded ends loading at nowMs: every loaded member's session starts now,
// a group over group.max.size rebalances, the offsets expiration is
// scheduled, and requests are served.
func (c *Coordinator) Loaded(nowMs int64) {
	if c.phase != loading {
		return
	}
	c.advance(nowMs)
	c.phase = active
	for _, id := range slices.Sorted(maps.Keys(c.groups)) {
		g := c.groups[id]
		for _, m := range g.sortedMembers() {
			c.rescheduleHeartbeat(g, m, int64(m.sessionTimeoutMs))
		}
		if len(g.members) > c.cfg.MaxSize {
			c.prepareRebalance(g)
		}
	}
	c.timers.schedule(timerKey{kind: timerCleanup}, c.nowMs+c.cfg.OffsetsRetentionCheckIntervalMs)
}

// Load is Replay of the partition's records, then Loaded.
func (c *Coordinator) Load(nowMs int64, records []Record) error {
	if err := c.Replay(nowMs, records); err != nil {
		return err
	}
	c.Loaded(nowMs)
	return nil
}

// Unload ends the coordinator (its partition's leadership moved, or an
// append's outcome is unknown): every parked or waiting request is
// answered NOT_COORDINATOR, pending appends are forgotten (their outcomes
// must not be reported), and later requests get NOT_COORDINATOR.
func (c *Coordinator) Unload() {
	if c.phase == unloaded {
		return
	}
	c.phase = unloaded
	c.completing = true
	for _, b := range c.pending {
		c.out.Responses = append(c.out.Responses, b.held...)
		if b.failed != nil {
			b.failed(NotCoordinator)
		}
	}
	c.pending = nil
	for _, id := range slices.Sorted(maps.Keys(c.groups)) {
		g := c.groups[id]
		for _, m := range g.sortedMembers() {
			if ref := g.setJoin(m, nil); ref != nil {
				c.respond(*ref, &JoinGroupResponse{ErrorCode: NotCoordinator, GenerationID: -1, MemberID: m.id})
			}
			if m.sync != nil {
				c.respond(*m.sync, &SyncGroupResponse{ErrorCode: NotCoordinator})
				m.sync = nil
			}
		}
	}
	c.completing = false
	c.groups = map[string]*group{}
	c.offsets = map[string]map[topicPartition]OffsetAndMetadata{}
	c.inflight = map[string]map[topicPartition]int{}
	c.timers = newTimers()
}

// applyOffset puts a durable committed offset, or deletes it (nil).
func (c *Coordinator) applyOffset(groupID string, tp topicPartition, o *OffsetAndMetadata) {
	if o == nil {
		if os := c.offsets[groupID]; os != nil {
			delete(os, tp)
			if len(os) == 0 {
				delete(c.offsets, groupID)
			}
		}
		return
	}
	if c.groups[groupID] == nil {
		c.groups[groupID] = newGroup(groupID, c.nowMs)
	}
	os := c.offsets[groupID]
	if os == nil {
		os = map[topicPartition]OffsetAndMetadata{}
		c.offsets[groupID] = os
	}
	os[tp] = *o
}

// trackInflight counts offset records of a group being appended (d=+1) or
// reported (d=-1).
func (c *Coordinator) trackInflight(groupID string, tps []topicPartition, d int) {
	m := c.inflight[groupID]
	if m == nil {
		m = map[topicPartition]int{}
		c.inflight[groupID] = m
	}
	for _, tp := range tps {
		m[tp] += d
		if m[tp] == 0 {
			delete(m, tp)
		}
	}
	if len(m) == 0 {
		delete(c.inflight, groupID)
	}
}

// newMemberID is the member id Kafka hands out: the instance id (static)
// or client id, a dash and a random UUID.
func (c *Coordinator) newMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	var u [16]byte
	for i := 0; i < 16; i += 2 {
		v := c.rand.IntN(1 << 16)
		u[i], u[i+1] = byte(v>>8), byte(v)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // IETF variant
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteByte('-')
	for i, x := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b.WriteByte('-')
		}
		b.WriteByte(hex[x>>4])
		b.WriteByte(hex[x&0xf])
	}
	return b.String()
}

// MemberInfo is a member as the coordinator holds it.
type MemberInfo struct {
	MemberID           string
	GroupInstanceID    *string
	ClientID           string
	ClientHost         string
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	Protocols          []Protocol
	Assignment         []byte
}

// GroupInfo is a group as the coordinator holds it, for tests, tools and
// the host's logging (DescribeGroups is the protocol's view).
type GroupInfo struct {
	GroupID          string
	State            State
	StateTimestampMs int64
	Generation       int32
	ProtocolType     string
	Protocol         *string
	Leader           string
	Members          []MemberInfo
}

// Group returns a group's state.
func (c *Coordinator) Group(id string) (GroupInfo, error) {
	g := c.groups[id]
	if g == nil {
		return GroupInfo{}, fmt.Errorf("%w: %q", ErrNoGroup, id)
	}
	gi := GroupInfo{
		GroupID: g.id, State: g.state, StateTimestampMs: g.stateTimestampMs, Generation: g.generation,
		ProtocolType: g.protocolType, Protocol: g.protocolName, Leader: g.leader,
	}
	for _, m := range g.sortedMembers() {
		gi.Members = append(gi.Members, MemberInfo{
			MemberID: m.id, GroupInstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			SessionTimeoutMs: m.sessionTimeoutMs, RebalanceTimeoutMs: m.rebalanceTimeoutMs,
			Protocols: m.protocols, Assignment: m.assignment,
		})
	}
	return gi, nil
}

// GroupIDs are the groups the coordinator holds, sorted.
func (c *Coordinator) GroupIDs() []string { return slices.Sorted(maps.Keys(c.groups)) }
