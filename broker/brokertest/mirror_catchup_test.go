package brokertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
)

// TestMirrorStopCatchUpOnFreshFacts is SPEC §6.7 step 1 against a stale
// report (the docker chaos run, seed 3: a planned failover lost 723 acked
// writes). B mirrors A and is caught up; B's leader's mirror fetches are then
// held, so its heartbeats keep saying MIRRORING, lag 0, no error, at the old
// source HW, while A acknowledges more records (A's producers then pause, as
// in a planned failover). Stop{waitForCatchUp} must not stop on that report:
// it times out with nothing changed, naming the fresh HWs. Once the fetches
// pass again, the same stop waits until B has committed every acknowledged
// record of A, then stops, and B holds all of them.
func TestMirrorStopCatchUpOnFreshFacts(t *testing.T) {
	const (
		before = 5  // records B copied before its fetcher was held
		after  = 20 // records A acknowledged while B's fetcher was held
	)
	nw := NewNetwork()
	a := NewCluster(t, Options{Cluster: "a", Network: nw})
	// A held mirror fetch ends (and sets lastError) only at its RPC
	// deadline: keep that beyond the test so the stale report stays clean,
	// like the report of a leader that died without noticing anything.
	b := NewCluster(t, Options{Cluster: "b", Network: nw, Configure: func(c *broker.Config) { c.RPCTimeout = 60 * time.Second }})
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()

	mirrorCaughtUp(ctx, a, b, before)

	// Hold B's leader's mirror fetches; once one waits in the gate none is
	// in flight, so nothing A writes from now on reaches B.
	bl, _ := b.Leader("t", 0)
	b.HoldMirrorFetches(bl, "t", 0)
	t.Cleanup(func() { b.ReleaseMirrorFetches(bl, "t", 0) })
	b.WaitFor("B's mirror fetch held", func() bool { return b.MirrorFetchHeld(bl, "t", 0) })
	produceN(ctx, a, "t", after, "a")
	if hw := highWatermark(ctx, t, a, "t"); hw != before+after {
		t.Fatalf("A's HW %d, want %d", hw, before+after)
	}

	// What the old check trusted: B's controller holds the leader's report
	// of MIRRORING, lag 0, no error, at the stale source HW.
	pollFor(t, "B's controller holds the stale lag-0 report", func() bool {
		p := describeMirrorPartition(ctx, b, "m")
		return p.GetState() == pb.MirrorState_MIRROR_STATE_MIRRORING && p.GetLeaderId() == int32(bl) &&
			p.GetLagRecords() == 0 && p.GetLastError() == "" &&
			p.GetSourceHighWatermark() == before && p.GetLogEndOffset() == before
	})

	// A timed-out stop changes nothing, so it may be asked again: a stop
	// whose only round was cut at its deadline (a loaded machine) names
	// the call that was cut, not the HWs; a later one completes a round.
	want := fmt.Sprintf("destination HW %d < source HW %d", before, before+after)
	var said []string
	for len(said) < 5 {
		res := b.StopMirror("m", true, 1500*time.Millisecond, "t")
		if len(res) != 1 || res[0].GetError() != pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT {
			t.Fatalf("stop with waitForCatchUp while B lacks %d acked records: %v", after, res)
		}
		said = append(said, res[0].GetErrorMessage())
		if strings.Contains(said[len(said)-1], want) {
			break
		}
	}
	if !strings.Contains(said[len(said)-1], want) {
		t.Fatalf("timed-out stops say %q, want one to name %q", said, want)
	}
	if st := b.MirrorState("t", 0); st.GetState() != pb.MirrorState_MIRROR_STATE_MIRRORING ||
		st.GetDesiredState() != pb.MirrorState_MIRROR_STATE_MIRRORING {
		t.Fatalf("after the timed-out stop (nothing may change): %v", st)
	}
	if r, err := b.ProduceTo(ctx, bl, "t", 0, -1, time.Second, []byte("bX")); err != nil || r.GetError() != pb.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC {
		t.Fatalf("produce on B after the timed-out stop: %v %v", r, err)
	}

	// The same stop, issued while B still lacks the records, waits for
	// them: it returns only after B has committed all of A's.
	type answer struct {
		resp  *pb.StopMirrorTopicsResponse
		err   error
		hw    int64 // B's leader's HW when the answer arrived
		hwErr error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := b.MirrorAdmin().StopMirrorTopics(ctx, &pb.StopMirrorTopicsRequest{Mirror: "m", Topics: []string{"t"},
			WaitForCatchUp: true, TimeoutMs: 60_000})
		hw, hwErr := leaderHW(ctx, b, bl, -1, "t")
		done <- answer{resp, err, hw, hwErr}
	}()
	select {
	case ans := <-done:
		t.Fatalf("stop answered while B's fetches were still held: %v %v", ans.resp, ans.err)
	default:
	}
	b.ReleaseMirrorFetches(bl, "t", 0)
	ans := <-done
	if ans.err != nil {
		t.Fatalf("StopMirrorTopics: %v", ans.err)
	}
	if err := mirrorResults("stop", ans.resp.GetTopics()); err != nil {
		t.Fatal(err)
	}
	if ans.hwErr != nil || ans.hw < before+after {
		t.Fatalf("stop answered with B's HW at %d (%v), below A's acked %d", ans.hw, ans.hwErr, before+after)
	}
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)

	// Every record A acknowledged is on B, same offsets, epochs and values.
	aRecs, aEnd := a.ConsumeAll(ctx, "t", 0)
	bRecs, bEnd := b.ConsumeAll(ctx, "t", 0)
	if len(aRecs) != before+after || aEnd != before+after {
		t.Fatalf("A holds %d records up to %d, want %d", len(aRecs), aEnd, before+after)
	}
	if len(bRecs) != len(aRecs) || bEnd != aEnd {
		t.Fatalf("B holds %d records up to %d, A %d up to %d", len(bRecs), bEnd, len(aRecs), aEnd)
	}
	for i := range aRecs {
		if fmt.Sprint(aRecs[i]) != fmt.Sprint(bRecs[i]) {
			t.Fatalf("record %d: A %v, B %v", i, aRecs[i], bRecs[i])
		}
	}
	if off := b.MustProduce(ctx, "t", 0, -1, []byte("b-after-stop")); off != before+after {
		t.Fatalf("first produce on B after the stop at %d, want %d", off, before+after)
	}
}

