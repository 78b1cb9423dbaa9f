package metastate

import (
	"fmt"
	"maps"
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"google.golang.org/protobuf/proto"
)

// MirrorOp is an operator request on mirror topics (SPEC §6.5).
type MirrorOp uint8

// Mirror operations.
const (
	MirrorStart MirrorOp = iota + 1
	MirrorStop
	MirrorPause
	MirrorResume
)

const (
	mirrorMirroring = twinlogv1.MirrorState_MIRROR_STATE_MIRRORING
	mirrorPaused    = twinlogv1.MirrorState_MIRROR_STATE_PAUSED
	mirrorStopped   = twinlogv1.MirrorState_MIRROR_STATE_STOPPED
)

// CreateMirror defines a mirror (SPEC §6.1) with the source cluster id the
// shell resolved, creates the __mirror_state topic at the first mirror
// (SPEC §6.4) and starts the listed topics, which must exist locally.
func (s *State) CreateMirror(req *twinlogv1.CreateMirrorRequest, sourceClusterID string) (*twinlogv1.MetadataDelta, *twinlogv1.CreateMirrorResponse) {
	resp := &twinlogv1.CreateMirrorResponse{}
	t := s.view()
	switch {
	case ValidateTopicName(req.GetName()) != nil:
		resp.Error, resp.ErrorMessage = ecInvalid, fmt.Sprintf("invalid mirror name: %v", ValidateTopicName(req.GetName()))
		return nil, resp
	case t.mirror(req.GetName()) != nil:
		resp.Error, resp.ErrorMessage = twinlogv1.ErrorCode_ERROR_CODE_MIRROR_ALREADY_EXISTS, "mirror exists"
		return nil, resp
	case len(req.GetSourceBootstrap()) == 0:
		resp.Error, resp.ErrorMessage = ecInvalid, "no source bootstrap addresses"
		return nil, resp
	}
	if t.topic(mirrorStateTopic) == nil {
		rf := min(int(atoi(t.clusterConfigValue(KeyMirrorStateReplication), defaultMirrorTopicReplication)), t.acceptableCount())
		n := int(atoi(t.clusterConfigValue(KeyMirrorStateNumPartitions), 1))
		assign, err := t.placement(n, rf)
		if err != nil {
			resp.Error, resp.ErrorMessage = twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR, "cannot place "+mirrorStateTopic+": "+err.Error()
			return nil, resp
		}
		t.createTopic(mirrorStateTopic, t.newTopicID(), assign, map[string]string{
			KeyMinInsyncReplicas:       fmt.Sprint(min(2, rf)),
			KeyUncleanRecoveryStrategy: StrategyNone,
		}, true)
	}
	t.putMirror(&twinlogv1.MirrorRecord{Name: req.GetName(), SourceBootstrap: slices.Clone(req.GetSourceBootstrap()), SourceClusterId: sourceClusterID})
	resp.Topics = t.mirrorOp(req.GetName(), req.GetTopics(), MirrorStart, nil)
	return t.delta(), resp
}

func (t *txn) acceptableCount() int {
	n := 0
	for _, id := range t.brokerIDs() {
		if t.acceptable(id) {
			n++
		}
	}
	return n
}

// DeleteMirror removes a mirror whose topics are all STOPPED (SPEC §6.5);
// its topics keep once_mirrored.
func (s *State) DeleteMirror(req *twinlogv1.DeleteMirrorRequest) (*twinlogv1.MetadataDelta, *twinlogv1.DeleteMirrorResponse) {
	t := s.view()
	m := t.mirror(req.GetName())
	if m == nil {
		return nil, &twinlogv1.DeleteMirrorResponse{Error: twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MIRROR, ErrorMessage: "unknown mirror"}
	}
	for _, mt := range m.GetTopics() {
		if mt.GetDesiredState() != mirrorStopped {
			return nil, &twinlogv1.DeleteMirrorResponse{Error: ecInvalid, ErrorMessage: fmt.Sprintf("topic %q is not STOPPED", mt.GetTopic())}
		}
		if tr := t.topic(mt.GetTopic()); tr != nil && tr.GetMirrorName() == m.GetName() {
			n := cloneT(tr)
			n.MirrorName = ""
			t.putTopic(n)
		}
	}
	t.removeMirror(m.GetName())
	return t.delta(), &twinlogv1.DeleteMirrorResponse{}
}

