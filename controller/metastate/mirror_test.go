package metastate

import (
	"slices"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// source is cluster id as its brokers' Metadata describes it, with the
// space derived from the id ("": no broker answered).
func source(id string) SourceCluster {
	if id == "" {
		return SourceCluster{}
	}
	return SourceCluster{ID: id, ProducerIDSpace: metadata.DerivedProducerIDSpace(id)}
}

func TestMirrorDesiredStates(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, nil, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
	d, resp := h.s.CreateMirror(&twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"a:1"}, Topics: []string{"t"}}, source("A"),
		map[string]SourceTopic{"t": {TopicID: "tid", Partitions: 1}})
	h.apply(d, false)
	if resp.GetError() != ecNone || resp.GetTopics()[0].GetError() != ecNone {
		t.Fatal(resp)
	}
	st := h.s.Topic(mirrorStateTopic)
	if st == nil || !st.GetInternal() || h.s.TopicConfig(mirrorStateTopic, metadata.KeyMinInsyncReplicas) != "2" || h.s.UncleanStrategy(mirrorStateTopic) != metadata.StrategyNone {
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
	if ec := op(MirrorResume); ec != ecInvalid {
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
	if ec := op(MirrorStop); ec != ecInvalid {
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

// SPEC §6.1, §6.3: mirror topics take the source's name, topic id,
// partition count and mirrored configs (metadata.MirroredTopicConfigs).
func TestStartMirrorTopicsFromSource(t *testing.T) {
	const inconsistent = twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID
	for _, tc := range []struct {
		name   string
		local  *twinlogv1.TopicRecord // besides "t" (tid, 1 partition); nil: none
		src    SourceTopic
		want   twinlogv1.ErrorCode
		parts  int32  // local partition count afterwards (0: no topic)
		wantID string // local topic id afterwards
	}{
		{name: "created from source", src: SourceTopic{Name: "s", TopicID: "sid", Partitions: 3, Configs: map[string]string{
			metadata.KeyMirrorSupportUnclean: "true", metadata.KeyMinInsyncReplicas: "2", metadata.KeyUncleanLeaderElection: "true",
			metadata.KeyUncleanRecoveryStrategy: metadata.StrategyNone, "nope": "x", metadata.KeyMirrorStateNumPartitions: "3", metadata.KeyEligibleLeaderReplicas: "true"}},
			parts: 3, wantID: "sid"},
		{name: "created from source, invalid mirrored value", src: SourceTopic{Name: "v", TopicID: "vid", Partitions: 1, Configs: map[string]string{
			metadata.KeyMirrorSupportUnclean: "maybe"}}, parts: 1, wantID: "vid"},
		{name: "source configs unreadable: not created", src: SourceTopic{Name: "s", TopicID: "sid", Partitions: 1, ConfigsErr: "unavailable"},
			want: twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE},
		{name: "source configs unreadable: existing topic starts", src: SourceTopic{Name: "t", TopicID: "tid", Partitions: 2, ConfigsErr: "unavailable"},
			parts: 2, wantID: "tid"},
		{name: "existing same id gets new partitions", src: SourceTopic{Name: "t", TopicID: "tid", Partitions: 3}, parts: 3, wantID: "tid"},
		{name: "existing same id, fewer source partitions", src: SourceTopic{Name: "t", TopicID: "tid", Partitions: 1}, parts: 1, wantID: "tid"},
		{name: "never mirrored, other id", src: SourceTopic{Name: "t", TopicID: "other", Partitions: 1}, want: inconsistent, parts: 1, wantID: "tid"},
		{name: "once mirrored, other id", local: &twinlogv1.TopicRecord{Name: "o", TopicId: "oid", PartitionCount: 0, OnceMirrored: true},
			src: SourceTopic{Name: "o", TopicID: "other", Partitions: 1}, want: inconsistent, wantID: "oid"},
		{name: "source id used by another local topic", src: SourceTopic{Name: "s", TopicID: "tid", Partitions: 1}, want: inconsistent},
		{name: "internal topic", local: &twinlogv1.TopicRecord{Name: "i", TopicId: "iid", Internal: true},
			src: SourceTopic{Name: "i", TopicID: "iid", Partitions: 2}, want: ecInvalid, wantID: "iid"},
		{name: "bad source description", src: SourceTopic{Name: "s", TopicID: "", Partitions: 1}, want: ecInvalid},
		{name: "invalid name", src: SourceTopic{Name: "a/b", TopicID: "x", Partitions: 1}, want: twinlogv1.ErrorCode_ERROR_CODE_INVALID_TOPIC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := seeded(t, ids(1, 2, 3), nil, nil, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
			if tc.local != nil {
				snap := h.s.Snapshot()
				snap.Topics = append(snap.Topics, tc.local)
				h = &harness{t: t, s: FromSnapshot(snap, Config{ClusterID: "a"})}
				h.base = h.s.Snapshot()
			}
			d, resp := h.s.CreateMirror(&twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"a:1"}},
				source("A"), nil)
			h.apply(d, false)
			if resp.GetError() != ecNone {
				t.Fatal(resp)
			}
			d, res := h.s.StartMirrorTopics("m", []string{tc.src.Name}, nil, source("A"), map[string]SourceTopic{tc.src.Name: tc.src})
			h.apply(d, false)
			if res[0].GetError() != tc.want {
				t.Fatalf("result %v, want %v", res[0], tc.want)
			}
			tr := h.s.Topic(tc.src.Name)
			if tc.wantID == "" {
				if tr != nil {
					t.Fatalf("topic created: %v", tr)
				}
				return
			}
			if tr.GetTopicId() != tc.wantID || tr.GetPartitionCount() != tc.parts {
				t.Fatalf("topic %v, want id %s, %d partitions", tr, tc.wantID, tc.parts)
			}
			if tc.want != ecNone {
				if tr.GetMirrorName() != "" {
					t.Fatalf("refused topic joined the mirror: %v", tr)
				}
				return
			}
			if tr.GetMirrorName() != "m" || !tr.GetOnceMirrored() {
				t.Fatalf("topic %v not in the mirror", tr)
			}
			switch tc.src.Name {
			case "s":
				// Only valid metadata.MirroredTopicConfigs are copied: min ISR and
				// the unclean election settings stay local.
				if len(tr.GetConfigs()) != 1 || tr.GetConfigs()[metadata.KeyMirrorSupportUnclean] != "true" {
					t.Fatalf("configs %v", tr.GetConfigs())
				}
			case "v":
				if len(tr.GetConfigs()) != 0 {
					t.Fatalf("invalid value copied: %v", tr.GetConfigs())
				}
			case "t":
				if len(tr.GetConfigs()) != 0 {
					t.Fatalf("existing topic's configs changed: %v", tr.GetConfigs())
				}
			}
			for i := range tr.GetPartitionCount() {
				p := h.s.Partition(tc.src.Name, i)
				if p == nil || len(p.GetReplicas()) != 3 || p.GetLeader() == noBroker {
					t.Fatalf("partition %d: %v", i, p)
				}
			}
			// Desired MIRRORING: not writable (read-only) until STOPPED.
			if mt := h.s.Mirror("m").GetTopics(); len(mt) != 1 || mt[0].GetDesiredState() != mirrorMirroring {
				t.Fatalf("mirror topics %v", mt)
			}
		})
	}
}

// CreateMirror creates listed topics from the source and __mirror_state per
// SPEC §6.4 with the static configs written at first start.
func TestCreateMirrorFromSourceAndStateTopic(t *testing.T) {
	h := newHarness(t)
	d, err := h.s.InitialClusterConfigs(map[string]string{metadata.KeyMirrorStateReplication: "5", metadata.KeyMirrorStateNumPartitions: "4"})
	if err != nil {
		t.Fatal(err)
	}
	h.apply(d, false)
	for _, b := range ids(1, 2) {
		h.register(b, false)
		h.unfence(b)
	}
	d, resp := h.s.CreateMirror(&twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"a:1"}, Topics: []string{"s"}},
		source("A"), map[string]SourceTopic{"s": {Name: "s", TopicID: "sid", Partitions: 2}})
	h.apply(d, false)
	if resp.GetError() != ecNone || resp.GetTopics()[0].GetError() != ecNone {
		t.Fatal(resp)
	}
	st := h.s.Topic(mirrorStateTopic)
	if !st.GetInternal() || st.GetPartitionCount() != 4 || len(h.s.Partition(mirrorStateTopic, 0).GetReplicas()) != 2 ||
		h.s.TopicConfig(mirrorStateTopic, metadata.KeyMinInsyncReplicas) != "2" || h.s.UncleanStrategy(mirrorStateTopic) != metadata.StrategyNone {
		t.Fatalf("state topic %v", st)
	}
	if tr := h.s.Topic("s"); tr.GetTopicId() != "sid" || tr.GetPartitionCount() != 2 || len(h.s.Partition("s", 0).GetReplicas()) != 2 {
		t.Fatalf("mirror topic %v", tr)
	}
	if got := h.s.MirrorNames(); len(got) != 1 || got[0] != "m" {
		t.Fatal(got)
	}
	// A second mirror reuses the state topic.
	d, _ = h.s.CreateMirror(&twinlogv1.CreateMirrorRequest{Name: "a", SourceBootstrap: []string{"a:1"}}, source("A"), nil)
	h.apply(d, false)
	if got := h.s.MirrorNames(); len(got) != 2 || got[0] != "a" || h.s.Topic(mirrorStateTopic).GetTopicId() != st.GetTopicId() {
		t.Fatal(got)
	}
}