// highWatermark asks c's leader of topic-0 for its HW.
func highWatermark(ctx context.Context, t *testing.T, c *Cluster, topic string) int64 {
	t.Helper()
	l, le := c.Leader(topic, 0)
	hw, err := leaderHW(ctx, c, l, le, topic)
	if err != nil {
		t.Fatal(err)
	}
	return hw
}

// leaderHW is ListOffsets(HIGH_WATERMARK) of topic-0 on broker id in
// leader epoch le (−1: unchecked).
func leaderHW(ctx context.Context, c *Cluster, id twinlog.BrokerID, le twinlog.Epoch, topic string) (int64, error) {
	resp, err := c.FetchClient(id).ListOffsets(ctx, &pb.ListOffsetsRequest{Topics: []*pb.ListOffsetsTopic{{Name: topic,
		Partitions: []*pb.ListOffsetsPartition{{Index: 0, CurrentLeaderEpoch: int32(le), Spec: pb.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK}}}}})
	if err != nil {
		return -1, err
	}
	if p := resp.GetTopics()[0].GetPartitions()[0]; p.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		return -1, fmt.Errorf("ListOffsets HW on %d: %v", id, p.GetError())
	}
	return resp.GetTopics()[0].GetPartitions()[0].GetOffset(), nil
}

// describeMirrorPartition is the controller's view of mirror's only
// partition (nil if it has none).
func describeMirrorPartition(ctx context.Context, c *Cluster, mirror string) *pb.MirrorPartitionStatus {
	d, err := c.MirrorAdmin().DescribeMirrors(ctx, &pb.DescribeMirrorsRequest{Names: []string{mirror}})
	if err != nil || len(d.GetMirrors()) != 1 || len(d.GetMirrors()[0].GetPartitions()) != 1 {
		return nil
	}
	return d.GetMirrors()[0].GetPartitions()[0]
}

