package group

// This file is the classic group protocol's membership: JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup and the timers behind them, following
// Kafka's GroupMetadataManager (classicGroupJoin and the methods it calls).

func heartbeatKey(groupID, memberID string) timerKey {
	return timerKey{kind: timerHeartbeat, group: groupID, member: memberID}
}

func joinKey(groupID string) timerKey { return timerKey{kind: timerJoin, group: groupID} }

func syncKey(groupID string) timerKey { return timerKey{kind: timerSync, group: groupID} }

func joinError(code ErrorCode, memberID string) *JoinGroupResponse {
	return &JoinGroupResponse{ErrorCode: code, GenerationID: -1, MemberID: memberID}
}

// protocolTypeOrNil is the group's protocol type as responses carry it.
func (g *group) protocolTypeOrNil() *string {
	if g.protocolType == "" {
		return nil
	}
	t := g.protocolType
	return &t
}

// JoinGroup handles a JoinGroup. Its response may come from a later call:
// when the rebalance it joins completes (all members rejoined, the
// rebalance timeout, or the end of the initial delay).
func (c *Coordinator) JoinGroup(nowMs int64, ref Ref, req JoinGroupRequest) {
	c.advance(nowMs)
	if code := c.unavailable(); code != None {
		c.respond(ref, joinError(code, req.MemberID))
		return
	}
	if req.GroupID == "" {
		c.respond(ref, joinError(InvalidGroupID, req.MemberID))
		return
	}
	if st := int64(req.SessionTimeoutMs); st < c.cfg.MinSessionTimeoutMs || st > c.cfg.MaxSessionTimeoutMs {
		c.respond(ref, joinError(InvalidSessionTimeout, req.MemberID))
		return
	}
	if req.RebalanceTimeoutMs <= 0 {
		req.RebalanceTimeoutMs = req.SessionTimeoutMs
	}
	unknown := req.MemberID == ""
	g := c.groups[req.GroupID]
	if g == nil {
		if !unknown {
			c.respond(ref, joinError(UnknownMemberID, req.MemberID))
			return
		}
		g = newGroup(req.GroupID, c.nowMs)
		c.groups[g.id] = g
		// As Kafka does, a new group's (empty) metadata is written so
		// that the group outlives a failover. If the append fails the
		// group just lives in memory.
		c.emit([]Record{EncodeGroupMetadata(g.id, g.metadataRecord(nil))}, nil, nil)
	}
	switch {
	case !c.acceptJoiningMember(g, req.MemberID):
		c.removeMember(g, req.MemberID)
		c.respond(ref, joinError(GroupMaxSizeReached, ""))
	case unknown:
		c.joinNewMember(g, ref, req)
	default:
		c.joinExistingMember(g, ref, req)
	}
}

// acceptJoiningMember applies group.max.size: a member already waiting in
// a rebalance, or already in the group, is accepted; a new one only below
// the limit (counting the members that rejoined, during a rebalance).
func (c *Coordinator) acceptJoiningMember(g *group, memberID string) bool {
	m := g.members[memberID]
	switch g.state {
	case Empty, Dead:
		return true
	case PreparingRebalance:
		return (m != nil && m.join != nil) || g.awaitingJoin < c.cfg.MaxSize
	default:
		return m != nil || len(g.members) < c.cfg.MaxSize
	}
}

func (c *Coordinator) joinNewMember(g *group, ref Ref, req JoinGroupRequest) {
	switch {
	case g.state == Dead:
		c.respond(ref, joinError(CoordinatorNotAvailable, ""))
	case !g.supportsProtocols(req.ProtocolType, req.Protocols):
		c.respond(ref, joinError(InconsistentGroupProtocol, ""))
	default:
		id := c.newMemberID(req.ClientID, req.GroupInstanceID)
		switch {
		case req.GroupInstanceID != nil:
			if old, ok := g.static[*req.GroupInstanceID]; ok {
				c.updateStaticMemberThenRebalanceOrCompleteJoin(g, ref, req, old, id)
			} else {
				c.addMemberThenRebalanceOrCompleteJoin(g, ref, req, id)
			}
		case req.Version >= 4:
			// KIP-394: the member gets its id first and joins with it,
			// so an abandoned first join leaves no member behind.
			g.pendingJoin[id] = true
			c.timers.schedule(heartbeatKey(g.id, id), c.nowMs+int64(req.SessionTimeoutMs))
			c.respond(ref, joinError(MemberIDRequired, id))
		default:
			c.addMemberThenRebalanceOrCompleteJoin(g, ref, req, id)
		}
	}
}

