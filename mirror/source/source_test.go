package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/state"
)

// fakeSource is a source cluster behind a Transport: per address, a
// Metadata answer or an error; it records every call in order. It answers
// synchronously (the Transport contract allows any goroutine).
type fakeSource struct {
	calls    []string
	metadata map[string]*pb.MetadataResponse
	down     map[string]error
	lmle     map[string]*pb.GetLastMirroredEpochsResponse
	lmleErr  error
	fetch    func(req *pb.FetchRequest) (*pb.FetchResponse, error)
	timeouts []time.Duration
}

func (f *fakeSource) Metadata(_ context.Context, addr string, timeout time.Duration, req *pb.MetadataRequest, done func(*pb.MetadataResponse, error)) {
	f.calls = append(f.calls, "metadata "+addr+" "+fmt.Sprint(req.GetTopics()))
	f.timeouts = append(f.timeouts, timeout)
	if err := f.down[addr]; err != nil {
		done(nil, err)
		return
	}
	resp := f.metadata[addr]
	if resp == nil {
		done(nil, errors.New("connection refused"))
		return
	}
	done(resp, nil)
}

func (f *fakeSource) Fetch(_ context.Context, addr string, timeout time.Duration, req *pb.FetchRequest, done func(*pb.FetchResponse, error)) {
	f.calls = append(f.calls, "fetch "+addr)
	f.timeouts = append(f.timeouts, timeout)
	done(f.fetch(req))
}

func (f *fakeSource) LastMirroredEpochs(_ context.Context, addr string, timeout time.Duration, req *pb.GetLastMirroredEpochsRequest, done func(*pb.GetLastMirroredEpochsResponse, error)) {
	f.calls = append(f.calls, "lmle "+addr)
	if f.lmleErr != nil {
		done(nil, f.lmleErr)
		return
	}
	done(f.lmle[addr], nil)
}

// cluster is a source's Metadata answer: brokers 1..3 at b1:1 … b3:3,
// topic t (id "T", 2 partitions, leaders 2 and -1) and __mirror_state (1
// partition led by 3).
func cluster() *pb.MetadataResponse {
	return &pb.MetadataResponse{
		ClusterId: "src",
		Brokers:   []*pb.MetadataBroker{{Id: 3, Host: "b3", Port: 3}, {Id: 1, Host: "b1", Port: 1}, {Id: 2, Host: "b2", Port: 2}},
		Topics: []*pb.MetadataTopic{
			{Name: "t", TopicId: "T", Partitions: []*pb.MetadataPartition{{Index: 0, LeaderId: 2, LeaderEpoch: 7}, {Index: 1, LeaderId: -1}}},
			{Name: state.Topic, TopicId: "S", Partitions: []*pb.MetadataPartition{{Index: 0, LeaderId: 3, LeaderEpoch: 1}}},
		},
	}
}

type leaderOut struct {
	l    PartitionLeader
	code pb.ErrorCode
	err  error
}

func leader(c *Client, tp twinlog.TopicPartition, refresh bool) leaderOut {
	var out *leaderOut
	c.Leader(context.Background(), tp, refresh, func(l PartitionLeader, code pb.ErrorCode, err error) {
		if out != nil {
			panic("done called twice")
		}
		out = &leaderOut{l, code, err}
	})
	if out == nil {
		panic("done not called")
	}
	return *out
}

var t0 = twinlog.TopicPartition{Topic: "t", Partition: 0}

