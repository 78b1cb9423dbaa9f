package alter

import (
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

func answer(code pb.ErrorCode) *pb.AlterPartitionResponse {
	return &pb.AlterPartitionResponse{Error: code}
}

// TestAttempted: answers other than NOT_CONTROLLER go to the replica, even
// rejections; NOT_CONTROLLER and silence are retried with a doubling
// backoff capped at MaxBackoff; a proposal none of whose NotSentAborted
// attempts went out is aborted, but never once one was sent.
func TestAttempted(t *testing.T) {
	type step struct {
		sent bool
		resp *pb.AlterPartitionResponse
		want Verdict
		wait time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"answered", []step{{true, answer(pb.ErrorCode_ERROR_CODE_NONE), Deliver, 0}}},
		{"rejected", []step{{true, answer(pb.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION), Deliver, 0}}},
		{"not controller, then silence, then answered", []step{
			{true, answer(pb.ErrorCode_ERROR_CODE_NOT_CONTROLLER), Again, 100 * time.Millisecond},
			{true, nil, Again, 200 * time.Millisecond},
			{true, nil, Again, 400 * time.Millisecond},
			{true, nil, Again, 800 * time.Millisecond},
			{true, nil, Again, 1600 * time.Millisecond},
			{true, nil, Again, 2 * time.Second},
			{true, nil, Again, 2 * time.Second},
			{true, answer(pb.ErrorCode_ERROR_CODE_NONE), Deliver, 0},
		}},
		{"never sent", []step{
			{false, nil, Again, 100 * time.Millisecond},
			{false, nil, Again, 200 * time.Millisecond},
			{false, nil, Again, 400 * time.Millisecond},
			{false, nil, Again, 800 * time.Millisecond},
			{false, nil, Abort, 0},
		}},
		{"sent once, then not", []step{
			{true, nil, Again, 100 * time.Millisecond},
			{false, nil, Again, 200 * time.Millisecond},
			{false, nil, Again, 400 * time.Millisecond},
			{false, nil, Again, 800 * time.Millisecond},
			{false, nil, Again, 1600 * time.Millisecond},
			{false, nil, Again, 2 * time.Second},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Retry
			for i, s := range tc.steps {
				v, wait := r.Attempted(s.sent, s.resp)
				if v != s.want || wait != s.wait {
					t.Fatalf("attempt %d: %v after %v, want %v after %v", i, v, wait, s.want, s.wait)
				}
			}
		})
	}
}