func (c *Coordinator) joinExistingMember(g *group, ref Ref, req JoinGroupRequest) {
	id := req.MemberID
	switch {
	case g.state == Dead:
		c.respond(ref, joinError(CoordinatorNotAvailable, id))
		return
	case !g.supportsProtocols(req.ProtocolType, req.Protocols):
		c.respond(ref, joinError(InconsistentGroupProtocol, id))
		return
	case g.pendingJoin[id]:
		if req.GroupInstanceID != nil {
			// Only dynamic members get pending ids; Kafka fails the
			// request as an illegal state.
			c.respond(ref, joinError(UnknownServerError, id))
			return
		}
		c.addMemberThenRebalanceOrCompleteJoin(g, ref, req, id)
		return
	}
	if code := g.validateMember(id, req.GroupInstanceID); code != None {
		c.respond(ref, joinError(code, id))
		return
	}
	m := g.members[id]
	switch g.state {
	case PreparingRebalance:
		c.updateMemberThenRebalanceOrCompleteJoin(g, m, ref, req)
	case CompletingRebalance:
		if !m.matches(req.Protocols) {
			c.updateMemberThenRebalanceOrCompleteJoin(g, m, ref, req)
			return
		}
		// The same metadata again (the member missed its response):
		// answer with the current generation.
		resp := c.generationResponse(g, id)
		if g.isLeader(id) {
			resp.Members = c.currentMembers(g)
		}
		c.respond(ref, resp)
	case Stable:
		if g.isLeader(id) || !m.matches(req.Protocols) {
			// A leader's join forces a rebalance (to react to changes
			// that do not show in the metadata); changed metadata too.
			c.updateMemberThenRebalanceOrCompleteJoin(g, m, ref, req)
			return
		}
		c.respond(ref, c.generationResponse(g, id))
	default:
		c.respond(ref, joinError(UnknownMemberID, id))
	}
}

// generationResponse is a successful JoinGroup response with the current
// generation, without the member list.
func (c *Coordinator) generationResponse(g *group, memberID string) *JoinGroupResponse {
	return &JoinGroupResponse{
		GenerationID: g.generation,
		ProtocolType: g.protocolTypeOrNil(),
		ProtocolName: g.protocolName,
		Leader:       g.leader,
		MemberID:     memberID,
	}
}

// currentMembers is the leader's view of the generation's members.
func (c *Coordinator) currentMembers(g *group) []JoinGroupMember {
	var out []JoinGroupMember
	for _, m := range g.sortedMembers() {
		var md []byte
		if g.protocolName != nil {
			md = m.metadata(*g.protocolName)
		}
		out = append(out, JoinGroupMember{MemberID: m.id, GroupInstanceID: m.instanceID, Metadata: md})
	}
	return out
}

// completeJoinResponse answers the member's parked JoinGroup, if any.
func (c *Coordinator) completeJoinResponse(g *group, m *member, resp *JoinGroupResponse) bool {
	ref := g.setJoin(m, nil)
	if ref == nil {
		return false
	}
	c.respond(*ref, resp)
	return true
}

// park parks ref as the member's JoinGroup; a JoinGroup it replaces is
// never answered by Kafka and is Superseded here.
func (c *Coordinator) park(g *group, m *member, ps []Protocol, rebalanceTimeoutMs, sessionTimeoutMs int32, ref Ref) {
	if old := g.updateMember(m, ps, rebalanceTimeoutMs, sessionTimeoutMs, &ref); old != nil {
		c.respond(*old, &Superseded{})
	}
}

