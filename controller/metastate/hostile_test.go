package metastate

import (
	"math"
	"strings"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// Hostile and mistaken requests (issue 13): each is refused with a clear
// error and changes nothing.

// markOnceMirrored rewrites the image so that the named topics were mirror
// topics once (BumpLeaderEpoch needs it) and restarts the harness' replay
// base there.
func markOnceMirrored(h *harness, topics ...string) {
	snap := h.s.Snapshot()
	for _, tr := range snap.GetTopics() {
		for _, n := range topics {
			if tr.GetName() == n {
				tr.OnceMirrored = true
			}
		}
	}
	h.s.Restore(snap)
	h.base = h.s.Snapshot()
	h.deltas = nil
}

func (h *harness) bumpReq(minLE int32, off int64) *twinlogv1.BumpLeaderEpochRequest {
	p := h.p(0)
	return &twinlogv1.BumpLeaderEpochRequest{BrokerId: p.GetLeader(), BrokerEpoch: h.epoch(p.GetLeader()), Topic: "t",
		LeaderEpoch: p.GetLeaderEpoch(), MinLeaderEpoch: minLE, TruncationOffset: off}
}

// refused asserts a command was refused with ec and wrote nothing.
func refused(t *testing.T, what string, d *twinlogv1.MetadataDelta, got, want twinlogv1.ErrorCode, msg string) {
	t.Helper()
	if got != want || d != nil {
		t.Fatalf("%s: error %v (%s), delta %v; want %v and no delta", what, got, msg, d, want)
	}
	if msg == "" {
		t.Fatalf("%s: refused without a message", what)
	}
}

func TestBumpLeaderEpochRefusesHostileRequests(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, m2, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 5, 5))

	// The report: the leader's public ids and min_leader_epoch MaxInt32 on a
	// topic that was never a mirror.
	d, resp := h.s.BumpLeaderEpoch(h.bumpReq(math.MaxInt32, -1))
	refused(t, "non-mirror topic", d, resp.GetError(), ecInvalid, resp.GetErrorMessage())
	if !strings.Contains(resp.GetErrorMessage(), "mirror") {
		t.Fatalf("message %q does not say why", resp.GetErrorMessage())
	}

	markOnceMirrored(h, "t")
	for _, c := range []struct {
		name  string
		minLE int32
		off   int64
	}{
		{"min_leader_epoch MaxInt32", math.MaxInt32, -1},
		{"step above the maximum", 5 + MaxLeaderEpochStep + 1, -1},
		{"truncation offset -2", 0, -2},
		{"truncation offset MinInt64", 0, math.MinInt64},
	} {
		d, resp := h.s.BumpLeaderEpoch(h.bumpReq(c.minLE, c.off))
		refused(t, c.name, d, resp.GetError(), ecInvalid, resp.GetErrorMessage())
	}
	h.expect(0, ps{L: 1, LKL: -1, ISR: ids(1, 2, 3), LE: 5, PE: 5})

	// The largest step is allowed, and an ordinary bump still works.
	d, resp = h.s.BumpLeaderEpoch(h.bumpReq(5+MaxLeaderEpochStep, 3))
	if resp.GetError() != ecNone || resp.GetLeaderEpoch() != 5+MaxLeaderEpochStep {
		t.Fatalf("maximal step: %v", resp)
	}
	h.apply(d, true)
	d, resp = h.s.BumpLeaderEpoch(h.bumpReq(0, -1))
	if resp.GetError() != ecNone || resp.GetLeaderEpoch() != 6+MaxLeaderEpochStep {
		t.Fatalf("ordinary bump: %v", resp)
	}
	h.apply(d, true)
}

func TestBumpLeaderEpochKeepsHeadroom(t *testing.T) {
	top := int32(math.MaxInt32 - LeaderEpochHeadroom)
	h := seeded(t, ids(1, 2, 3), nil, m2, part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, top-2, 5))
	markOnceMirrored(h, "t")
	d, resp := h.s.BumpLeaderEpoch(h.bumpReq(top+1, -1))
	refused(t, "into the headroom", d, resp.GetError(), ecInvalid, resp.GetErrorMessage())
	d, resp = h.s.BumpLeaderEpoch(h.bumpReq(top, -1))
	if resp.GetError() != ecNone || resp.GetLeaderEpoch() != top {
		t.Fatalf("bump to the limit: %v", resp)
	}
	h.apply(d, true)
	d, resp = h.s.BumpLeaderEpoch(h.bumpReq(0, -1))
	refused(t, "at the limit", d, resp.GetError(), ecInvalid, resp.GetErrorMessage())
	// Elections still raise it: the headroom is theirs.
	h.fence(1)
	if p := h.p(0); p.GetLeader() == 1 || p.GetLeaderEpoch() != top+1 {
		t.Fatalf("election in the headroom: %v", p)
	}
}

