package metastate

import (
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

func TestMirrorDesiredStates(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, nil, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
	d, resp := h.s.CreateMirror(&twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"a:1"}, Topics: []string{"t", "nope"}}, "A")
	h.apply(d, false)
	if resp.GetError() != ecNone || resp.GetTopics()[0].GetError() != ecNone || resp.GetTopics()[1].GetError() != ecUnknown {
		t.Fatal(resp)
	}
	st := h.s.Topic(mirrorStateTopic)
	if st == nil || !st.GetInternal() || h.s.TopicConfig(mirrorStateTopic, KeyMinInsyncReplicas) != "2" || h.s.UncleanStrategy(mirrorStateTopic) != StrategyNone {
		t.Fatalf("mirror state topic %v", st)
	}
	if tr := h.s.Topic("t"); tr.GetMirrorName() != "m" || !tr.GetOnceMirrored() {
		t.Fatal(tr)
	}
	mt := func() *twinlogv1.MirrorTopicRecord { return h.s.Mirror("m").GetTopics()[0] }
	if mt().GetDesiredState() != mirrorMirroring || mt().GetGeneration() != 1 {
		t.Fatal(mt())
	}
	op := func(o MirrorOp) twinlogv1.ErrorCode {
		d, res := h.s.SetMirrorTopicsDesiredState("m", []string{"t"}, o, nil)
		h.apply(d, false)
		return res[0].GetError()
	}
	if ec := op(MirrorResume); ec != twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_STATE {
		t.Fatal(ec)
	}
	if d, dr := h.s.DeleteMirror(&twinlogv1.DeleteMirrorRequest{Name: "m"}); d != nil || dr.GetError() != ecInvalid {
		t.Fatal(dr)
	}
	for _, o := range []MirrorOp{MirrorPause, MirrorResume, MirrorStop} {
		if ec := op(o); ec != ecNone {
			t.Fatal(o, ec)
		}
	}
	if ec := op(MirrorStop); ec != twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_STATE {
		t.Fatal(ec)
	}
	if ec := op(MirrorStart); ec != ecNone || mt().GetGeneration() != 2 {
		t.Fatal(ec, mt())
	}
	op(MirrorStop)
	if _, dr := h.s.DeleteTopics(&twinlogv1.DeleteTopicsRequest{Names: []string{"t"}}); dr.GetTopics()[0].GetError() != ecInvalid {
		t.Fatal(dr)
	}
	d, dr := h.s.DeleteMirror(&twinlogv1.DeleteMirrorRequest{Name: "m"})
	h.apply(d, false)
	if dr.GetError() != ecNone || h.s.Mirror("m") != nil || h.s.Topic("t").GetMirrorName() != "" || !h.s.Topic("t").GetOnceMirrored() {
		t.Fatal(dr, h.s.Topic("t"))
	}
}