// SPEC §6.5: a transition from the wrong state is INVALID_REQUEST.
func TestMirrorWrongStateIsInvalidRequest(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, nil, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
	d, _ := h.s.CreateMirror(&twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"a:1"}}, source("A"), nil)
	h.apply(d, false)
	d, res := h.s.StartMirrorTopics("m", []string{"t"}, nil, source("A"), map[string]SourceTopic{"t": {TopicID: "tid", Partitions: 1}})
	h.apply(d, false)
	if res[0].GetError() != ecNone {
		t.Fatal(res[0])
	}
	d, _ = h.s.SetMirrorTopicsDesiredState("m", []string{"t"}, MirrorStop, nil)
	h.apply(d, false)
	for _, tc := range []struct {
		op   MirrorOp
		want twinlogv1.ErrorCode
	}{
		{MirrorPause, ecInvalid}, // STOPPED
		{MirrorResume, ecInvalid},
		{MirrorStop, ecInvalid},
		{MirrorStart, ecNone},
		{MirrorResume, ecInvalid}, // MIRRORING
		{MirrorPause, ecNone},
		{MirrorPause, ecInvalid}, // PAUSED
		{MirrorStart, ecInvalid},
		{MirrorResume, ecNone},
		{MirrorStop, ecNone},
		{MirrorStop, ecInvalid}, // STOPPED
		{MirrorPause, ecInvalid},
		{MirrorResume, ecInvalid},
	} {
		d, res := h.s.SetMirrorTopicsDesiredState("m", []string{"t"}, tc.op, nil)
		h.apply(d, false)
		if res[0].GetError() != tc.want {
			t.Fatalf("op %d: %v, want %v", tc.op, res[0], tc.want)
		}
		if tc.want != ecNone && d != nil {
			t.Fatalf("op %d refused but wrote %v", tc.op, d)
		}
	}
}