// TestLeaderAsksBootstrapInOrderThenCaches: the first answering bootstrap
// address wins; the cache answers without an RPC until a refresh, which
// asks the learnt brokers first, in id order.
func TestLeaderAsksBootstrapInOrderThenCaches(t *testing.T) {
	f := &fakeSource{metadata: map[string]*pb.MetadataResponse{"boot2": cluster(), "b1:1": cluster()}}
	c := New(f, []string{"boot1", "boot2", "boot3"}, time.Second)
	got := leader(c, t0, false)
	want := PartitionLeader{TopicID: "T", Leader: 2, LeaderEpoch: 7, Addr: "b2:2"}
	if got.err != nil || got.code != pb.ErrorCode_ERROR_CODE_NONE || got.l != want {
		t.Fatalf("Leader = %+v, want %+v", got, want)
	}
	wantCalls := []string{"metadata boot1 [t __mirror_state]", "metadata boot2 [t __mirror_state]"}
	if !slices.Equal(f.calls, wantCalls) {
		t.Fatalf("calls %q, want %q", f.calls, wantCalls)
	}
	if c.ClusterID() != "src" {
		t.Errorf("ClusterID %q, want src", c.ClusterID())
	}
	if got := leader(c, t0, false); got.l != want || len(f.calls) != 2 {
		t.Fatalf("cached Leader = %+v after %d calls, want %+v without a call", got, len(f.calls), want)
	}
	f.calls = nil
	f.down = map[string]error{"b1:1": errors.New("down")}
	f.metadata["b2:2"] = cluster()
	if got := leader(c, t0, true); got.l != want {
		t.Fatalf("refreshed Leader = %+v", got)
	}
	wantCalls = []string{"metadata b1:1 [t __mirror_state]", "metadata b2:2 [t __mirror_state]"}
	if !slices.Equal(f.calls, wantCalls) {
		t.Fatalf("refresh calls %q, want %q (known brokers in id order)", f.calls, wantCalls)
	}
	if f.timeouts[0] != time.Second {
		t.Errorf("metadata timeout %v, want the client's 1s", f.timeouts[0])
	}
}

// TestLeaderCodes: a partition without a live leader, a topic or partition
// the source lacks, and a source that does not answer.
func TestLeaderCodes(t *testing.T) {
	f := &fakeSource{metadata: map[string]*pb.MetadataResponse{"boot": cluster()}}
	c := New(f, []string{"boot"}, time.Second)
	for _, tc := range []struct {
		tp   twinlog.TopicPartition
		code pb.ErrorCode
	}{
		{twinlog.TopicPartition{Topic: "t", Partition: 1}, pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER},
		{twinlog.TopicPartition{Topic: "t", Partition: 2}, pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION},
		{twinlog.TopicPartition{Topic: "gone", Partition: 0}, pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION},
	} {
		if got := leader(c, tc.tp, false); got.err != nil || got.code != tc.code {
			t.Errorf("Leader(%v) = %+v, want %v", tc.tp, got, tc.code)
		}
	}
	dead := New(&fakeSource{}, []string{"x", "y"}, time.Second)
	if got := leader(dead, t0, false); !errors.Is(got.err, ErrUnreachable) {
		t.Errorf("Leader of an unreachable source: %+v, want ErrUnreachable", got)
	}
}

// TestTrack: the same bootstrap keeps what was learnt; another drops it;
// the configured source cluster id wins over the one answered.
func TestTrack(t *testing.T) {
	f := &fakeSource{metadata: map[string]*pb.MetadataResponse{"boot": cluster()}}
	c := New(f, []string{"boot"}, time.Second)
	leader(c, t0, false)
	if id := c.Track([]string{"boot"}, ""); id != "src" {
		t.Errorf("Track(same, \"\") = %q, want the answered src", id)
	}
	if id := c.Track([]string{"boot"}, "configured"); id != "configured" {
		t.Errorf("Track(same, configured) = %q", id)
	}
	if c.Topic("t") == nil {
		t.Fatal("the same bootstrap dropped the cache")
	}
	if id := c.Track([]string{"other"}, ""); id != "" || c.Topic("t") != nil {
		t.Errorf("another bootstrap kept id %q / topic %v", id, c.Topic("t"))
	}
}

type lmleOut struct {
	lmle twinlog.Epoch
	code pb.ErrorCode
	err  error
}

func lastMirrored(c *Client, topicID string, tp twinlog.TopicPartition) lmleOut {
	var out lmleOut
	c.LastMirroredEpoch(context.Background(), "dst", topicID, tp, func(l twinlog.Epoch, code pb.ErrorCode, err error) { out = lmleOut{l, code, err} })
	return out
}

