package coord

import (
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twinlog/twinlog/group"
)

type countingObserver struct{ rebalances, commits atomic.Int64 }

func (o *countingObserver) Rebalanced()     { o.rebalances.Add(1) }
func (o *countingObserver) Committed(n int) { o.commits.Add(int64(n)) }

// TestStats: groups are counted by state; each committed partition's lag
// is the high watermark minus the offset (0 for a commit ahead of it),
// sorted; partitions this broker does not host and those beyond the
// series limit are counted as unreported; the observer counts committed
// partitions and completed rebalances.
func TestStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFakeEnv(t, 2)
		obs := &countingObserver{}
		h, err := New(Config{Group: delayedGroups(100), ReconcileInterval: 5 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Observer: obs}, e)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close(); e.stop() })
		loaded(h)
		recv(t, "commit g1", commit(h, t.Context(), simpleCommit("g1", tpo{"t", 0, 5}, tpo{"t", 1, 9})))
		recv(t, "commit g2", commit(h, t.Context(), simpleCommit("g2", tpo{"t", 0, 2}, tpo{"u", 0, 1})))
		if n := obs.commits.Load(); n != 4 {
			t.Fatalf("observer counted %d committed partitions, want 4", n)
		}
		hw := func(topic string, p int32) (int64, bool) {
			switch {
			case topic == "t" && p == 0:
				return 10, true
			case topic == "t" && p == 1:
				return 8, true
			}
			return 0, false // u is not hosted here
		}
		st := h.Stats(hw, 10)
		if st.Groups["Empty"] != 2 || len(st.Groups) != 1 {
			t.Fatalf("groups by state %v, want 2 Empty", st.Groups)
		}
		want := []Lag{{"g1", "t", 0, 5}, {"g1", "t", 1, 0}, {"g2", "t", 0, 8}}
		if !slices.Equal(st.Lag, want) || st.LagDropped != 1 {
			t.Fatalf("lag %v (%d unreported), want %v (1)", st.Lag, st.LagDropped, want)
		}
		if st := h.Stats(hw, 2); !slices.Equal(st.Lag, want[:2]) || st.LagDropped != 2 {
			t.Fatalf("with a limit of 2: %v (%d unreported)", st.Lag, st.LagDropped)
		}

		j := join(h, t.Context(), "g3")
		unanswered(t, "join", j)
		if n := obs.rebalances.Load(); n != 0 {
			t.Fatalf("observer counted %d rebalances before one completed", n)
		}
		e.fire(false) // the end of the initial rebalance delay
		r := recv(t, "join", j)
		if r.err != nil || r.v.ErrorCode != group.None {
			t.Fatalf("join: %+v %v", r.v, r.err)
		}
		if n := obs.rebalances.Load(); n != 1 {
			t.Fatalf("observer counted %d rebalances, want 1", n)
		}
	})
}