// An election that would take the leader epoch past MaxInt32 does not
// happen: the partition keeps its record and the shell is told.
func TestEpochOverflowRefused(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, m2,
		part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, math.MaxInt32, 5),
		part(ids(1, 2, 3), 1, ids(1, 2, 3), nil, nil, -1, 5, math.MaxInt32),
		part(ids(1, 2, 3), 2, ids(1, 2, 3), nil, nil, -1, 5, 5))
	p0, p1 := h.p(0), h.p(1)
	h.fence(1)
	if got := h.p(0); !protoEqual(got, p0) {
		t.Fatalf("partition at LE MaxInt32 changed: %v", got)
	}
	if got := h.p(1); !protoEqual(got, p1) {
		t.Fatalf("partition at PE MaxInt32 changed: %v", got)
	}
	// The other partition still changes.
	if got := h.p(2); contains(got.GetIsr(), 1) || got.GetPartitionEpoch() != 6 {
		t.Fatalf("ordinary partition: %v", got)
	}
	ev := h.s.DrainEpochExhausted()
	if len(ev) != 2 || ev[0].Kind != EventEpochExhausted || ev[0].Partition != 0 || ev[1].Partition != 1 {
		t.Fatalf("events %v", ev)
	}
	if ev := h.s.DrainEpochExhausted(); ev != nil {
		t.Fatalf("drained twice: %v", ev)
	}
	// AlterPartition at PE MaxInt32 is refused outright.
	req := &twinlogv1.AlterPartitionRequest{BrokerId: 1, BrokerEpoch: h.epoch(1), Topic: "t", Partition: 1,
		LeaderEpoch: 5, PartitionEpoch: math.MaxInt32, NewIsr: []*twinlogv1.IsrMember{{BrokerId: 1, BrokerEpoch: -1}}}
	h.register(1, true)
	req.BrokerEpoch = h.epoch(1)
	d, resp := h.s.AlterPartition(req)
	if d != nil || resp.GetError() == ecNone {
		t.Fatalf("AlterPartition at PE MaxInt32: %v %v", resp, d)
	}
}

func TestRegisterBrokerDuplicateIncarnation(t *testing.T) {
	h := newHarness(t)
	reg := func(inc string, now int64) (*twinlogv1.MetadataDelta, *twinlogv1.RegisterBrokerResponse) {
		prev := int64(-1)
		if h.s.Broker(1) != nil {
			prev = h.epoch(1)
		}
		return h.s.RegisterBroker(&twinlogv1.RegisterBrokerRequest{BrokerId: 1, IncarnationId: inc, PreviousBrokerEpoch: prev}, now)
	}
	d, resp := reg("one", 0)
	if resp.GetError() != ecNone {
		t.Fatal(resp)
	}
	h.apply(d, false)
	// Fenced until caught up: another incarnation may take the id over.
	d, resp = reg("two", 0)
	if resp.GetError() != ecNone {
		t.Fatalf("fenced registration not replaceable: %v", resp)
	}
	h.apply(d, false)
	h.unfence(1)
	epoch := h.epoch(1)
	dup := twinlogv1.ErrorCode_ERROR_CODE_DUPLICATE_BROKER_REGISTRATION
	d, resp = reg("three", 1000)
	refused(t, "live session", d, resp.GetError(), dup, resp.GetErrorMessage())
	if h.epoch(1) != epoch {
		t.Fatal("refused registration changed the epoch")
	}
	// The same incarnation is a retry.
	d, resp = reg("two", 1000)
	if resp.GetError() != ecNone {
		t.Fatalf("retry of the same incarnation: %v", resp)
	}
	h.apply(d, false)
	h.unfence(1)
	// Still live at exactly the session timeout, expired after it (Tick
	// fences it then).
	h.heartbeat(1, false)
	d, resp = reg("three", 9000)
	refused(t, "session not yet expired", d, resp.GetError(), dup, resp.GetErrorMessage())
	d, _ = h.s.Tick(9001)
	h.apply(d, false)
	if !h.s.Broker(1).GetFenced() {
		t.Fatal("session did not expire")
	}
	d, resp = reg("three", 9001)
	if resp.GetError() != ecNone {
		t.Fatalf("after session expiry: %v", resp)
	}
	h.apply(d, false)
	// A broker in controlled shutdown has given its session up.
	h.unfence(1)
	h.heartbeat(1, true)
	d, resp = reg("four", 9002)
	if resp.GetError() != ecNone {
		t.Fatalf("after controlled shutdown: %v", resp)
	}
	h.apply(d, false)
}