func (c *Coordinator) updateMemberThenRebalanceOrCompleteJoin(g *group, m *member, ref Ref, req JoinGroupRequest) {
	c.park(g, m, req.Protocols, req.RebalanceTimeoutMs, req.SessionTimeoutMs, ref)
	c.maybePrepareRebalanceOrCompleteJoin(g)
}

func (c *Coordinator) addMemberThenRebalanceOrCompleteJoin(g *group, ref Ref, req JoinGroupRequest, id string) {
	m := &member{
		id:                 id,
		instanceID:         req.GroupInstanceID,
		clientID:           req.ClientID,
		clientHost:         req.ClientHost,
		rebalanceTimeoutMs: req.RebalanceTimeoutMs,
		sessionTimeoutMs:   req.SessionTimeoutMs,
		protocolType:       req.ProtocolType,
		protocols:          req.Protocols,
		join:               &ref,
		isNew:              true,
	}
	if g.state == PreparingRebalance && g.prevState == Empty {
		g.newMemberAdded = true // extends the initial delay
	}
	g.add(m)
	// A new member cannot heartbeat while its join is parked, and a
	// client that gave up would leave it behind: its join times out.
	c.rescheduleHeartbeat(g, m, c.cfg.NewMemberJoinTimeoutMs)
	c.maybePrepareRebalanceOrCompleteJoin(g)
}

// updateStaticMemberThenRebalanceOrCompleteJoin replaces a static member
// by a new member id for the same instance id (KIP-345): the old id is
// fenced at once. In a Stable group whose protocol would not change, the
// new id takes over without a rebalance once the group's metadata with it
// is durable.
func (c *Coordinator) updateStaticMemberThenRebalanceOrCompleteJoin(g *group, ref Ref, req JoinGroupRequest, oldID, newID string) {
	instanceID := *req.GroupInstanceID
	currentLeader := g.leader
	newM := c.replaceStaticMember(g, instanceID, oldID, newID)
	c.rescheduleHeartbeat(g, newM, int64(newM.sessionTimeoutMs))
	oldRebalance, oldSession, oldProtocols := newM.rebalanceTimeoutMs, newM.sessionTimeoutMs, newM.protocols
	c.park(g, newM, req.Protocols, req.RebalanceTimeoutMs, req.SessionTimeoutMs, ref)
	switch g.state {
	case Stable:
		if g.protocolName == nil || *g.protocolName != g.selectProtocol() {
			c.maybePrepareRebalanceOrCompleteJoin(g)
			return
		}
		gen := g.generation
		// unchanged: the group is as the replacement left it, and the
		// new member still waits with this join.
		unchanged := func() bool {
			return c.groups[g.id] == g && g.state == Stable && g.generation == gen &&
				g.members[newID] == newM && newM.join != nil && *newM.join == ref
		}
		rec := EncodeGroupMetadata(g.id, g.metadataRecord(g.assignments()))
		c.emit([]Record{rec}, func() {
			if !unchanged() {
				return // a rebalance since answered the join
			}
			resp := c.generationResponse(g, newID)
			resp.Leader = currentLeader // the old leader id: the new one runs no assignment
			if req.Version >= 9 {
				leader := g.isLeader(newID)
				resp.Leader, resp.SkipAssignment = g.leader, leader
				if leader {
					resp.Members = c.currentMembers(g)
				}
			}
			c.completeJoinResponse(g, newM, resp)
		}, func(code ErrorCode) {
			if !unchanged() {
				return
			}
			// Undo: the old member id holds the instance again.
			g.updateMember(newM, oldProtocols, oldRebalance, oldSession, nil)
			old := c.replaceStaticMember(g, instanceID, newID, oldID)
			c.rescheduleHeartbeat(g, old, int64(old.sessionTimeoutMs))
			c.respond(ref, &JoinGroupResponse{
				ErrorCode: code, GenerationID: g.generation, ProtocolType: g.protocolTypeOrNil(),
				ProtocolName: g.protocolName, Leader: currentLeader,
			})
		})
	case CompletingRebalance:
		// The leader may have assigned the old id already: rebalance.
		c.prepareRebalance(g)
	case PreparingRebalance:
		c.maybeCompleteJoinPhase(g)
	default:
		panic("group: static member of " + g.id + " replaced in state " + g.state.String())
	}
}