// A mirror never starts over a local topic that is not the source's: a
// topic the source lacks is UNKNOWN_TOPIC_OR_PARTITION, one it could not
// describe BROKER_NOT_AVAILABLE (retriable), a local topic with another id
// INCONSISTENT_TOPIC_ID. CreateMirror is all or nothing: with any topic
// refused there is no mirror, no topic change and no __mirror_state; a
// Start without a source description only restarts members (issue 13: a
// mistyped `mirrors create` emptied the local topic "orders").
func TestMirrorRefusesWhatWouldDestroyData(t *testing.T) {
	tid := SourceTopic{TopicID: "tid", Partitions: 1}
	for _, tc := range []struct {
		name    string
		topics  []string
		sources map[string]SourceTopic
		want    twinlogv1.ErrorCode
	}{
		{"source lacks the topic, local topic exists", []string{"t"},
			map[string]SourceTopic{"t": {Missing: true}}, ecUnknown},
		{"source lacks the topic, none here", []string{"x"},
			map[string]SourceTopic{"x": {Missing: true}}, ecUnknown},
		{"source unreachable", []string{"t"}, nil, twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE},
		{"topic not described", []string{"t", "s"}, map[string]SourceTopic{"s": {TopicID: "sid", Partitions: 1}},
			twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE},
		{"never-mirrored local topic, other id", []string{"t"},
			map[string]SourceTopic{"t": {TopicID: "other", Partitions: 1}}, twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID},
		{"one good, one missing: all or nothing", []string{"s", "gone"},
			map[string]SourceTopic{"s": {TopicID: "sid", Partitions: 2}, "gone": {Missing: true}}, ecUnknown},
		{"same id (failback) is fine", []string{"t"}, map[string]SourceTopic{"t": tid}, ecNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := seeded(t, ids(1, 2, 3), nil, nil, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
			before := h.s.Snapshot()
			d, resp := h.s.CreateMirror(&twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"a:1"}, Topics: tc.topics}, source("A"), tc.sources)
			if resp.GetError() != tc.want {
				t.Fatalf("CreateMirror = %v, want %v", resp, tc.want)
			}
			if tc.want == ecNone {
				if d == nil || resp.GetTopics()[0].GetError() != ecNone {
					t.Fatalf("CreateMirror = %v, %v", d, resp)
				}
				return
			}
			if d != nil {
				t.Fatalf("refused CreateMirror wrote %v", d)
			}
			if resp.GetErrorMessage() == "" || len(resp.GetTopics()) != len(tc.topics) {
				t.Fatalf("refusal without per-topic results: %v", resp)
			}
			if h.s.Mirror("m") != nil || h.s.Topic(mirrorStateTopic) != nil || h.s.Topic("s") != nil || h.s.Topic("x") != nil {
				t.Fatal("refused CreateMirror left a mirror, __mirror_state or a topic behind")
			}
			if tr := h.s.Topic("t"); tr.GetMirrorName() != "" || tr.GetOnceMirrored() || tr.GetTopicId() != "tid" {
				t.Fatalf("local topic changed: %v", tr)
			}
			if got := h.s.Snapshot(); len(got.GetTopics()) != len(before.GetTopics()) || len(got.GetMirrors()) != 0 {
				t.Fatalf("state changed: %v", got)
			}

			// The same through StartMirrorTopics on an existing mirror:
			// the refused topic changes nothing.
			d, _ = h.s.CreateMirror(&twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"a:1"}}, source("A"), nil)
			h.apply(d, false)
			id := "A" // the re-pointed addresses are cluster A's
			if tc.sources == nil {
				id = "" // unreachable
			}
			d, res := h.s.StartMirrorTopics("m", tc.topics, []string{"elsewhere:1"}, source(id), tc.sources)
			if len(tc.topics) == 1 && d != nil {
				t.Fatalf("StartMirrorTopics with its only topic refused wrote %v", d)
			}
			var refused bool
			for _, r := range res {
				refused = refused || r.GetError() == tc.want
			}
			if !refused {
				t.Fatalf("StartMirrorTopics = %v, want a %v", res, tc.want)
			}
			h.apply(d, false)
			if tr := h.s.Topic("t"); tr.GetMirrorName() != "" || tr.GetOnceMirrored() {
				t.Fatalf("local topic joined the mirror: %v", tr)
			}
			if h.s.Topic("x") != nil || h.s.Topic("gone") != nil {
				t.Fatal("topic the source lacks was created")
			}
			// Start without a description restarts members only.
			_, res = h.s.SetMirrorTopicsDesiredState("m", []string{"t"}, MirrorStart, nil)
			if res[0].GetError() != ecInvalid {
				t.Fatalf("blind Start of a non-member = %v", res[0])
			}
		})
	}
}