// SetMirrorTopicsDesiredState applies Start/Stop/Pause/Resume to topics of a
// mirror (SPEC §6.5): Start from new, STOPPED or a (retried) MIRRORING
// desired state, generation + 1; Pause only from MIRRORING; Resume only from
// PAUSED; Stop from anything but STOPPED; otherwise INVALID_REQUEST. A non-empty
// sourceBootstrap re-points the mirror (failback).
func (s *State) SetMirrorTopicsDesiredState(mirror string, topics []string, op MirrorOp, sourceBootstrap []string) (*twinlogv1.MetadataDelta, []*twinlogv1.MirrorTopicResult) {
	t := s.view()
	if t.mirror(mirror) == nil {
		var out []*twinlogv1.MirrorTopicResult
		for _, n := range topics {
			out = append(out, &twinlogv1.MirrorTopicResult{Topic: n, Error: twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MIRROR})
		}
		return nil, out
	}
	out := t.mirrorOp(mirror, topics, op, sourceBootstrap)
	return t.delta(), out
}

func (t *txn) mirrorOp(mirror string, topics []string, op MirrorOp, bootstrap []string) []*twinlogv1.MirrorTopicResult {
	m := proto.Clone(t.mirror(mirror)).(*twinlogv1.MirrorRecord)
	if len(bootstrap) > 0 {
		m.SourceBootstrap = slices.Clone(bootstrap)
	}
	byName := map[string]*twinlogv1.MirrorTopicRecord{}
	for _, mt := range m.GetTopics() {
		byName[mt.GetTopic()] = mt
	}
	var out []*twinlogv1.MirrorTopicResult
	for _, name := range topics {
		res := &twinlogv1.MirrorTopicResult{Topic: name}
		out = append(out, res)
		tr := t.topic(name)
		fail := func(ec twinlogv1.ErrorCode, msg string) { res.Error, res.ErrorMessage = ec, msg }
		if tr == nil {
			fail(ecUnknown, "unknown topic")
			continue
		}
		if tr.GetInternal() {
			fail(ecInvalid, "internal topics cannot be mirrored")
			continue
		}
		if tr.GetMirrorName() != "" && tr.GetMirrorName() != mirror {
			fail(ecInvalid, "topic belongs to mirror "+tr.GetMirrorName())
			continue
		}
		mt := byName[name]
		cur := twinlogv1.MirrorState_MIRROR_STATE_UNSPECIFIED
		if mt != nil {
			cur = mt.GetDesiredState()
		}
		next := cur
		switch op {
		case MirrorStart:
			if cur == mirrorPaused {
				fail(twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_STATE, "paused: resume instead")
				continue
			}
			next = mirrorMirroring
		case MirrorStop:
			if mt == nil || cur == mirrorStopped {
				fail(twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_STATE, "already stopped")
				continue
			}
			next = mirrorStopped
		case MirrorPause:
			if cur != mirrorMirroring {
				fail(twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_STATE, "pause only from MIRRORING")
				continue
			}
			next = mirrorPaused
		case MirrorResume:
			if cur != mirrorPaused {
				fail(twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_STATE, "resume only from PAUSED")
				continue
			}
			next = mirrorMirroring
		default:
			fail(ecInvalid, "unknown mirror operation")
			continue
		}
		if mt == nil {
			mt = &twinlogv1.MirrorTopicRecord{Topic: name}
			byName[name] = mt
		}
		mt.DesiredState = next
		if op == MirrorStart {
			mt.Generation++
		}
		n := cloneT(tr)
		n.MirrorName = mirror
		n.OnceMirrored = true
		t.putTopic(n)
	}
	m.Topics = nil
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		m.Topics = append(m.Topics, byName[n])
	}
	t.putMirror(m)
	return out
}