// replaceStaticMember moves a static member to a new member id, fencing
// the old id's parked requests with FENCED_INSTANCE_ID.
func (c *Coordinator) replaceStaticMember(g *group, instanceID, oldID, newID string) *member {
	old := g.members[oldID]
	if old == nil {
		panic("group: replacing unknown member " + oldID + " of " + g.id)
	}
	if ref := g.setJoin(old, nil); ref != nil {
		c.respond(*ref, &JoinGroupResponse{ErrorCode: FencedInstanceID, GenerationID: -1, MemberID: oldID})
	}
	if old.sync != nil {
		c.respond(*old.sync, &SyncGroupResponse{ErrorCode: FencedInstanceID})
		old.sync = nil
	}
	delete(g.members, oldID)
	c.timers.cancel(heartbeatKey(g.id, oldID))
	m := &member{
		id:                 newID,
		instanceID:         old.instanceID,
		clientID:           old.clientID,
		clientHost:         old.clientHost,
		rebalanceTimeoutMs: old.rebalanceTimeoutMs,
		sessionTimeoutMs:   old.sessionTimeoutMs,
		protocolType:       old.protocolType,
		protocols:          old.protocols,
		assignment:         old.assignment,
	}
	g.members[newID] = m
	if g.isLeader(oldID) {
		g.leader = newID
	}
	g.static[instanceID] = newID
	return m
}

// removeMember removes a member (or pending member) and its session
// timer; a parked request of it is answered UNKNOWN_MEMBER_ID (where
// Kafka may leave it unanswered).
func (c *Coordinator) removeMember(g *group, id string) {
	if m := g.members[id]; m != nil {
		if ref := g.setJoin(m, nil); ref != nil {
			c.respond(*ref, joinError(UnknownMemberID, ""))
		}
		if m.sync != nil {
			c.respond(*m.sync, &SyncGroupResponse{ErrorCode: UnknownMemberID})
			m.sync = nil
		}
	}
	c.timers.cancel(heartbeatKey(g.id, id))
	g.remove(id)
}

func (c *Coordinator) maybePrepareRebalanceOrCompleteJoin(g *group) {
	if g.canRebalance() {
		c.prepareRebalance(g)
	} else {
		c.maybeCompleteJoinPhase(g)
	}
}

// prepareRebalance starts a rebalance: waiting syncs are told to rejoin; a
// new group's first rebalance waits the initial delay; otherwise the join
// phase completes when every member rejoined, or at the rebalance timeout.
func (c *Coordinator) prepareRebalance(g *group) {
	if g.state == CompletingRebalance {
		c.resetAndPropagateAssignmentWithError(g, RebalanceInProgress)
	}
	clear(g.pendingSync)
	c.timers.cancel(syncKey(g.id))
	initial := g.state == Empty
	if initial {
		delay := c.cfg.InitialRebalanceDelayMs
		t := c.timers.schedule(joinKey(g.id), c.nowMs+delay)
		t.initial, t.delayMs, t.remainMs = true, delay, max(g.rebalanceTimeoutMs()-delay, 0)
	}
	g.transition(PreparingRebalance, c.nowMs)
	if !initial {
		c.maybeCompleteJoinElseSchedule(g)
	}
}

func (c *Coordinator) maybeCompleteJoinElseSchedule(g *group) {
	if g.hasAllMembersJoined() {
		c.completeJoin(g)
		return
	}
	c.timers.schedule(joinKey(g.id), c.nowMs+g.rebalanceTimeoutMs())
}

