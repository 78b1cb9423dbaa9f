package group

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// This file is the offsets side (Kafka's OffsetMetadataManager) and the
// group administration APIs.

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func compareTP(a, b topicPartition) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// validateOffsetCommit checks a commit against the group
// (ClassicGroup.validateOffsetCommit): a simple consumer (generation < 0)
// may commit to an Empty group; a member commits in its generation, not
// while the generation waits for its assignment.
func (g *group) validateOffsetCommit(req OffsetCommitRequest) ErrorCode {
	if g.state == Dead {
		return CoordinatorNotAvailable
	}
	if req.GenerationID < 0 && g.state == Empty {
		return None
	}
	if req.GenerationID >= 0 || req.MemberID != "" || req.GroupInstanceID != nil {
		if code := g.validateMember(req.MemberID, req.GroupInstanceID); code != None {
			return code
		}
		if req.GenerationID != g.generation {
			return IllegalGeneration
		}
	} else if g.state != Empty {
		return UnknownMemberID
	}
	if g.state == CompletingRebalance {
		return RebalanceInProgress
	}
	return None
}

// OffsetCommit handles an OffsetCommit. The commits are answered once
// durable; OffsetFetch returns them from then on.
func (c *Coordinator) OffsetCommit(nowMs int64, ref Ref, req OffsetCommitRequest) {
	c.advance(nowMs)
	resp := &OffsetCommitResponse{}
	for _, t := range req.Topics {
		tr := TopicResult{Name: t.Name}
		for _, p := range t.Partitions {
			tr.Partitions = append(tr.Partitions, PartitionResult{Partition: p.Partition})
		}
		resp.Topics = append(resp.Topics, tr)
	}
	code := c.unavailable()
	g := c.groups[req.GroupID]
	switch {
	case code != None:
	case g == nil && req.GenerationID < 0:
		// A simple consumer's first commit: the group appears when the
		// commit is replayed, as when loading.
	case g == nil && req.Version >= 9:
		code = GroupIDNotFound
	case g == nil:
		code = IllegalGeneration
	default:
		code = g.validateOffsetCommit(req)
	}
	if code != None {
		c.respond(ref, resp.withError(code))
		return
	}
	if g != nil && (g.state == Stable || g.state == PreparingRebalance) {
		// A classic member's commits keep its session.
		m := g.members[req.MemberID]
		c.rescheduleHeartbeat(g, m, int64(m.sessionTimeoutMs))
	}
	expire := int64(-1)
	if req.RetentionTimeMs != -1 && req.RetentionTimeMs != 0 {
		expire = c.nowMs + req.RetentionTimeMs
	}
	var records []Record
	var tps []topicPartition
	var values []OffsetAndMetadata
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			md := ""
			if p.Metadata != nil {
				md = *p.Metadata
			}
			if len(md) > c.cfg.OffsetMetadataMaxBytes {
				resp.Topics[i].Partitions[j].ErrorCode = OffsetMetadataTooLarge
				continue
			}
			tp := topicPartition{Topic: t.Name, Partition: p.Partition}
			o := OffsetAndMetadata{Offset: p.Offset, LeaderEpoch: max(p.LeaderEpoch, -1), Metadata: md, CommitTimestampMs: c.nowMs, ExpireTimestampMs: expire}
			records = append(records, EncodeOffsetCommit(req.GroupID, tp, &o))
			tps = append(tps, tp)
			values = append(values, o)
		}
	}
	if len(records) == 0 {
		c.respond(ref, resp)
		return
	}
	c.trackInflight(req.GroupID, tps, 1)
	c.emit(records, func() {
		c.trackInflight(req.GroupID, tps, -1)
		for i, tp := range tps {
			c.applyOffset(req.GroupID, tp, &values[i])
		}
		c.respond(ref, resp)
	}, func(code ErrorCode) {
		c.trackInflight(req.GroupID, tps, -1)
		c.respond(ref, resp.withError(code))
	})
}

