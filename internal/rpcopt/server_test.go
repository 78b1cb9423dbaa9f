package rpcopt_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/twinlog/twinlog/internal/rpcopt"
)

func TestCapWait(t *testing.T) {
	const max = time.Minute
	for _, c := range []struct{ in, want time.Duration }{
		{0, max}, {-time.Second, max}, {time.Second, time.Second}, {max, max}, {time.Duration(1<<63 - 1), max},
	} {
		if got := rpcopt.CapWait(c.in, max); got != c.want {
			t.Errorf("CapWait(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// DeadlineUnary keeps a client's earlier deadline and shortens a later one.
func TestDeadlineUnary(t *testing.T) {
	ic := rpcopt.DeadlineUnary(time.Minute)
	left := func(ctx context.Context) time.Duration {
		var d time.Duration
		_, _ = ic(ctx, nil, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
			dl, ok := ctx.Deadline()
			if !ok {
				t.Fatal("no deadline")
			}
			d = time.Until(dl)
			return nil, nil
		})
		return d
	}
	if d := left(context.Background()); d <= 0 || d > time.Minute {
		t.Fatalf("no client deadline: %v left", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if d := left(ctx); d > time.Minute {
		t.Fatalf("client deadline of an hour: %v left", d)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if d := left(ctx); d > time.Second {
		t.Fatalf("client deadline of a second: %v left", d)
	}
}

// TestToStatus: a status passes unchanged, the caller's rules come first
// (wrapped errors too), then a context's end, and the rest is Internal;
// the message is kept.
func TestToStatus(t *testing.T) {
	errBusy := errors.New("busy")
	rules := []rpcopt.StatusRule{{Err: errBusy, Code: codes.Unavailable}}
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{status.Error(codes.NotFound, "gone"), codes.NotFound},
		{fmt.Errorf("store: %w", errBusy), codes.Unavailable},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{errors.New("boom"), codes.Internal},
	} {
		got := rpcopt.ToStatus(tc.err, rules...)
		if status.Code(got) != tc.want || status.Convert(got).Message() != status.Convert(tc.err).Message() {
			t.Errorf("ToStatus(%v) = %v, want code %v with its message", tc.err, got, tc.want)
		}
	}
	if rpcopt.ToStatus(nil, rules...) != nil {
		t.Error("ToStatus(nil) is not nil")
	}
}