// TestMirrorRepointOtherClusterRefused: StartMirrorTopics with new source
// addresses re-points the mirror only if they answer the mirror's source
// cluster; another cluster is INVALID_REQUEST, unreachable new addresses
// BROKER_NOT_AVAILABLE, and either way nothing changes (issue 13: the LMLE
// records name the source cluster; before, the addresses were replaced and
// the old cluster id kept).
func TestMirrorRepointOtherClusterRefused(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, nil, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 0, 0))
	src := map[string]SourceTopic{"t": {TopicID: "tid", Partitions: 1}}
	d, resp := h.s.CreateMirror(&twinlogv1.CreateMirrorRequest{Name: "m", SourceBootstrap: []string{"a:1"}, Topics: []string{"t"}}, source("A"), src)
	h.apply(d, false)
	if resp.GetError() != ecNone {
		t.Fatal(resp)
	}
	d, _ = h.s.SetMirrorTopicsDesiredState("m", []string{"t"}, MirrorStop, nil)
	h.apply(d, false)
	gen := h.s.Mirror("m").GetTopics()[0].GetGeneration()

	unchanged := func(t *testing.T) {
		t.Helper()
		m := h.s.Mirror("m")
		if !slices.Equal(m.GetSourceBootstrap(), []string{"a:1"}) || m.GetSourceClusterId() != "A" ||
			m.GetTopics()[0].GetDesiredState() != mirrorStopped || m.GetTopics()[0].GetGeneration() != gen {
			t.Fatalf("mirror changed: %v", m)
		}
	}
	for _, tc := range []struct {
		name      string
		topics    []string
		bootstrap []string
		id        string
		want      twinlogv1.ErrorCode
		msg       string
	}{
		{"another cluster", []string{"t"}, []string{"c:1"}, "C", ecInvalid,
			"the mirror's source is cluster A; the new addresses [c:1] answer cluster C: create a new mirror"},
		{"another cluster, no topics", nil, []string{"c:1"}, "C", ecInvalid,
			"the mirror's source is cluster A; the new addresses [c:1] answer cluster C: create a new mirror"},
		{"new addresses unreachable", []string{"t"}, []string{"c:1"}, "", twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE, ""},
		{"old addresses now answer another cluster", []string{"t"}, nil, "C", ecInvalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, res := h.s.StartMirrorTopics("m", tc.topics, tc.bootstrap, source(tc.id), src)
			if d != nil {
				t.Fatalf("refused re-point wrote %v", d)
			}
			if len(res) != max(1, len(tc.topics)) {
				t.Fatalf("results %v", res)
			}
			for _, r := range res {
				if r.GetError() != tc.want || r.GetErrorMessage() == "" || (tc.msg != "" && r.GetErrorMessage() != tc.msg) {
					t.Fatalf("result %v, want %v %q", r, tc.want, tc.msg)
				}
			}
			unchanged(t)
		})
	}
	// Re-pointing through the metadata API without a cluster id is refused.
	if d, res := h.s.SetMirrorTopicsDesiredState("m", []string{"t"}, MirrorStart, []string{"c:1"}); d != nil || res[0].GetError() != ecInvalid {
		t.Fatalf("SetMirrorTopicsDesiredState re-point = %v, %v", d, res)
	}
	unchanged(t)

	// New addresses of the same cluster: the addresses are updated.
	d, res := h.s.StartMirrorTopics("m", []string{"t"}, []string{"a:2", "a:3"}, source("A"), src)
	if res[0].GetError() != ecNone || d == nil {
		t.Fatalf("same-cluster re-point = %v", res)
	}
	h.apply(d, false)
	if m := h.s.Mirror("m"); !slices.Equal(m.GetSourceBootstrap(), []string{"a:2", "a:3"}) || m.GetSourceClusterId() != "A" ||
		m.GetTopics()[0].GetDesiredState() != mirrorMirroring {
		t.Fatalf("mirror %v", m)
	}
}