// tryCompleteInitialRebalance ends a step of the initial delay: another
// step while new members keep arriving and rebalance time remains, else
// the join phase completes.
func (c *Coordinator) tryCompleteInitialRebalance(g *group, delayMs, remainMs int64) {
	if g.newMemberAdded && remainMs != 0 {
		g.newMemberAdded = false
		next := min(c.cfg.InitialRebalanceDelayMs, remainMs)
		t := c.timers.schedule(joinKey(g.id), c.nowMs+next)
		t.initial, t.delayMs, t.remainMs = true, next, max(remainMs-delayMs, 0)
		return
	}
	c.completeJoin(g)
}

// maybeCompleteJoinPhase completes the join phase of a (non-initial)
// rebalance once every member rejoined.
func (c *Coordinator) maybeCompleteJoinPhase(g *group) {
	if g.state != PreparingRebalance || g.prevState == Empty || !g.hasAllMembersJoined() {
		return
	}
	c.completeJoin(g)
}

// completeJoin ends the join phase: dynamic members that did not rejoin
// are removed, the next generation starts and every rejoined member gets
// its JoinGroup response (the leader with the member list); an emptied
// group's metadata is written.
func (c *Coordinator) completeJoin(g *group) {
	c.timers.cancel(joinKey(g.id))
	for _, m := range g.sortedMembers() {
		if m.join == nil && !m.isStatic() {
			c.removeMember(g, m.id)
		}
	}
	if g.state == Dead {
		return
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// Only static members that did not rejoin are left: wait for
		// them (or their sessions) another rebalance timeout.
		c.timers.schedule(joinKey(g.id), c.nowMs+g.rebalanceTimeoutMs())
		return
	}
	g.initNextGeneration(c.nowMs)
	if g.state == Empty {
		// A failed append is harmless: the previous generation's
		// metadata would come back after a failover and expire.
		c.emit([]Record{EncodeGroupMetadata(g.id, g.metadataRecord(nil))}, nil, nil)
		return
	}
	for _, m := range g.sortedMembers() {
		resp := c.generationResponse(g, m.id)
		if g.isLeader(m.id) {
			resp.Members = c.currentMembers(g)
		}
		c.completeJoinResponse(g, m, resp)
		c.rescheduleHeartbeat(g, m, int64(m.sessionTimeoutMs))
		m.isNew = false
		g.pendingSync[m.id] = true
	}
	t := c.timers.schedule(syncKey(g.id), c.nowMs+g.rebalanceTimeoutMs())
	t.generation = g.generation
}

func (c *Coordinator) rescheduleHeartbeat(g *group, m *member, timeoutMs int64) {
	c.timers.schedule(heartbeatKey(g.id, m.id), c.nowMs+timeoutMs)
}

// expireHeartbeat handles a member's session timer: a pending member that
// never rejoined, or a member not waiting in a rebalance, is removed.
func (c *Coordinator) expireHeartbeat(groupID, memberID string) {
	g := c.groups[groupID]
	if g == nil || g.state == Dead {
		return
	}
	if g.pendingJoin[memberID] {
		g.remove(memberID)
		if g.state == PreparingRebalance && g.hasAllMembersJoined() {
			c.completeJoin(g)
		}
		return
	}
	m := g.members[memberID]
	if m == nil || m.hasSatisfiedHeartbeat() {
		return
	}
	c.removeMemberAndUpdateGroup(g, m)
}

func (c *Coordinator) removeMemberAndUpdateGroup(g *group, m *member) {
	c.removeMember(g, m.id)
	switch {
	case g.state == Stable || g.state == CompletingRebalance:
		c.maybePrepareRebalanceOrCompleteJoin(g)
	case g.state == PreparingRebalance && g.hasAllMembersJoined():
		c.completeJoin(g)
	}
}