// TestLastMirroredEpoch: asked of the __mirror_state partition's leader
// (any broker, the lowest id, without __mirror_state); refused without
// asking when the source's metadata does not show the partition under the
// mirror topic's id; a PermissionDenied refusal is its code, not an error.
func TestLastMirroredEpoch(t *testing.T) {
	answer := &pb.GetLastMirroredEpochsResponse{Partitions: []*pb.LastMirroredEpoch{{Partition: 0, Lmle: 5}}}
	f := &fakeSource{metadata: map[string]*pb.MetadataResponse{"boot": cluster()},
		lmle: map[string]*pb.GetLastMirroredEpochsResponse{"b3:3": answer, "b1:1": answer}}
	c := New(f, []string{"boot"}, time.Second)
	if got := lastMirrored(c, "T", t0); got != (lmleOut{5, pb.ErrorCode_ERROR_CODE_NONE, nil}) {
		t.Fatalf("LastMirroredEpoch = %+v, want 5", got)
	}
	if f.calls[len(f.calls)-1] != "lmle b3:3" {
		t.Fatalf("asked %q, want the __mirror_state leader b3:3", f.calls[len(f.calls)-1])
	}
	for _, tc := range []struct {
		topicID string
		tp      twinlog.TopicPartition
		code    pb.ErrorCode
	}{
		{"OTHER", t0, pb.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID},
		{"T", twinlog.TopicPartition{Topic: "t", Partition: 5}, pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION},
		{"G", twinlog.TopicPartition{Topic: "gone", Partition: 0}, pb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION},
	} {
		f.calls = nil
		got := lastMirrored(c, tc.topicID, tc.tp)
		if got.code != tc.code || got.lmle != twinlog.NoEpoch || got.err != nil {
			t.Errorf("LastMirroredEpoch(%s, %v) = %+v, want %v", tc.topicID, tc.tp, got, tc.code)
		}
		if slices.ContainsFunc(f.calls, func(c string) bool { return c[:4] == "lmle" }) {
			t.Errorf("LastMirroredEpoch(%s, %v) asked the source: %q", tc.topicID, tc.tp, f.calls)
		}
	}

	noState := cluster()
	noState.Topics = noState.Topics[:1]
	f.metadata["boot"], f.metadata["b1:1"] = noState, noState
	c = New(f, []string{"boot"}, time.Second)
	if got := lastMirrored(c, "T", t0); got.lmle != 5 || f.calls[len(f.calls)-1] != "lmle b1:1" {
		t.Errorf("without __mirror_state: %+v asked %q, want 5 from b1:1 (lowest id)", got, f.calls[len(f.calls)-1])
	}

	f.lmleErr = status.Error(codes.PermissionDenied, "CLUSTER_AUTHORIZATION_FAILED: principal dst may not")
	got := lastMirrored(c, "T", t0)
	if got.err != nil || got.code == pb.ErrorCode_ERROR_CODE_NONE {
		t.Errorf("denied: %+v, want a code and no error", got)
	}
	f.lmleErr = status.Error(codes.Unavailable, "not loaded")
	if got := lastMirrored(c, "T", t0); got.err == nil {
		t.Errorf("unavailable: %+v, want the error (retried by the run)", got)
	}
}

// TestFetch: the request as the source expects it (a MIRROR fetcher, the
// topic id, the wait within the deadline) and its answers.
func TestFetch(t *testing.T) {
	var sent *pb.FetchRequest
	f := &fakeSource{fetch: func(req *pb.FetchRequest) (*pb.FetchResponse, error) {
		sent = req
		return &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{{Topic: "t", HighWatermark: 9}}}, nil
	}}
	c := New(f, nil, time.Second)
	r := FetchRequest{RequesterClusterID: "dst", TopicPartition: t0, TopicID: "T", FetchOffset: 4, CurrentLeaderEpoch: 7,
		LastFetchedEpoch: 6, MaxWait: 500 * time.Millisecond, MaxBytes: 1 << 20}
	var got *pb.FetchPartitionResponse
	var gotErr error
	c.Fetch(context.Background(), "b2:2", r, func(pr *pb.FetchPartitionResponse, err error) { got, gotErr = pr, err })
	if gotErr != nil || got.GetHighWatermark() != 9 {
		t.Fatalf("Fetch = %v, %v", got, gotErr)
	}
	fp := sent.GetPartitions()[0]
	if sent.GetFetcherType() != pb.FetcherType_FETCHER_TYPE_MIRROR || sent.GetReplicaId() != -1 || sent.GetRequesterClusterId() != "dst" ||
		sent.GetMaxWaitMs() != 500 || fp.GetTopicId() != "T" || fp.GetFetchOffset() != 4 || fp.GetCurrentLeaderEpoch() != 7 || fp.GetLastFetchedEpoch() != 6 {
		t.Errorf("sent %v", sent)
	}
	if f.timeouts[0] != 1500*time.Millisecond {
		t.Errorf("fetch deadline %v, want the wait plus the timeout", f.timeouts[0])
	}

	f.fetch = func(*pb.FetchRequest) (*pb.FetchResponse, error) {
		return nil, status.Error(codes.PermissionDenied, "TOPIC_AUTHORIZATION_FAILED: no Mirror on t")
	}
	c.Fetch(context.Background(), "b2:2", r, func(pr *pb.FetchPartitionResponse, err error) { got, gotErr = pr, err })
	if gotErr != nil || got.GetError() == pb.ErrorCode_ERROR_CODE_NONE || got.GetTopic() != "t" {
		t.Errorf("denied fetch = %v, %v; want the refusal as the partition's code", got, gotErr)
	}
	f.fetch = func(*pb.FetchRequest) (*pb.FetchResponse, error) { return &pb.FetchResponse{}, nil }
	c.Fetch(context.Background(), "b2:2", r, func(pr *pb.FetchPartitionResponse, err error) { got, gotErr = pr, err })
	if gotErr == nil {
		t.Errorf("an answer without the partition: %v, want an error", got)
	}
}

