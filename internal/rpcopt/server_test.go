package rpcopt_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

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
