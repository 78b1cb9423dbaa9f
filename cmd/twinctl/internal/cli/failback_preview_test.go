package cli

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/brokertest"
)

// TestFailbackSaysWhatItDiscards: after a planned failover A → B, A takes
// 3 records B never copied. `mirrors create b-to-a --dry-run` on A shows
// per partition that the failback removes them (truncation offset,
// records, committed records), as a table and as JSON Lines, and changes
// nothing; the create itself prints the same before it runs, and then
// removes exactly them.
func TestFailbackSaysWhatItDiscards(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two clusters")
	}
	a, b := brokertest.TwoClusters(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a.CreateTopic("orders", 1, 3, nil)
	a.MustProduce(ctx, "orders", 0, -1, []byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e"))
	b.CreateMirror("a-to-b", a, "orders")
	b.WaitMirrorState("orders", 0, twinlogv1.MirrorState_MIRROR_STATE_MIRRORING)
	run := clusterCLI(ctx, t, a)
	ctlA, ctlB := a.ControllerAddr(), b.ControllerAddr()
	if out, stderr, code := run(ctlB, "mirrors", "stop", "a-to-b", "orders", "--wait-for-catch-up"); code != ExitOK {
		t.Fatalf("stop: %d %s %s", code, out, stderr)
	}
	a.MustProduce(ctx, "orders", 0, -1, []byte("late-1"), []byte("late-2"), []byte("late-3"))
	leader, _ := a.Leader("orders", 0)
	src := strings.Join(b.BootstrapAddrs(), ",")

	out, stderr, code := run(ctlA, "mirrors", "create", "b-to-a", "--source", src, "orders", "--dry-run")
	if code != ExitOK {
		t.Fatalf("--dry-run: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[1]), " ") != "orders 0 "+strconv.Itoa(int(leader))+" 0 0/8/8 5 3 3 -" ||
		!strings.HasPrefix(lines[2], "the LMLE truncation removes 3 records here, 3 of them committed") {
		t.Fatalf("--dry-run table:\n%s", out)
	}
	out, _, code = run(ctlA, "--json", "mirrors", "create", "b-to-a", "--source", src, "orders", "--dry-run")
	if code != ExitOK || !strings.Contains(out, `"truncation_offset":5,"records_removed":3,"committed_records_removed":3`) {
		t.Fatalf("--dry-run --json: %d %s", code, out)
	}
	if n := a.LogEndOffset(leader, "orders", 0); n != 8 {
		t.Fatalf("A's LEO %d after the dry runs, want 8 (nothing changed)", n)
	}
	if d, err := a.MirrorAdmin().DescribeMirrors(ctx, &twinlogv1.DescribeMirrorsRequest{}); err != nil || len(d.GetMirrors()) != 0 {
		t.Fatalf("mirrors on A after the dry runs: %v %v", d, err)
	}

	out, stderr, code = run(ctlA, "mirrors", "create", "b-to-a", "--source", src, "orders")
	if code != ExitOK || !strings.Contains(out, "mirror b-to-a topic orders partition 0: truncating at offset 5 (past LMLE 0) removes 3 records, 3 of them committed here") ||
		!strings.Contains(out, "mirror b-to-a topic orders: created") {
		t.Fatalf("create: %d\n%s\n%s", code, out, stderr)
	}
	a.WaitFor("A follows B without its 3 late records", func() bool {
		l, _ := a.Leader("orders", 0)
		return a.LogString(l, "orders", 0) == b.LeaderLog("orders", 0)
	})
}