// TestMirrorStopCatchUpLeaderDeadNotFenced is the chaos run's seed 3 itself:
// B's leader of the partition dies (not yet fenced: B's session timeout is
// long) after reporting lag 0, A acknowledges more records, and the operator
// asks for a planned failover. The dead leader's last report must not count:
// the stop times out with nothing changed. Once B has fenced it and a new
// leader has copied A's records, the stop goes through and B holds every
// record A acknowledged.
func TestMirrorStopCatchUpLeaderDeadNotFenced(t *testing.T) {
	const (
		before = 5
		after  = 20
	)
	nw := NewNetwork()
	a := NewCluster(t, Options{Cluster: "a", Network: nw})
	b := NewCluster(t, Options{Cluster: "b", Network: nw, SessionTimeout: 6 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()

	mirrorCaughtUp(ctx, a, b, before)
	bl, _ := b.Leader("t", 0)
	pollFor(t, "B's controller holds the leader's lag-0 report", func() bool {
		p := describeMirrorPartition(ctx, b, "m")
		return p.GetState() == pb.MirrorState_MIRROR_STATE_MIRRORING && p.GetLeaderId() == int32(bl) &&
			p.GetLagRecords() == 0 && p.GetLastError() == "" && p.GetSourceHighWatermark() == before
	})

	b.KillBroker(bl)
	produceN(ctx, a, "t", after, "a")
	// Still B's leader in its controller's image, with its last report.
	if l, _, _, _, _ := b.PartitionInfo("t", 0); l != bl {
		t.Fatalf("B's leader moved to %d before the stop: raise SessionTimeout", l)
	}
	res := b.StopMirror("m", true, time.Second, "t")
	if len(res) != 1 || res[0].GetError() != pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT {
		t.Fatalf("stop with waitForCatchUp while B's leader is dead and lacks %d acked records: %v", after, res)
	}
	if !strings.Contains(res[0].GetErrorMessage(), "partition 0: destination:") {
		t.Fatalf("timed-out stop says %q, want the unreachable destination leader named", res[0].GetErrorMessage())
	}
	if d := describeMirrorPartition(ctx, b, "m"); d.GetDesiredState() != pb.MirrorState_MIRROR_STATE_MIRRORING {
		t.Fatalf("desired state after the timed-out stop (nothing may change): %v", d)
	}

	// B fences the dead broker and elects a follower, which resumes
	// mirroring; the stop waits for it to commit A's records.
	resp, err := b.MirrorAdmin().StopMirrorTopics(ctx, &pb.StopMirrorTopicsRequest{Mirror: "m", Topics: []string{"t"},
		WaitForCatchUp: true, TimeoutMs: 60_000})
	if err != nil {
		t.Fatalf("StopMirrorTopics: %v", err)
	}
	if err := mirrorResults("stop", resp.GetTopics()); err != nil {
		t.Fatal(err)
	}
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_STOPPED)
	aRecs, aEnd := a.ConsumeAll(ctx, "t", 0)
	bRecs, bEnd := b.ConsumeAll(ctx, "t", 0)
	if len(aRecs) != before+after || len(bRecs) != len(aRecs) || bEnd != aEnd {
		t.Fatalf("B holds %d records up to %d, A %d up to %d (want %d)", len(bRecs), bEnd, len(aRecs), aEnd, before+after)
	}
	for i := range aRecs {
		if fmt.Sprint(aRecs[i]) != fmt.Sprint(bRecs[i]) {
			t.Fatalf("record %d: A %v, B %v", i, aRecs[i], bRecs[i])
		}
	}
}

// mirrorCaughtUp creates t (one partition, RF 3) on a with n records, mirrors
// it to b as mirror m and waits until b's log equals a's.
func mirrorCaughtUp(ctx context.Context, a, b *Cluster, n int) {
	a.CreateTopic("t", 1, 3, nil)
	produceN(ctx, a, "t", n, "a")
	b.CreateMirror("m", a, "t")
	b.WaitMirrorState("t", 0, pb.MirrorState_MIRROR_STATE_MIRRORING)
	waitLog(b, "t", a.LeaderLog("t", 0))
}