func (c *Coordinator) resetAndPropagateAssignmentWithError(g *group, code ErrorCode) {
	if g.state != CompletingRebalance {
		panic("group: resetting assignments of " + g.id + " in state " + g.state.String())
	}
	for _, m := range g.members {
		m.assignment = []byte{}
	}
	c.propagateAssignment(g, code)
}

func (c *Coordinator) setAndPropagateAssignment(g *group, assignments map[string][]byte) {
	if g.state != CompletingRebalance {
		panic("group: setting assignments of " + g.id + " in state " + g.state.String())
	}
	for id, m := range g.members {
		m.assignment = assignments[id]
		if m.assignment == nil {
			m.assignment = []byte{}
		}
	}
	c.propagateAssignment(g, None)
}

// propagateAssignment answers every parked SyncGroup and restarts those
// members' sessions.
func (c *Coordinator) propagateAssignment(g *group, code ErrorCode) {
	for _, m := range g.sortedMembers() {
		if m.sync == nil {
			continue
		}
		resp := &SyncGroupResponse{ErrorCode: code, Assignment: m.assignment}
		if code == None {
			resp.ProtocolType, resp.ProtocolName = g.protocolTypeOrNil(), g.protocolName
		}
		c.respond(*m.sync, resp)
		m.sync = nil
		c.rescheduleHeartbeat(g, m, int64(m.sessionTimeoutMs))
	}
}

// SyncGroup handles a SyncGroup. A follower's waits for the leader's; the
// leader's assignment is written as the group's metadata, and every
// member gets its assignment once that is durable.
func (c *Coordinator) SyncGroup(nowMs int64, ref Ref, req SyncGroupRequest) {
	c.advance(nowMs)
	fail := func(code ErrorCode) { c.respond(ref, &SyncGroupResponse{ErrorCode: code}) }
	if code := c.unavailable(); code != None {
		fail(code)
		return
	}
	if req.GroupID == "" {
		fail(InvalidGroupID)
		return
	}
	g := c.groups[req.GroupID]
	switch {
	case g == nil || g.state == Empty:
		fail(UnknownMemberID)
		return
	case g.state == Dead:
		fail(CoordinatorNotAvailable)
		return
	}
	if code := g.validateMember(req.MemberID, req.GroupInstanceID); code != None {
		fail(code)
		return
	}
	if req.GenerationID != g.generation {
		fail(IllegalGeneration)
		return
	}
	if inconsistent(req.ProtocolType, g.protocolTypeOrNil()) || inconsistent(req.ProtocolName, g.protocolName) {
		fail(InconsistentGroupProtocol)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case PreparingRebalance:
		fail(RebalanceInProgress)
	case CompletingRebalance:
		if m.sync != nil {
			c.respond(*m.sync, &Superseded{})
		}
		m.sync = &ref
		c.removePendingSyncMember(g, m.id)
		if !g.isLeader(m.id) || g.syncAppending == g.generation {
			return
		}
		assignments := map[string][]byte{}
		for _, a := range req.Assignments {
			assignments[a.MemberID] = a.Assignment
		}
		gen := g.generation
		g.syncAppending = gen
		rec := EncodeGroupMetadata(g.id, g.metadataRecord(assignments))
		current := func() bool {
			if g.syncAppending == gen {
				g.syncAppending = -1
			}
			return c.groups[g.id] == g && g.state == CompletingRebalance && g.generation == gen
		}
		c.emit([]Record{rec}, func() {
			if current() {
				c.setAndPropagateAssignment(g, assignments)
				g.transition(Stable, c.nowMs)
			}
		}, func(code ErrorCode) {
			if current() {
				c.resetAndPropagateAssignmentWithError(g, code)
				c.maybePrepareRebalanceOrCompleteJoin(g)
			}
		})
	case Stable:
		c.removePendingSyncMember(g, m.id)
		c.respond(ref, &SyncGroupResponse{ProtocolType: g.protocolTypeOrNil(), ProtocolName: g.protocolName, Assignment: m.assignment})
	}
}