func TestRegisterBrokerBoundsStrings(t *testing.T) {
	h := newHarness(t)
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, c := range []struct {
		name string
		mod  func(r *twinlogv1.RegisterBrokerRequest)
	}{
		{"host", func(r *twinlogv1.RegisterBrokerRequest) { r.Host = long(MaxRegistrationHostLength + 1) }},
		{"incarnation", func(r *twinlogv1.RegisterBrokerRequest) { r.IncarnationId = long(MaxIncarnationIDLength + 1) }},
		{"cluster id", func(r *twinlogv1.RegisterBrokerRequest) { r.ClusterId = long(MaxClusterIDLength + 1) }},
		{"log dir count", func(r *twinlogv1.RegisterBrokerRequest) { r.LogDirs = make([]string, MaxRegistrationLogDirs+1) }},
		{"log dir length", func(r *twinlogv1.RegisterBrokerRequest) { r.LogDirs = []string{"/d", long(MaxLogDirLength + 1)} }},
		{"port", func(r *twinlogv1.RegisterBrokerRequest) { r.Port = 70000 }},
		{"negative port", func(r *twinlogv1.RegisterBrokerRequest) { r.Port = -1 }},
	} {
		req := &twinlogv1.RegisterBrokerRequest{BrokerId: 1, IncarnationId: "i", Host: "h", Port: 9092, LogDirs: []string{"/d"}, PreviousBrokerEpoch: -1}
		c.mod(req)
		d, resp := h.s.RegisterBroker(req, 0)
		refused(t, c.name, d, resp.GetError(), ecInvalid, resp.GetErrorMessage())
	}
	if h.s.Broker(1) != nil {
		t.Fatal("a refused registration registered")
	}
}

// Heartbeats count only from the registered incarnation: its epoch exactly.
func TestHeartbeatNeedsTheRegisteredEpoch(t *testing.T) {
	h := newHarness(t)
	h.register(1, false)
	for _, e := range []int64{h.epoch(1) + 1, h.epoch(1) - 1, math.MaxInt64} {
		d, resp := h.s.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: e, AppliedOffset: h.s.Offset(), WantShutDown: true}, 0)
		if d != nil || resp.GetError() != ecStale {
			t.Fatalf("epoch %d: %v %v", e, resp, d)
		}
	}
}

func TestUnregisterBroker(t *testing.T) {
	h := seeded(t, ids(1, 2, 3), nil, m2, part(ids(1, 2, 3), 1, ids(1), ids(2, 3), nil, -1, 5, 5))
	d, resp := h.s.UnregisterBroker(&twinlogv1.UnregisterBrokerRequest{BrokerId: 3})
	refused(t, "live broker", d, resp.GetError(), ecInvalid, resp.GetErrorMessage())
	d, resp = h.s.UnregisterBroker(&twinlogv1.UnregisterBrokerRequest{BrokerId: 9})
	refused(t, "unknown broker", d, resp.GetError(), twinlogv1.ErrorCode_ERROR_CODE_BROKER_ID_NOT_REGISTERED, resp.GetErrorMessage())
	h.fence(3)
	if !contains(h.p(0).GetElr(), 3) {
		t.Fatalf("fencing took 3 out of the ELR: %v", h.p(0))
	}
	d, resp = h.s.UnregisterBroker(&twinlogv1.UnregisterBrokerRequest{BrokerId: 3})
	if resp.GetError() != ecNone || d == nil {
		t.Fatalf("unregister fenced broker: %v", resp)
	}
	h.apply(d, false)
	if h.s.Broker(3) != nil {
		t.Fatal("still registered")
	}
	if p := h.p(0); contains(p.GetIsr(), 3) || contains(p.GetElr(), 3) {
		t.Fatalf("unregistered broker still eligible: %v", p)
	}
	// It may come back as a new broker.
	h.register(3, false)
}

func TestDeleteInternalTopicRefused(t *testing.T) {
	h := newHarness(t)
	for _, b := range ids(1, 2, 3) {
		h.register(b, false)
		h.unfence(b)
	}
	tx := h.s.view()
	if err := tx.ensureMirrorStateTopic(); err != nil {
		t.Fatal(err)
	}
	h.apply(tx.delta(), false)
	if !h.s.Topic(mirrorStateTopic).GetInternal() {
		t.Fatal("mirror state topic not internal")
	}
	d, resp := h.s.DeleteTopics(&twinlogv1.DeleteTopicsRequest{Names: []string{mirrorStateTopic}})
	refused(t, "delete "+mirrorStateTopic, d, resp.GetTopics()[0].GetError(), ecInvalid, resp.GetTopics()[0].GetErrorMessage())
	if h.s.Topic(mirrorStateTopic) == nil {
		t.Fatal("deleted")
	}
}

