package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// The broker side of the shared loops' Envs (broker/session.Keeper,
// broker/metaloop.Loop, broker/alter.Send): each pause and each controller
// call runs on a goroutine of the broker's run (b.wg), so a stopping
// broker waits for the ones started and starts none once the run ends.

// errNoController: a controller call was not sent, for want of a
// connection.
var errNoController = errors.New("broker: no controller connection")

// runAfter calls f after d on a goroutine of the run, unless the run ends
// or the broker crashes first.
func (b *Broker) runAfter(d time.Duration, f func()) {
	b.goLoop(b.runCtx, func(ctx context.Context) {
		if sleep(ctx, d) && !b.crashed() {
			f()
		}
	})
}

// callController makes one controller call on a goroutine of the run,
// bounded by timeout, and hands its outcome to done; an error wrapping
// errNoController means it was never sent.
func callController[Resp any](b *Broker, timeout time.Duration, call func(context.Context, pb.ControllerServiceClient) (Resp, error), done func(Resp, error)) {
	b.goLoop(b.runCtx, func(ctx context.Context) {
		ctl, err := b.controller()
		if err != nil {
			var zero Resp
			done(zero, fmt.Errorf("%w: %w", errNoController, err))
			return
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		done(call(ctx, ctl))
	})
}