// OffsetFetch answers one group of an OffsetFetch from the durable
// offsets.
func (c *Coordinator) OffsetFetch(req OffsetFetchRequest) OffsetFetchResponse {
	resp := OffsetFetchResponse{GroupID: req.GroupID}
	if code := c.unavailable(); code != None {
		resp.ErrorCode = code
		return resp
	}
	// Durable offsets only, also of a group being deleted (its
	// tombstones are not durable yet); none of a group that does not
	// exist (Kafka's GroupIdNotFoundException).
	var offsets map[topicPartition]OffsetAndMetadata
	if c.groups[req.GroupID] != nil {
		offsets = c.offsets[req.GroupID]
	}
	if req.Topics == nil {
		tps := slices.SortedFunc(maps.Keys(offsets), compareTP)
		for _, tp := range tps {
			if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Name != tp.Topic {
				resp.Topics = append(resp.Topics, FetchedTopic{Name: tp.Topic})
			}
			t := &resp.Topics[len(resp.Topics)-1]
			t.Partitions = append(t.Partitions, fetched(tp.Partition, offsets[tp], true))
		}
		return resp
	}
	for _, t := range req.Topics {
		ft := FetchedTopic{Name: t.Name}
		for _, p := range t.Partitions {
			o, ok := offsets[topicPartition{Topic: t.Name, Partition: p}]
			ft.Partitions = append(ft.Partitions, fetched(p, o, ok))
		}
		resp.Topics = append(resp.Topics, ft)
	}
	return resp
}