func at(offset int64, leaderEpoch int32) *pb.MetadataResponse {
	r := cluster()
	r.MetadataOffset = offset
	r.Topics[0].Partitions[0].LeaderEpoch = leaderEpoch
	return r
}

// TestRefreshSkipsLaggingAnswers: an answer older than the cache's (a
// broker whose metadata lags) gives way to a fresher one from the next
// address; when none answers better the freshest lagging one is taken (a
// source whose offsets went back must not stall the mirror); another
// cluster's answer is never "lagging". An LMLE query tells the broker asked
// the offset it must have reached.
func TestRefreshSkipsLaggingAnswers(t *testing.T) {
	f := &fakeSource{metadata: map[string]*pb.MetadataResponse{"boot": at(10, 1)}}
	c := New(f, []string{"boot"}, time.Second)
	leader(c, t0, false)
	f.metadata = map[string]*pb.MetadataResponse{"b1:1": at(8, 2), "b2:2": at(12, 3), "b3:3": at(11, 4), "boot": at(9, 5)}
	if got := leader(c, t0, true); got.l.LeaderEpoch != 3 {
		t.Fatalf("refresh took LE %d, want 3 (b2's offset 12; b1's 8 lags)", got.l.LeaderEpoch)
	}
	f.metadata = map[string]*pb.MetadataResponse{"b1:1": at(7, 6), "b2:2": at(9, 7), "b3:3": at(8, 8), "boot": at(5, 9)}
	if got := leader(c, t0, true); got.err != nil || got.l.LeaderEpoch != 7 {
		t.Fatalf("all lagging: %+v, want the freshest (b2's offset 9, LE 7)", got)
	}
	other := at(1, 10)
	other.ClusterId = "rebuilt"
	f.metadata = map[string]*pb.MetadataResponse{"b1:1": other}
	if got := leader(c, t0, true); got.l.LeaderEpoch != 10 || c.ClusterID() != "rebuilt" {
		t.Fatalf("another cluster's answer: %+v (cluster %q), want it taken", got, c.ClusterID())
	}

	var asked *pb.GetLastMirroredEpochsRequest
	tr := &recordingLMLE{fakeSource: &fakeSource{metadata: map[string]*pb.MetadataResponse{"boot": at(42, 1)}}, asked: &asked}
	c = New(tr, []string{"boot"}, time.Second)
	lastMirrored(c, "T", t0)
	if asked.GetMinMetadataOffset() != 42 {
		t.Errorf("LMLE query min_metadata_offset %d, want the answer's 42", asked.GetMinMetadataOffset())
	}
}

type recordingLMLE struct {
	*fakeSource
	asked **pb.GetLastMirroredEpochsRequest
}

func (r *recordingLMLE) LastMirroredEpochs(_ context.Context, _ string, _ time.Duration, req *pb.GetLastMirroredEpochsRequest, done func(*pb.GetLastMirroredEpochsResponse, error)) {
	*r.asked = req
	done(&pb.GetLastMirroredEpochsResponse{Partitions: []*pb.LastMirroredEpoch{{Partition: 0, Lmle: 1}}}, nil)
}