// inconsistent: a request's protocol type or name differs from the
// group's, both known.
func inconsistent(req, group *string) bool {
	return req != nil && group != nil && *req != *group
}

func (c *Coordinator) removePendingSyncMember(g *group, id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 {
		c.timers.cancel(syncKey(g.id))
	}
}

// expirePendingSync removes the members of generation gen that did not
// send SyncGroup in time, and rebalances.
func (c *Coordinator) expirePendingSync(groupID string, gen int32) {
	g := c.groups[groupID]
	if g == nil || g.generation != gen || (g.state != CompletingRebalance && g.state != Stable) || len(g.pendingSync) == 0 {
		return
	}
	for _, id := range sortedKeys(g.pendingSync) {
		c.removeMember(g, id)
	}
	c.prepareRebalance(g)
}

// Heartbeat handles a Heartbeat: it keeps the member's session and tells
// it whether a rebalance is under way.
func (c *Coordinator) Heartbeat(nowMs int64, ref Ref, req HeartbeatRequest) {
	c.advance(nowMs)
	code := c.heartbeat(req)
	c.respond(ref, &HeartbeatResponse{ErrorCode: code})
}

func (c *Coordinator) heartbeat(req HeartbeatRequest) ErrorCode {
	if code := c.unavailable(); code != None {
		return code
	}
	if req.GroupID == "" {
		return InvalidGroupID
	}
	g := c.groups[req.GroupID]
	switch {
	case g == nil:
		return UnknownMemberID
	case g.state == Dead:
		return CoordinatorNotAvailable
	}
	if code := g.validateMember(req.MemberID, req.GroupInstanceID); code != None {
		return code
	}
	if req.GenerationID != g.generation {
		return IllegalGeneration
	}
	m := g.members[req.MemberID]
	switch g.state {
	case Empty:
		return UnknownMemberID
	case PreparingRebalance:
		c.rescheduleHeartbeat(g, m, int64(m.sessionTimeoutMs))
		return RebalanceInProgress
	default:
		c.rescheduleHeartbeat(g, m, int64(m.sessionTimeoutMs))
		return None
	}
}

// LeaveGroup handles a LeaveGroup: each member leaves (a static one by its
// instance id alone if MemberID is ""), then the group rebalances.
func (c *Coordinator) LeaveGroup(nowMs int64, ref Ref, req LeaveGroupRequest) {
	c.advance(nowMs)
	fail := func(code ErrorCode) { c.respond(ref, &LeaveGroupResponse{ErrorCode: code}) }
	if code := c.unavailable(); code != None {
		fail(code)
		return
	}
	if req.GroupID == "" {
		fail(InvalidGroupID)
		return
	}
	g := c.groups[req.GroupID]
	switch {
	case g == nil:
		fail(UnknownMemberID)
		return
	case g.state == Dead:
		fail(CoordinatorNotAvailable)
		return
	}
	resp := &LeaveGroupResponse{}
	left := false
	for _, lm := range req.Members {
		code := None
		switch {
		case lm.MemberID == "":
			if lm.GroupInstanceID != nil && g.static[*lm.GroupInstanceID] != "" {
				c.removeMember(g, g.static[*lm.GroupInstanceID])
			} else {
				code = UnknownMemberID
			}
		case g.pendingJoin[lm.MemberID]:
			c.removeMember(g, lm.MemberID)
		default:
			if code = g.validateMember(lm.MemberID, lm.GroupInstanceID); code == None {
				c.removeMember(g, lm.MemberID)
			}
		}
		left = left || code == None
		resp.Members = append(resp.Members, LeaveMemberResponse{MemberID: lm.MemberID, GroupInstanceID: lm.GroupInstanceID, ErrorCode: code})
	}
	if left {
		switch g.state {
		case Stable, CompletingRebalance:
			c.maybePrepareRebalanceOrCompleteJoin(g)
		case PreparingRebalance:
			c.maybeCompleteJoinPhase(g)
		}
	}
	c.respond(ref, resp)
}
