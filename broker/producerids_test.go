package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// blocks is a controller handing out consecutive blocks of n ids from
// start; repeat makes it hand out its first block again and again (a
// controller that lost its allocation).
type blocks struct {
	mu     sync.Mutex
	next   int64
	n      int32
	repeat bool
	calls  int
}

func (b *blocks) fetch(context.Context) (producerIDBlock, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	blk := producerIDBlock{Start: b.next, Len: b.n}
	if !b.repeat {
		b.next += int64(b.n)
	}
	return blk, nil
}

// TestProducerIDsNeverRepeat: many producers asking at once each get an id
// no other got; the blocks are fetched one at a time, each used up before
// the next is asked for.
func TestProducerIDsNeverRepeat(t *testing.T) {
	ctl := &blocks{next: 5 << 48, n: 7}
	a := newProducerIDs(ctl.fetch, nil)
	const callers, each = 32, 50
	ids := make(chan int64, callers*each)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				id, err := a.Next(t.Context())
				if err != nil {
					t.Error(err)
					return
				}
				ids <- id
			}
		})
	}
	wg.Wait()
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] || id < 5<<48 || id >= 5<<48+callers*each {
			t.Fatalf("id %d given twice or outside the blocks", id)
		}
		seen[id] = true
	}
	if want := (callers*each + 6) / 7; ctl.calls != want {
		t.Fatalf("%d blocks fetched for %d ids of blocks of 7, want %d", ctl.calls, callers*each, want)
	}
}

// TestProducerIDsRefuseARepeatedBlock: a block that overlaps ids given
// before is refused, never used, whatever the controller says.
func TestProducerIDsRefuseARepeatedBlock(t *testing.T) {
	ctl := &blocks{next: 100, n: 2, repeat: true}
	a := newProducerIDs(ctl.fetch, nil)
	seen := map[int64]bool{}
	for i := range 3 {
		id, err := a.Next(t.Context())
		if i < 2 {
			if err != nil || seen[id] {
				t.Fatalf("id %d: %d, %v", i, id, err)
			}
			seen[id] = true
			continue
		}
		if err == nil {
			t.Fatalf("id %d from a repeated block", id)
		}
	}
}

// TestProducerIDsFailureAndWait: a failed fetch fails only its caller's
// Next (the next call asks again); a caller waiting for another's fetch
// stops waiting when its context ends.
func TestProducerIDsFailureAndWait(t *testing.T) {
	errDown := errors.New("controller down")
	var fail atomic.Bool
	fail.Store(true)
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	var block atomic.Bool
	a := newProducerIDs(func(ctx context.Context) (producerIDBlock, error) {
		if block.Load() {
			entered <- struct{}{}
			<-release
		}
		if fail.Load() {
			return producerIDBlock{}, errDown
		}
		return producerIDBlock{Start: 10, Len: 1}, nil
	}, nil)
	if _, err := a.Next(t.Context()); !errors.Is(err, errDown) {
		t.Fatalf("Next with the controller down: %v", err)
	}
	fail.Store(false)
	if id, err := a.Next(t.Context()); err != nil || id != 10 {
		t.Fatalf("Next after the controller came back: %d, %v", id, err)
	}

	block.Store(true)
	done := make(chan error, 1)
	go func() { _, err := a.Next(context.Background()); done <- err }()
	<-entered
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := a.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting Next with its context ended: %v", err)
	}
	close(release)
	if err := <-done; err == nil {
		t.Fatal("a block at 10 again was used")
	}
}
