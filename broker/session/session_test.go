package session_test

import (
	"testing"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/session"
)

// TestPreviousEpoch: the live registration's epoch once there is one, the
// clean-shutdown files' before.
func TestPreviousEpoch(t *testing.T) {
	if got := session.PreviousEpoch(7, 0); got != 7 {
		t.Errorf("first registration: %d, want the files' 7", got)
	}
	if got := session.PreviousEpoch(-1, 0); got != -1 {
		t.Errorf("after a crash: %d, want -1", got)
	}
	if got := session.PreviousEpoch(7, 12); got != 12 {
		t.Errorf("registering again: %d, want the live epoch 12", got)
	}
}

// TestReRegister: only STALE_BROKER_EPOCH for the epoch still held, and
// not while shutting down.
func TestReRegister(t *testing.T) {
	stale := pb.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH
	for _, c := range []struct {
		code          pb.ErrorCode
		sent, current int64
		shutting      bool
		want          bool
	}{
		{stale, 5, 5, false, true},
		{stale, 5, 6, false, false}, // answer to an earlier registration's heartbeat
		{stale, 5, 5, true, false},  // controlled shutdown: granted
		{pb.ErrorCode_ERROR_CODE_NONE, 5, 5, false, false},
		{pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT, 5, 5, false, false},
	} {
		if got := session.ReRegister(c.code, c.sent, c.current, c.shutting); got != c.want {
			t.Errorf("ReRegister(%v, sent %d, current %d, shutting %t) = %t, want %t", c.code, c.sent, c.current, c.shutting, got, c.want)
		}
	}
}
