package controller

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

const ecNone = twinlogv1.ErrorCode_ERROR_CODE_NONE

func TestRegisterHeartbeatCreateTopic(t *testing.T) {
	h := startController(t, t.TempDir(), newClock(), newNet())

	hc, err := healthpb.NewHealthClient(h.conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v", hc, err)
	}

	e1 := h.register(1, -1)
	if r := h.heartbeat(1, e1); r.GetIsFenced() || !r.GetIsCaughtUp() {
		t.Fatalf("heartbeat: %v", r)
	}
	// A heartbeat with a stale epoch is refused.
	r, err := h.ctl.BrokerHeartbeat(t.Context(), &twinlogv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: e1 - 1})
	if err != nil || r.GetError() != twinlogv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH {
		t.Fatalf("stale heartbeat = %v, %v", r, err)
	}
	// A registration that is not caught up stays fenced.
	e2 := h.register(2, -1)
	r, err = h.ctl.BrokerHeartbeat(t.Context(), &twinlogv1.BrokerHeartbeatRequest{BrokerId: 2, BrokerEpoch: e2, AppliedOffset: e2 - 1})
	if err != nil || !r.GetIsFenced() {
		t.Fatalf("lagging heartbeat = %v, %v", r, err)
	}
	h.heartbeat(2, e2)
	e3 := h.register(3, -1)
	h.heartbeat(3, e3)

	lb, err := h.admin.ListBrokers(t.Context(), &twinlogv1.ListBrokersRequest{})
	if err != nil || len(lb.GetBrokers()) != 3 || lb.GetClusterId() != "test-cluster" {
		t.Fatalf("ListBrokers = %v, %v", lb, err)
	}
	for _, b := range lb.GetBrokers() {
		if b.GetFenced() {
			t.Fatalf("broker %d fenced", b.GetBrokerId())
		}
	}

	h.createTopic("orders", 6, 3, map[string]string{"min.insync.replicas": "2"})
	// Creating it again fails in-band.
	resp, err := h.admin.CreateTopics(t.Context(), &twinlogv1.CreateTopicsRequest{Topics: []*twinlogv1.CreatableTopic{
		{Name: "orders", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "bad/name", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "toobig", NumPartitions: 1, ReplicationFactor: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []twinlogv1.ErrorCode{twinlogv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS,
		twinlogv1.ErrorCode_ERROR_CODE_INVALID_TOPIC, twinlogv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR}
	for i, tr := range resp.GetTopics() {
		if tr.GetError() != want[i] {
			t.Errorf("topic %s: %v (%s), want %v", tr.GetName(), tr.GetError(), tr.GetErrorMessage(), want[i])
		}
	}
	leaders := map[int32]int{}
	for p := range int32(6) {
		pr := h.partition("orders", p)
		if pr == nil || len(pr.GetIsr()) != 3 || pr.GetLeader() < 1 {
			t.Fatalf("partition %d: %v", p, pr)
		}
		leaders[pr.GetLeader()]++
	}
	if len(leaders) != 3 {
		t.Errorf("leaders not spread: %v", leaders)
	}
	st := h.c.stats.snapshot()
	if st.ElectableLeaders != 18 || st.Offline != 0 || st.UnderMinISR != 0 || st.FencedBrokers != 0 {
		t.Errorf("stats %+v", st)
	}

	dc, err := h.admin.DescribeConfigs(t.Context(), &twinlogv1.DescribeConfigsRequest{Resources: []*twinlogv1.ConfigResource{
		{Type: twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "orders"}}})
	if err != nil || dc.GetResults()[0].GetError() != ecNone {
		t.Fatalf("DescribeConfigs = %v, %v", dc, err)
	}
	ac, err := h.admin.AlterConfigs(t.Context(), &twinlogv1.AlterConfigsRequest{Resources: []*twinlogv1.AlterConfigsResource{{
		Resource: &twinlogv1.ConfigResource{Type: twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: "orders"},
		Set:      map[string]string{"min.insync.replicas": "0"},
	}}})
	if err != nil || ac.GetResults()[0].GetError() != twinlogv1.ErrorCode_ERROR_CODE_INVALID_CONFIG {
		t.Fatalf("AlterConfigs(min ISR 0) = %v, %v", ac, err)
	}
}

func TestSessionTimeoutFencing(t *testing.T) {
	clock := newClock()
	h := startController(t, t.TempDir(), clock, newNet())
	epochs := h.upBrokers(3)
	h.createTopic("t", 9, 3, map[string]string{"min.insync.replicas": "2"})
	h.tick() // records heartbeat times of everyone

	var led []int32
	for p := range int32(9) {
		if h.partition("t", p).GetLeader() == 3 {
			led = append(led, p)
		}
	}
	if len(led) == 0 {
		t.Fatal("broker 3 leads nothing")
	}
	// Brokers 1 and 2 keep heartbeating; 3 goes silent past the 9 s session.
	for range 4 { // 8 s: within the session
		clock.Advance(2 * time.Second)
		h.heartbeat(1, epochs[1])
		h.heartbeat(2, epochs[2])
		h.tick()
	}
	before := h.c.Offset()
	clock.Advance(2 * time.Second)
	h.heartbeat(1, epochs[1])
	h.heartbeat(2, epochs[2])
	h.tick()
	if h.c.Offset() == before {
		t.Fatal("no fencing change written")
	}
	lb, _ := h.admin.ListBrokers(t.Context(), &twinlogv1.ListBrokersRequest{})
	for _, b := range lb.GetBrokers() {
		if b.GetFenced() != (b.GetBrokerId() == 3) {
			t.Fatalf("broker %d fenced=%v", b.GetBrokerId(), b.GetFenced())
		}
	}
	for p := range int32(9) {
		pr := h.partition("t", p)
		if pr.GetLeader() == 3 || slices.Contains(pr.GetIsr(), 3) {
			t.Fatalf("partition %d still has 3: %v", p, pr)
		}
		if slices.Contains(led, p) && pr.GetLeaderEpoch() < 1 {
			t.Fatalf("partition %d: new leader without a new epoch: %v", p, pr)
		}
	}
	if st := h.c.stats.snapshot(); st.FencedBrokers != 1 || st.ElectableLeaders != 18 {
		t.Errorf("stats %+v", st)
	}
	// A caught-up heartbeat from the fenced broker unfences it (SPEC §3.2);
	// it rejoins ISRs only through AlterPartition.
	if r := h.heartbeat(3, epochs[3]); r.GetIsFenced() {
		t.Fatalf("fenced broker heartbeat: %v", r)
	}
	if st := h.c.stats.snapshot(); st.FencedBrokers != 0 {
		t.Errorf("stats after unfence %+v", st)
	}
}

func TestAlterPartitionErrorsRoundTrip(t *testing.T) {
	h := startController(t, t.TempDir(), newClock(), newNet())
	epochs := h.upBrokers(4)
	h.createTopic("t", 1, 3, map[string]string{"min.insync.replicas": "2"})
	p := h.partition("t", 0)
	L := p.GetLeader()
	var other int32
	for _, r := range p.GetReplicas() {
		if r != L {
			other = r
			break
		}
	}
	isr := func(ids ...int32) []*twinlogv1.IsrMember {
		var out []*twinlogv1.IsrMember
		for _, id := range ids {
			out = append(out, &twinlogv1.IsrMember{BrokerId: id, BrokerEpoch: -1})
		}
		return out
	}
	var notInR int32
	for id := int32(1); id <= 4; id++ {
		if !slices.Contains(p.GetReplicas(), id) {
			notInR = id
		}
	}
	base := func() *twinlogv1.AlterPartitionRequest {
		return &twinlogv1.AlterPartitionRequest{BrokerId: L, BrokerEpoch: epochs[L], Topic: "t", Partition: 0,
			LeaderEpoch: p.GetLeaderEpoch(), PartitionEpoch: p.GetPartitionEpoch(), NewIsr: isr(L, other)}
	}
	cases := []struct {
		name string
		mod  func(r *twinlogv1.AlterPartitionRequest)
		want twinlogv1.ErrorCode
	}{
		{"stale broker epoch", func(r *twinlogv1.AlterPartitionRequest) { r.BrokerEpoch-- }, twinlogv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH},
		{"unknown partition", func(r *twinlogv1.AlterPartitionRequest) { r.Partition = 7 }, twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION},
		{"unknown topic", func(r *twinlogv1.AlterPartitionRequest) { r.Topic = "" }, twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION},
		{"newer leader epoch", func(r *twinlogv1.AlterPartitionRequest) { r.LeaderEpoch++ }, twinlogv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER},
		{"newer partition epoch", func(r *twinlogv1.AlterPartitionRequest) { r.PartitionEpoch++ }, twinlogv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER},
		{"older leader epoch", func(r *twinlogv1.AlterPartitionRequest) { r.LeaderEpoch-- }, twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH},
		{"not the leader", func(r *twinlogv1.AlterPartitionRequest) { r.BrokerId, r.BrokerEpoch = other, epochs[other] }, twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST},
		{"older partition epoch", func(r *twinlogv1.AlterPartitionRequest) { r.PartitionEpoch-- }, twinlogv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION},
		{"leader missing from ISR", func(r *twinlogv1.AlterPartitionRequest) { r.NewIsr = isr(other) }, twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST},
		{"duplicate member", func(r *twinlogv1.AlterPartitionRequest) { r.NewIsr = isr(L, L) }, twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST},
		{"member outside R", func(r *twinlogv1.AlterPartitionRequest) { r.NewIsr = isr(L, notInR) }, twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST},
		{"empty ISR", func(r *twinlogv1.AlterPartitionRequest) { r.NewIsr = nil }, twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST},
		{"stale member epoch", func(r *twinlogv1.AlterPartitionRequest) { r.NewIsr[1].BrokerEpoch = epochs[other] - 1 }, twinlogv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA},
	}
	// "older leader epoch" at LE 0 sends −1: still older. (This used to bump
	// LE first; BumpLeaderEpoch now needs a mirror topic.)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := h.c.Offset()
			req := base()
			tc.mod(req)
			resp, err := h.ctl.AlterPartition(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetError() != tc.want {
				t.Fatalf("error %v (%s), want %v", resp.GetError(), resp.GetErrorMessage(), tc.want)
			}
			if h.c.Offset() != before {
				t.Fatal("a rejected AlterPartition wrote a change")
			}
		})
	}
	// Valid shrink to {L, other}: PE + 1, LE kept.
	resp, err := h.ctl.AlterPartition(t.Context(), base())
	if err != nil || resp.GetError() != ecNone {
		t.Fatalf("valid AlterPartition = %v, %v", resp, err)
	}
	if resp.GetPartitionEpoch() != p.GetPartitionEpoch()+1 || resp.GetLeaderEpoch() != p.GetLeaderEpoch() || len(resp.GetIsr()) != 2 {
		t.Fatalf("valid AlterPartition result %v from %v", resp, p)
	}
}

// TestFetchMetadataLongPoll checks that a follower waiting at the head is
// woken by the next change, and that max wait ends an idle poll.
func TestFetchMetadataLongPoll(t *testing.T) {
	h := startController(t, t.TempDir(), newClock(), newNet())
	h.upBrokers(1)
	head := h.c.Offset()

	got := make(chan *twinlogv1.FetchMetadataResponse, 1)
	go func() {
		r, err := h.ctl.FetchMetadata(context.Background(), &twinlogv1.FetchMetadataRequest{FromOffset: head + 1, MaxWaitMs: 60_000})
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	// Wait until the poll is parked (it then holds the notify channel).
	time.Sleep(50 * time.Millisecond)
	h.createTopic("x", 1, 1, nil)
	select {
	case r := <-got:
		if len(r.GetDeltas()) != 1 || r.GetDeltas()[0].GetOffset() != head+1 || len(r.GetDeltas()[0].GetTopics()) != 1 {
			t.Fatalf("woken poll got %v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll not woken by a change")
	}
	// Nothing new: returns empty after max wait.
	start := time.Now()
	r, err := h.ctl.FetchMetadata(t.Context(), &twinlogv1.FetchMetadataRequest{FromOffset: h.c.Offset() + 1, MaxWaitMs: 30})
	if err != nil || len(r.GetDeltas()) != 0 || r.GetHighOffset() != h.c.Offset() || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("idle poll = %v, %v after %v", r, err, time.Since(start))
	}
	// Past the head + 1: out of range.
	r, err = h.ctl.FetchMetadata(t.Context(), &twinlogv1.FetchMetadataRequest{FromOffset: h.c.Offset() + 5})
	if err != nil || r.GetError() != twinlogv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
		t.Fatalf("future offset = %v, %v", r, err)
	}
}

// follower is a minimal broker-side metadata follower: it applies what
// FetchMetadata returns and checks offsets are contiguous.
type follower struct {
	t       *testing.T
	applied int64
	image   map[string]*twinlogv1.PartitionRecord
	topics  map[string]bool
}

func newFollower(t *testing.T) *follower {
	return &follower{t: t, image: map[string]*twinlogv1.PartitionRecord{}, topics: map[string]bool{}}
}

func (f *follower) catchUp(ctl twinlogv1.ControllerServiceClient) (snapshots int) {
	f.t.Helper()
	for {
		r, err := ctl.FetchMetadata(f.t.Context(), &twinlogv1.FetchMetadataRequest{FromOffset: f.applied + 1, MaxDeltas: 7})
		if err != nil {
			f.t.Fatal(err)
		}
		if r.GetError() != ecNone {
			f.t.Fatalf("FetchMetadata from %d: %v", f.applied+1, r.GetError())
		}
		if s := r.GetSnapshot(); s != nil {
			snapshots++
			f.image = map[string]*twinlogv1.PartitionRecord{}
			f.topics = map[string]bool{}
			for _, tr := range s.GetTopics() {
				f.topics[tr.GetName()] = true
			}
			for _, p := range s.GetPartitions() {
				f.image[(p.GetTopic()+"/")+string(rune('0'+p.GetPartition()))] = p
			}
			f.applied = s.GetOffset()
		}
		for _, d := range r.GetDeltas() {
			if d.GetOffset() != f.applied+1 {
				f.t.Fatalf("delta %d after %d", d.GetOffset(), f.applied)
			}
			for _, n := range d.GetRemovedTopics() {
				delete(f.topics, n)
			}
			for _, tr := range d.GetTopics() {
				f.topics[tr.GetName()] = true
			}
			for _, p := range d.GetPartitions() {
				f.image[(p.GetTopic()+"/")+string(rune('0'+p.GetPartition()))] = p
			}
			f.applied = d.GetOffset()
		}
		if f.applied >= r.GetHighOffset() {
			return snapshots
		}
	}
}

func TestFetchMetadataCatchUpAfterRestart(t *testing.T) {
	dir := t.TempDir()
	clock := newClock()
	nw := newNet()
	h := startController(t, dir, clock, nw)
	h.upBrokers(3)
	for _, name := range []string{"a", "b", "c"} {
		h.createTopic(name, 3, 3, nil)
	}
	f := newFollower(t)
	f.catchUp(h.ctl)
	mid := h.c.Offset()
	if f.applied != mid {
		t.Fatalf("follower at %d, controller at %d", f.applied, mid)
	}

	// Clean restart: every change is back and the follower resumes.
	h.stop()
	h = startController(t, dir, clock, nw)
	if h.c.Offset() != mid {
		t.Fatalf("restart: offset %d, want %d", h.c.Offset(), mid)
	}
	h.createTopic("d", 2, 3, nil)
	if n := f.catchUp(h.ctl); n != 0 || !f.topics["d"] || f.applied != h.c.Offset() {
		t.Fatalf("after restart: snapshots=%d applied=%d topics=%v", n, f.applied, f.topics)
	}

	// Crash: copy the bbolt file while the controller runs (never closed),
	// which is what kill -9 leaves behind: every acknowledged transaction.
	h.createTopic("e", 1, 3, nil)
	acked := h.c.Offset()
	crashDir := t.TempDir()
	copyFile(t, filepath.Join(dir, "controller.db"), filepath.Join(crashDir, "controller.db"))
	h.stop()
	h = startController(t, crashDir, clock, nw)
	if h.c.Offset() != acked {
		t.Fatalf("after crash: offset %d, acked %d", h.c.Offset(), acked)
	}
	if p := h.partition("e", 0); p == nil || len(p.GetIsr()) != 3 {
		t.Fatalf("after crash: e-0 = %v", p)
	}
	f.catchUp(h.ctl)
	if !f.topics["e"] {
		t.Fatal("follower missed topic e")
	}

	// Compaction: a follower starting from scratch gets a snapshot, then
	// the deltas after it; one still inside the retained window does not.
	h.c.cfg.RetainDeltas = 2
	if err := h.c.Compact(); err != nil {
		t.Fatal(err)
	}
	h.createTopic("f", 1, 3, nil)
	fresh := newFollower(t)
	if n := fresh.catchUp(h.ctl); n != 1 {
		t.Fatalf("fresh follower got %d snapshots, want 1", n)
	}
	if n := f.catchUp(h.ctl); n != 0 {
		t.Fatalf("recent follower got %d snapshots, want 0", n)
	}
	if len(fresh.image) != len(f.image) || len(fresh.topics) != len(f.topics) {
		t.Fatalf("snapshot follower differs: %d/%d partitions, %v vs %v", len(fresh.image), len(f.image), fresh.topics, f.topics)
	}
	for k, p := range f.image {
		if !proto.Equal(p, fresh.image[k]) {
			t.Fatalf("%s: %v vs %v", k, p, fresh.image[k])
		}
	}
	// And the compacted store restarts to the same head.
	head := h.c.Offset()
	h.stop()
	h = startController(t, crashDir, clock, nw)
	if h.c.Offset() != head {
		t.Fatalf("restart after compaction: %d, want %d", h.c.Offset(), head)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDescribeTopicPartitionsPaging(t *testing.T) {
	h := startController(t, t.TempDir(), newClock(), newNet(), func(c *Config) { c.MaxRequestPartitionSizeLimit = 4 })
	h.upBrokers(3)
	h.createTopic("a", 3, 2, nil)
	h.createTopic("b", 2, 2, nil)
	h.createTopic("c", 1, 2, nil)
	h.createTopic("d", 5, 2, nil)

	var got []string
	var cursor *twinlogv1.Cursor
	pages := 0
	for {
		r, err := h.admin.DescribeTopicPartitions(t.Context(), &twinlogv1.DescribeTopicPartitionsRequest{
			ResponsePartitionLimit: 100, Cursor: cursor}) // server limit 4 wins
		if err != nil {
			t.Fatal(err)
		}
		pages++
		n := 0
		for _, tr := range r.GetTopics() {
			for _, p := range tr.GetPartitions() {
				got = append(got, tr.GetName()+string(rune('0'+p.GetPartitionIndex())))
				n++
				if p.GetLeaderId() < 0 || len(p.GetIsr()) != 2 {
					t.Fatalf("%s-%d: %v", tr.GetName(), p.GetPartitionIndex(), p)
				}
			}
		}
		if n > 4 {
			t.Fatalf("page of %d > limit 4", n)
		}
		if (r.GetNextCursor() != nil) != (r.GetError() == twinlogv1.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED) {
			t.Fatalf("cursor %v with error %v", r.GetNextCursor(), r.GetError())
		}
		if r.GetNextCursor() == nil {
			break
		}
		cursor = r.GetNextCursor()
	}
	want := []string{"a0", "a1", "a2", "b0", "b1", "c0", "d0", "d1", "d2", "d3", "d4"}
	if !slices.Equal(got, want) || pages != 3 {
		t.Fatalf("pages=%d got %v", pages, got)
	}
	// Bad cursor → INVALID_REQUEST in-band.
	r, err := h.admin.DescribeTopicPartitions(t.Context(), &twinlogv1.DescribeTopicPartitionsRequest{
		Topics: []*twinlogv1.DescribeTopicPartitionsTopic{{Name: "b"}}, Cursor: &twinlogv1.Cursor{TopicName: "a"}})
	if err != nil || r.GetError() != twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST {
		t.Fatalf("bad cursor = %v, %v", r, err)
	}
}

// TestUncleanRecoveryRound runs an aggressive round against fake brokers on
// bufconn: the candidate with the highest (epoch, LEO) wins.
func TestUncleanRecoveryRound(t *testing.T) {
	clock := newClock()
	nw := newNet()
	h := startController(t, t.TempDir(), clock, nw)
	epochs := h.upBrokers(3)
	h.createTopic("u", 1, 3, map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
	h.tick()
	// Everyone goes silent: all fenced, the partition goes offline.
	clock.Advance(10 * time.Second)
	h.tick()
	if p := h.partition("u", 0); p.GetLeader() != -1 {
		t.Fatalf("still led: %v", p)
	}
	if st := h.c.stats.snapshot(); st.Offline != 1 || st.FencedBrokers != 3 {
		t.Fatalf("stats %+v", st)
	}
	p := h.partition("u", 0)
	t.Logf("offline: isr=%v elr=%v lke=%v lkl=%d", p.GetIsr(), p.GetElr(), p.GetLastKnownElr(), p.GetLastKnownLeader())

	// Brokers 2 and 3 come back uncleanly (their logs may be short).
	answers := map[int32]struct {
		lwe int32
		leo int64
	}{2: {3, 50}, 3: {3, 80}}
	var fbs []*fakeBroker
	for id, a := range answers {
		e := h.register(id, -1)
		epochs[id] = e
		fbs = append(fbs, startFakeBroker(t, nw, "b"+string(rune('0'+id))+":9092", e, a.lwe, a.leo))
	}
	for id := range answers {
		h.heartbeat(id, epochs[id])
	}
	// The round may have started at an unfence already; a tick starts it
	// otherwise. Round goroutines are tracked by c.wg: wait for them.
	for range 3 {
		h.tick()
		h.c.wg.Wait()
		if p = h.partition("u", 0); p.GetLeader() != -1 {
			break
		}
	}
	if p.GetLeader() != 3 || p.GetRecoveryState() != twinlogv1.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING || !slices.Equal(p.GetIsr(), []int32{3}) {
		t.Fatalf("after round: %v", p)
	}
	calls := int32(0)
	for _, fb := range fbs {
		calls += fb.calls.Load()
	}
	if calls == 0 {
		t.Fatal("no GetReplicaLogInfo calls")
	}
}

func TestUnavailableAfterClose(t *testing.T) {
	h := startController(t, t.TempDir(), newClock(), newNet())
	h.upBrokers(1)
	h.c.Close() // store closed under a live server
	_, err := h.c.Heartbeat(&twinlogv1.BrokerHeartbeatRequest{BrokerId: 1})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("heartbeat after close: %v", err)
	}
}

func TestDescribeMirrorsAggregatesHeartbeats(t *testing.T) {
	nw := newNet()
	h := startController(t, t.TempDir(), newClock(), nw)
	epochs := h.upBrokers(3)
	h.createTopic("m", 2, 3, nil)
	// The source must answer: a mirror is not created without its cluster id.
	req := &twinlogv1.CreateMirrorRequest{Name: "mx", SourceBootstrap: []string{"a:9091"}, Topics: []string{"m"}}
	if cm, err := h.mirror.CreateMirror(t.Context(), req); err != nil || cm.GetError() != twinlogv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE {
		t.Fatalf("CreateMirror with the source unreachable = %v, %v", cm, err)
	}
	mirrorRec := func() *twinlogv1.MirrorRecord {
		h.c.mu.RLock()
		defer h.c.mu.RUnlock()
		return h.c.state.Mirror("mx")
	}
	if m := mirrorRec(); m != nil {
		t.Fatalf("mirror created without a source cluster id: %v", m)
	}
	// The source's "m" is the local one's origin (same topic id): a mirror
	// never starts over a local topic the source lacks (issue 13).
	h.c.mu.RLock()
	mid := h.c.state.Topic("m").GetTopicId()
	h.c.mu.RUnlock()
	startFakeSource(t, nw, "a:9091", &fakeSource{topics: []*twinlogv1.MetadataTopic{srcTopic("m", mid, 2)},
		configs: map[string][]*twinlogv1.ConfigEntry{"m": nil}})
	cm, err := h.mirror.CreateMirror(t.Context(), req)
	if err != nil || cm.GetError() != ecNone || len(cm.GetTopics()) != 1 || cm.GetTopics()[0].GetError() != ecNone {
		t.Fatalf("CreateMirror = %v, %v", cm, err)
	}
	if id := mirrorRec().GetSourceClusterId(); id != "cluster-src" {
		t.Fatalf("mirror source cluster id %q, want cluster-src", id)
	}
	// Pause twice: the second is refused (only from MIRRORING; SPEC §6.5
	// says INVALID_REQUEST).
	if r, err := h.mirror.PauseMirrorTopics(t.Context(), &twinlogv1.PauseMirrorTopicsRequest{Mirror: "mx", Topics: []string{"m"}}); err != nil || r.GetTopics()[0].GetError() != ecNone {
		t.Fatalf("Pause = %v, %v", r, err)
	}
	if r, err := h.mirror.PauseMirrorTopics(t.Context(), &twinlogv1.PauseMirrorTopicsRequest{Mirror: "mx", Topics: []string{"m"}}); err != nil || r.GetTopics()[0].GetError() == ecNone {
		t.Fatalf("second Pause = %v, %v", r, err)
	}
	if r, err := h.mirror.ResumeMirrorTopics(t.Context(), &twinlogv1.ResumeMirrorTopicsRequest{Mirror: "mx", Topics: []string{"m"}}); err != nil || r.GetTopics()[0].GetError() != ecNone {
		t.Fatalf("Resume = %v, %v", r, err)
	}
	if r, err := h.mirror.DeleteMirror(t.Context(), &twinlogv1.DeleteMirrorRequest{Name: "mx"}); err != nil || r.GetError() != twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST {
		t.Fatalf("DeleteMirror while mirroring = %v, %v", r, err)
	}
	l0 := h.partition("m", 0).GetLeader()
	_, err = h.ctl.BrokerHeartbeat(t.Context(), &twinlogv1.BrokerHeartbeatRequest{
		BrokerId: l0, BrokerEpoch: epochs[l0], AppliedOffset: h.c.Offset(),
		MirrorPartitions: []*twinlogv1.MirrorPartitionStatus{{Mirror: "mx", Topic: "m", Partition: 0,
			State: twinlogv1.MirrorState_MIRROR_STATE_MIRRORING, LagRecords: 7, LeaderId: l0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.mirror.DescribeMirrors(t.Context(), &twinlogv1.DescribeMirrorsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetMirrors()) != 1 || len(r.GetMirrors()[0].GetPartitions()) != 2 {
		t.Fatalf("DescribeMirrors = %v", r)
	}
	p0, p1 := r.GetMirrors()[0].GetPartitions()[0], r.GetMirrors()[0].GetPartitions()[1]
	if p0.GetState() != twinlogv1.MirrorState_MIRROR_STATE_MIRRORING || p0.GetLagRecords() != 7 ||
		p0.GetDesiredState() != twinlogv1.MirrorState_MIRROR_STATE_MIRRORING {
		t.Fatalf("m-0 status %v", p0)
	}
	if p1.GetState() != twinlogv1.MirrorState_MIRROR_STATE_UNSPECIFIED || p1.GetPartition() != 1 {
		t.Fatalf("m-1 status %v", p1)
	}
	if _, err := h.mirror.DescribeMirrors(t.Context(), &twinlogv1.DescribeMirrorsRequest{Names: []string{"nope"}}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown mirror: %v", err)
	}
	// Stop, then delete; the name disappears from DescribeMirrors.
	if r, err := h.mirror.StopMirrorTopics(t.Context(), &twinlogv1.StopMirrorTopicsRequest{Mirror: "mx", Topics: []string{"m"}}); err != nil || r.GetTopics()[0].GetError() != ecNone {
		t.Fatalf("Stop = %v, %v", r, err)
	}
	if r, err := h.mirror.DeleteMirror(t.Context(), &twinlogv1.DeleteMirrorRequest{Name: "mx"}); err != nil || r.GetError() != ecNone {
		t.Fatalf("DeleteMirror = %v, %v", r, err)
	}
	if r, err := h.mirror.DescribeMirrors(t.Context(), &twinlogv1.DescribeMirrorsRequest{}); err != nil || len(r.GetMirrors()) != 0 {
		t.Fatalf("after delete: %v, %v", r, err)
	}
}

func TestBrokerControlledShutdown(t *testing.T) {
	h := startController(t, t.TempDir(), newClock(), newNet())
	epochs := h.upBrokers(3)
	h.createTopic("s", 6, 3, nil)
	req := &twinlogv1.BrokerHeartbeatRequest{BrokerId: 2, BrokerEpoch: epochs[2], AppliedOffset: h.c.Offset(), WantShutDown: true}
	r, err := h.ctl.BrokerHeartbeat(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(6) {
		pr := h.partition("s", p)
		if pr.GetLeader() == 2 || slices.Contains(pr.GetIsr(), 2) {
			t.Fatalf("s-%d still has 2 after controlled shutdown: %v", p, pr)
		}
	}
	if !r.GetShouldShutDown() {
		// Leadership moved in the same change; the next heartbeat grants it.
		req.AppliedOffset = h.c.Offset()
		if r, err = h.ctl.BrokerHeartbeat(t.Context(), req); err != nil || !r.GetShouldShutDown() {
			t.Fatalf("shutdown not granted: %v, %v", r, err)
		}
	}
	// Preferred election cannot pick 2 while it shuts down.
	el, err := h.admin.ElectLeaders(t.Context(), &twinlogv1.ElectLeadersRequest{Type: twinlogv1.ElectionType_ELECTION_TYPE_PREFERRED})
	if err != nil || len(el.GetResults()) != 6 {
		t.Fatalf("ElectLeaders = %v, %v", el, err)
	}
}

func TestConfigValidationAndBootstrap(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(Config{DataDir: dir, ClusterConfigs: map[string]string{"min.insync.replicas": "0"}}, Deps{}); err == nil {
		t.Fatal("min.insync.replicas=0 accepted")
	}
	if _, err := New(Config{DataDir: dir, ClusterConfigs: map[string]string{"no.such.key": "1"}}, Deps{}); err == nil {
		t.Fatal("unknown key accepted")
	}
	if _, err := New(Config{}, Deps{}); err == nil {
		t.Fatal("empty DataDir accepted")
	}
	cfg := Config{DataDir: dir, ClusterID: "boot", ClusterConfigs: map[string]string{
		"min.insync.replicas": "2", "unclean.recovery.strategy": "balanced"}}
	c, err := New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Offset() != 1 || c.state.ClusterConfigs()["min.insync.replicas"] != "2" || len(c.state.ClusterConfigs()) != 1 {
		t.Fatalf("bootstrap: offset %d configs %v", c.Offset(), c.state.ClusterConfigs())
	}
	c.Close()
	// A second start with other file values keeps the dynamic ones.
	cfg.ClusterConfigs["min.insync.replicas"] = "3"
	cfg.ClusterID = "other"
	if _, err := New(cfg, Deps{}); err == nil {
		t.Fatal("data dir of cluster boot opened as cluster other")
	}
	cfg.ClusterID = ""
	c, err = New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Offset() != 1 || c.state.ClusterConfigs()["min.insync.replicas"] != "2" || c.ClusterID() != "boot" {
		t.Fatalf("restart: offset %d configs %v id %s", c.Offset(), c.state.ClusterConfigs(), c.ClusterID())
	}
}

// TestShutdownEndsLongPolls: a parked FetchMetadata returns promptly when
// the controller stops, and health turns NOT_SERVING.
func TestShutdownEndsLongPolls(t *testing.T) {
	nw := newNet()
	h := startController(t, t.TempDir(), newClock(), nw)
	h.upBrokers(1)
	conn, err := nw.dial(h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	done := make(chan error, 1)
	go func() {
		_, err := twinlogv1.NewControllerServiceClient(conn).FetchMetadata(context.Background(),
			&twinlogv1.FetchMetadataRequest{FromOffset: h.c.Offset() + 1, MaxWaitMs: 600_000})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	h.stop()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("long poll outlived shutdown")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
}

// TestNewCreatesDataDir: a fresh data dir (as in a first start) is created
// rather than failing with ENOENT.
func TestNewCreatesDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "controller")
	c, err := New(Config{DataDir: dir}, Deps{})
	if err != nil {
		t.Fatalf("New with a missing data dir: %v", err)
	}
	c.Close()
	if _, err := os.Stat(filepath.Join(dir, "controller.db")); err != nil {
		t.Fatal(err)
	}
}

// TestRefusedStopSyncsNothing: a StopMirrorTopics the state refuses for
// every topic (an unknown mirror, a topic not in the mirror) is answered
// before the offset sync that precedes a stop (issue 16), so it asks the
// source nothing and commits nothing here; an accepted stop still syncs.
func TestRefusedStopSyncsNothing(t *testing.T) {
	nw := newNet()
	h := startController(t, t.TempDir(), newClock(), nw)
	h.upBrokers(3)
	h.createTopic("m", 1, 3, nil)
	h.c.mu.RLock()
	mid := h.c.state.Topic("m").GetTopicId()
	h.c.mu.RUnlock()
	src := &fakeSource{topics: []*twinlogv1.MetadataTopic{srcTopic("m", mid, 1)}, configs: map[string][]*twinlogv1.ConfigEntry{"m": nil}}
	startFakeSource(t, nw, "a:9091", src)
	cm, err := h.mirror.CreateMirror(t.Context(), &twinlogv1.CreateMirrorRequest{Name: "mx", SourceBootstrap: []string{"a:9091"}, Topics: []string{"m"}})
	if err != nil || cm.GetError() != ecNone {
		t.Fatalf("CreateMirror = %v, %v", cm, err)
	}
	// The periodic sync runs once soon after the mirror's creation, then
	// every 30 s: wait for that first one.
	synced := func() bool {
		r, err := h.mirror.DescribeMirrors(t.Context(), &twinlogv1.DescribeMirrorsRequest{Names: []string{"mx"}})
		return err == nil && r.GetMirrors()[0].GetOffsetSync().GetSyncedAtMs() > 0
	}
	for deadline := time.Now().Add(10 * time.Second); !synced(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no offset sync within 10 s of the mirror's creation")
		}
	}
	before := src.metadataCalls.Load()
	for _, req := range []*twinlogv1.StopMirrorTopicsRequest{
		{Mirror: "mx", Topics: []string{"not-mirrored"}},
		{Mirror: "mx", Topics: []string{"not-mirrored"}, WaitForCatchUp: true, TimeoutMs: 60_000},
	} {
		r, err := h.mirror.StopMirrorTopics(t.Context(), req)
		if err != nil || len(r.GetTopics()) != 1 || r.GetTopics()[0].GetError() == ecNone {
			t.Fatalf("Stop of a topic not in the mirror = %v, %v; want its refusal", r, err)
		}
	}
	if n := src.metadataCalls.Load(); n != before {
		t.Fatalf("refused stops asked the source %d times (an offset sync ran)", n-before)
	}
	r, err := h.mirror.StopMirrorTopics(t.Context(), &twinlogv1.StopMirrorTopicsRequest{Mirror: "mx", Topics: []string{"m"}})
	if err != nil || r.GetTopics()[0].GetError() != ecNone {
		t.Fatalf("Stop = %v, %v", r, err)
	}
	if src.metadataCalls.Load() == before {
		t.Fatal("an accepted stop ran no offset sync")
	}
}