func TestCreateTopicsRefusesReservedNames(t *testing.T) {
	h := newHarness(t)
	h.register(1, false)
	h.unfence(1)
	for _, name := range []string{mirrorStateTopic, "__consumer_offsets", "__x"} {
		d, resp := h.s.CreateTopics(&twinlogv1.CreateTopicsRequest{Topics: []*twinlogv1.CreatableTopic{{Name: name, NumPartitions: 1, ReplicationFactor: 1}}})
		r := resp.GetTopics()[0]
		refused(t, name, d, r.GetError(), twinlogv1.ErrorCode_ERROR_CODE_INVALID_TOPIC, r.GetErrorMessage())
	}
	// One underscore is an ordinary name.
	d, resp := h.s.CreateTopics(&twinlogv1.CreateTopicsRequest{Topics: []*twinlogv1.CreatableTopic{{Name: "_x", NumPartitions: 1, ReplicationFactor: 1}}})
	if resp.GetTopics()[0].GetError() != ecNone {
		t.Fatal(resp)
	}
	h.apply(d, false)
}

func TestCreateTopicsCaps(t *testing.T) {
	s := New(Config{ClusterID: "a", MaxCreatePartitionsPerRequest: 10, MaxClusterPartitions: 15})
	h := &harness{t: t, s: s, base: s.Snapshot()}
	for _, b := range ids(1, 2, 3) {
		h.register(b, false)
		h.unfence(b)
	}
	create := func(validateOnly bool, topics ...*twinlogv1.CreatableTopic) (*twinlogv1.MetadataDelta, *twinlogv1.CreateTopicsResponse) {
		return h.s.CreateTopics(&twinlogv1.CreateTopicsRequest{Topics: topics, ValidateOnly: validateOnly})
	}
	ct := func(name string, n, rf int32) *twinlogv1.CreatableTopic {
		return &twinlogv1.CreatableTopic{Name: name, NumPartitions: n, ReplicationFactor: rf}
	}
	for _, vo := range []bool{false, true} {
		// Extreme values are refused without allocating.
		for _, c := range []struct {
			topic *twinlogv1.CreatableTopic
			want  twinlogv1.ErrorCode
		}{
			{ct("a", math.MaxInt32, 1), ecInvalid},
			{ct("a", 1, math.MaxInt32), twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR},
			{ct("a", 1, math.MinInt32), twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR},
			{ct("a", math.MinInt32, 1), twinlogv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS},
			{&twinlogv1.CreatableTopic{Name: "a", Assignments: []*twinlogv1.ReplicaAssignment{{Replicas: make([]int32, 100000)}}},
				twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT},
		} {
			d, resp := create(vo, c.topic)
			refused(t, "extreme", d, resp.GetTopics()[0].GetError(), c.want, resp.GetTopics()[0].GetErrorMessage())
		}
		// Per request: 6 + 6 > 10, both refused.
		d, resp := create(vo, ct("a", 6, 1), ct("b", 6, 1))
		for _, r := range resp.GetTopics() {
			refused(t, "per request", d, r.GetError(), ecInvalid, r.GetErrorMessage())
		}
		// Too many topics in one request, each of one partition.
		var many []*twinlogv1.CreatableTopic
		for i := range 11 {
			many = append(many, ct("m"+strings.Repeat("x", i), 1, 1))
		}
		d, resp = create(vo, many...)
		if d != nil || len(resp.GetTopics()) != 11 || resp.GetTopics()[10].GetError() != ecInvalid {
			t.Fatalf("topics per request: %v", resp)
		}
	}
	// Per cluster: 10 fit, then 6 more do not (16 > 15) but 5 do.
	d, resp := create(true, ct("a", 10, 1))
	if d != nil || resp.GetTopics()[0].GetError() != ecNone {
		t.Fatalf("validate only: %v %v", resp, d)
	}
	if h.s.Topic("a") != nil {
		t.Fatal("validate_only created the topic")
	}
	d, resp = create(false, ct("a", 10, 1))
	if resp.GetTopics()[0].GetError() != ecNone {
		t.Fatal(resp)
	}
	h.apply(d, false)
	for _, vo := range []bool{true, false} {
		d, resp = create(vo, ct("b", 6, 1))
		refused(t, "per cluster", d, resp.GetTopics()[0].GetError(), twinlogv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS, resp.GetTopics()[0].GetErrorMessage())
	}
	// Within one request the earlier topics count.
	d, resp = create(false, ct("b", 3, 1), ct("c", 3, 1))
	if resp.GetTopics()[0].GetError() != ecNone || resp.GetTopics()[1].GetError() != twinlogv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS {
		t.Fatalf("cumulative: %v", resp)
	}
	h.apply(d, false)
}