func fetched(p int32, o OffsetAndMetadata, ok bool) FetchedPartition {
	if !ok {
		return FetchedPartition{Partition: p, Offset: -1, LeaderEpoch: -1}
	}
	return FetchedPartition{Partition: p, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
}

// offsetKeys are the partitions with a durable or in-flight offset of the
// group, sorted.
func (c *Coordinator) offsetKeys(groupID string) []topicPartition {
	keys := map[topicPartition]bool{}
	for tp := range c.offsets[groupID] {
		keys[tp] = true
	}
	for tp := range c.inflight[groupID] {
		keys[tp] = true
	}
	return slices.SortedFunc(maps.Keys(keys), compareTP)
}

// OffsetDelete handles an OffsetDelete: offsets of topics the group does
// not consume are deleted (GROUP_SUBSCRIBED_TO_TOPIC for the others); a
// group with members other than consumers is NON_EMPTY_GROUP.
func (c *Coordinator) OffsetDelete(nowMs int64, ref Ref, req OffsetDeleteRequest) {
	c.advance(nowMs)
	if code := c.unavailable(); code != None {
		c.respond(ref, &OffsetDeleteResponse{ErrorCode: code})
		return
	}
	g := c.groups[req.GroupID]
	switch {
	case req.GroupID == "":
		c.respond(ref, &OffsetDeleteResponse{ErrorCode: InvalidGroupID})
		return
	case g == nil || g.state == Dead:
		c.respond(ref, &OffsetDeleteResponse{ErrorCode: GroupIDNotFound})
		return
	case g.state != Empty && !g.usesConsumerProtocol():
		c.respond(ref, &OffsetDeleteResponse{ErrorCode: NonEmptyGroup})
		return
	}
	resp := &OffsetDeleteResponse{}
	has := map[topicPartition]bool{}
	for _, tp := range c.offsetKeys(g.id) {
		has[tp] = true
	}
	var records []Record
	var tps []topicPartition
	for _, t := range req.Topics {
		tr := TopicResult{Name: t.Name}
		subscribed := g.isSubscribedToTopic(t.Name)
		for _, p := range t.Partitions {
			pr := PartitionResult{Partition: p}
			tp := topicPartition{Topic: t.Name, Partition: p}
			switch {
			case subscribed:
				pr.ErrorCode = GroupSubscribedToTopic
			case has[tp]:
				has[tp] = false // one tombstone per partition
				records = append(records, EncodeOffsetCommit(g.id, tp, nil))
				tps = append(tps, tp)
			}
			tr.Partitions = append(tr.Partitions, pr)
		}
		resp.Topics = append(resp.Topics, tr)
	}
	if len(records) == 0 {
		c.respond(ref, resp)
		return
	}
	c.trackInflight(g.id, tps, 1)
	c.emit(records, func() {
		c.trackInflight(g.id, tps, -1)
		for _, tp := range tps {
			c.applyOffset(g.id, tp, nil)
		}
		c.respond(ref, resp)
	}, func(code ErrorCode) {
		c.trackInflight(g.id, tps, -1)
		c.respond(ref, &OffsetDeleteResponse{ErrorCode: code})
	})
}

// deletion is a group being deleted: Dead until its tombstones are
// durable.
type deletion struct {
	g   *group
	tps []topicPartition
}

// startDeletion makes an Empty group Dead and returns its tombstones: its
// offsets' (durable or in flight), then its metadata's.
func (c *Coordinator) startDeletion(g *group) (deletion, []Record) {
	d := deletion{g: g, tps: c.offsetKeys(g.id)}
	var records []Record
	for _, tp := range d.tps {
		records = append(records, EncodeOffsetCommit(g.id, tp, nil))
	}
	records = append(records, EncodeGroupMetadata(g.id, nil))
	g.deletingFrom, g.deletingFromTs = g.state, g.stateTimestampMs
	g.transition(Dead, c.nowMs)
	c.trackInflight(g.id, d.tps, 1)
	return d, records
}

// finishDeletion applies a deletion's outcome: the group and its offsets
// are gone, or (failed) the group is back as it was.
func (c *Coordinator) finishDeletion(d deletion, durable bool) {
	c.trackInflight(d.g.id, d.tps, -1)
	if c.groups[d.g.id] != d.g || d.g.state != Dead {
		panic("group: " + d.g.id + " changed while being deleted")
	}
	if !durable {
		d.g.state, d.g.stateTimestampMs = d.g.deletingFrom, d.g.deletingFromTs
		return
	}
	for _, tp := range d.tps {
		c.applyOffset(d.g.id, tp, nil)
	}
	delete(c.groups, d.g.id)
	c.timers.cancel(joinKey(d.g.id))
	c.timers.cancel(syncKey(d.g.id))
}

// DeleteGroups handles a DeleteGroups: each Empty group's offsets and
// metadata get tombstones; a group with members is NON_EMPTY_GROUP.
func (c *Coordinator) DeleteGroups(nowMs int64, ref Ref, groupIDs []string) {
	c.advance(nowMs)
	resp := &DeleteGroupsResponse{}
	var deletions []deletion
	var records []Record
	for _, id := range groupIDs {
		code := c.unavailable()
		g := c.groups[id]
		switch {
		case code != None:
		case id == "":
			code = InvalidGroupID
		case g == nil || g.state == Dead:
			code = GroupIDNotFound
		case g.state != Empty:
			code = NonEmptyGroup
		default:
			d, rs := c.startDeletion(g)
			deletions = append(deletions, d)
			records = append(records, rs...)
		}
		resp.Results = append(resp.Results, DeletedGroup{GroupID: id, ErrorCode: code})
	}
	if len(records) == 0 {
		c.respond(ref, resp)
		return
	}
	c.emit(records, func() {
		for _, d := range deletions {
			c.finishDeletion(d, true)
		}
		c.respond(ref, resp)
	}, func(code ErrorCode) {
		for _, d := range deletions {
			c.finishDeletion(d, false)
		}
		for i := range resp.Results {
			if resp.Results[i].ErrorCode == None {
				resp.Results[i].ErrorCode = code
			}
		}
		c.respond(ref, resp)
	})
}

// cleanup is the periodic offsets expiration (Kafka's
// cleanupGroupMetadata): expired offsets of topics a group does not
// consume get tombstones, and an Empty group left without offsets is
// deleted.
func (c *Coordinator) cleanup() {
	c.timers.schedule(timerKey{kind: timerCleanup}, c.nowMs+c.cfg.OffsetsRetentionCheckIntervalMs)
	var records []Record
	var expired []topicPartition
	var expiredGroups []string
	var deletions []deletion
	for _, id := range sortedKeys(c.groups) {
		g := c.groups[id]
		if g.state == Dead {
			continue
		}
		all := true
		if len(c.inflight[id]) > 0 {
			all = false // a commit on its way keeps the group
		}
		if os := c.offsets[id]; len(os) > 0 {
			for _, tp := range slices.SortedFunc(maps.Keys(os), compareTP) {
				if g.isSubscribedToTopic(tp.Topic) || c.inflight[id][tp] > 0 {
					all = false
					continue
				}
				base, ok := g.expiryBase(os[tp])
				if !ok {
					all = false
					break
				}
				o := os[tp]
				if (o.ExpireTimestampMs >= 0 && c.nowMs >= o.ExpireTimestampMs) ||
					(o.ExpireTimestampMs < 0 && c.nowMs-base >= c.cfg.OffsetsRetentionMs) {
					records = append(records, EncodeOffsetCommit(id, tp, nil))
					expired = append(expired, tp)
					expiredGroups = append(expiredGroups, id)
				} else {
					all = false
				}
			}
		}
		if all && g.state == Empty {
			d, rs := c.startDeletion(g)
			// Its offsets' tombstones are above already.
			c.trackInflight(id, d.tps, -1)
			d.tps = nil
			deletions = append(deletions, d)
			records = append(records, rs[len(rs)-1])
		}
	}
	if len(records) == 0 {
		return
	}
	track := func(d int) {
		for i, tp := range expired {
			c.trackInflight(expiredGroups[i], []topicPartition{tp}, d)
		}
	}
	track(1)
	c.emit(records, func() {
		track(-1)
		for i, tp := range expired {
			c.applyOffset(expiredGroups[i], tp, nil)
		}
		for _, d := range deletions {
			c.finishDeletion(d, true)
		}
	}, func(ErrorCode) {
		track(-1)
		for _, d := range deletions {
			c.finishDeletion(d, false)
		}
	})
}

// ListGroups lists the groups, filtered by state and type
// (case-insensitive), sorted by group id. Groups being deleted are not
// listed.
func (c *Coordinator) ListGroups(req ListGroupsRequest) ListGroupsResponse {
	if code := c.unavailable(); code != None {
		return ListGroupsResponse{ErrorCode: code}
	}
	in := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(strings.TrimSpace(f), v) {
				return true
			}
		}
		return false
	}
	resp := ListGroupsResponse{Groups: []ListedGroup{}}
	for _, id := range sortedKeys(c.groups) {
		g := c.groups[id]
		if g.state == Dead || !in(req.StatesFilter, g.state.String()) || !in(req.TypesFilter, "classic") {
			continue
		}
		resp.Groups = append(resp.Groups, ListedGroup{GroupID: id, ProtocolType: g.protocolType, GroupState: g.state.String(), GroupType: "classic"})
	}
	return resp
}

// DescribeGroups describes groups: members with their metadata and
// assignment in a Stable group, their assignment only otherwise; a group
// the coordinator does not hold is Dead (no error, as Kafka answers).
func (c *Coordinator) DescribeGroups(groupIDs []string) []DescribedGroup {
	out := make([]DescribedGroup, 0, len(groupIDs))
	for _, id := range groupIDs {
		d := DescribedGroup{GroupID: id, Members: []DescribedMember{}}
		g := c.groups[id]
		switch code := c.unavailable(); {
		case code != None:
			d.ErrorCode = code
		case id == "":
			d.ErrorCode = InvalidGroupID
		case g == nil || g.state == Dead:
			d.GroupState = Dead.String()
		default:
			d.GroupState = g.state.String()
			d.ProtocolType = g.protocolType
			stable := g.state == Stable && g.protocolName != nil
			if stable {
				d.ProtocolData = *g.protocolName
			}
			for _, m := range g.sortedMembers() {
				dm := DescribedMember{MemberID: m.id, GroupInstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost, MemberAssignment: m.assignment}
				if stable {
					dm.MemberMetadata = m.metadata(*g.protocolName)
				}
				d.Members = append(d.Members, dm)
			}
		}
		out = append(out, d)
	}
	return out
}
