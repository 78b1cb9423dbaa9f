package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// groupOffsets returns group id's committed offsets as "topic-p=o", sorted;
// nil if the group does not exist.
func (f *fakeGroups) groupOffsets(id string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.groups[id]
	if !ok {
		return nil
	}
	out := []string{}
	for _, tp := range slices.SortedFunc(maps.Keys(g.offsets), compareTopicPart) {
		out = append(out, fmt.Sprintf("%s=%d", tp, g.offsets[tp]))
	}
	return out
}

// callsMatching are the recorded calls whose RPC is one of rpcs.
func (f *fakeGroups) callsMatching(rpcs ...string) []string {
	var out []string
	for _, c := range f.callsOf() {
		if slices.Contains(rpcs, strings.Fields(c)[1]) {
			out = append(out, c)
		}
	}
	return out
}

// groupsOutput is what a golden file of a groups command holds: stdout,
// then stderr and the exit code when there are any.
func groupsOutput(stdout, stderr string, code int) string {
	out := stdout
	if stderr != "" {
		out += "--- stderr\n" + stderr
	}
	if code != ExitOK {
		out += fmt.Sprintf("--- exit %d\n", code)
	}
	return out
}

// TestGroupsGolden runs each groups command against a fresh goldenGroups
// and checks its output (testdata/groups_*.golden) and what it changed.
func TestGroupsGolden(t *testing.T) {
	unchanged := func(t *testing.T, f *fakeGroups) {
		t.Helper()
		if c := f.callsMatching("CommitOffsets", "DeleteGroups"); len(c) > 0 {
			t.Errorf("calls that change groups: %v, want none", c)
		}
		if diff := cmp.Diff(goldenGroups().groupOffsets("audit"), f.groupOffsets("audit")); diff != "" {
			t.Errorf("audit's offsets changed (-want +got):\n%s", diff)
		}
	}
	offsets := func(id string, want ...string) func(*testing.T, *fakeGroups) {
		return func(t *testing.T, f *fakeGroups) {
			t.Helper()
			if diff := cmp.Diff(want, f.groupOffsets(id)); diff != "" {
				t.Errorf("%s's offsets (-want +got):\n%s", id, diff)
			}
		}
	}
	tests := []struct {
		name  string
		args  []string
		setup func(*fakeGroups)
		check func(*testing.T, *fakeGroups)
	}{
		{name: "groups_list", args: []string{"groups", "list"}, check: unchanged},
		{name: "groups_list_json", args: []string{"groups", "list", "--json"}, check: unchanged},
		{name: "groups_describe", args: []string{"groups", "describe", "orders-app", "audit", "idle"}, check: unchanged},
		{name: "groups_describe_json", args: []string{"groups", "describe", "orders-app", "idle", "--json"}, check: unchanged},
		{name: "groups_describe_unknown", args: []string{"groups", "describe", "audit", "nope"}, check: unchanged},
		// Offsets outlive a deleted topic: shown without a log end, not
		// an error.
		{name: "groups_describe_deleted_topic", args: []string{"groups", "describe", "batch"},
			setup: func(f *fakeGroups) { f.groups["batch"].offsets[topicPart{"gone", 0}] = 3 }},
		{name: "groups_reset_dry_run", args: []string{"groups", "reset-offsets", "audit", "--topic", "orders", "--to-earliest", "--dry-run"}, check: unchanged},
		{name: "groups_reset_dry_run_json", args: []string{"groups", "reset-offsets", "audit", "--topic", "orders:1,2", "--to-latest", "--dry-run", "--json"}, check: unchanged},
		{name: "groups_reset", args: []string{"groups", "reset-offsets", "audit", "--all-topics", "--to-latest"},
			check: offsets("audit", "orders-0=120", "orders-1=80")},
		{name: "groups_reset_json", args: []string{"groups", "reset-offsets", "batch", "--topic", "payments:0", "--to-offset", "20", "--json"},
			check: offsets("batch", "payments-0=20")},
		// --to-offset is moved into [log start, high watermark], with a
		// warning per partition moved.
		{name: "groups_reset_to_offset_clamped", args: []string{"groups", "reset-offsets", "audit", "--topic", "orders", "--to-offset", "90"},
			check: offsets("audit", "orders-0=90", "orders-1=80", "orders-2=0")},
		{name: "groups_reset_to_datetime", args: []string{"groups", "reset-offsets", "audit", "--topic", "orders", "--topic", "payments", "--to-datetime", "2025-06-15T15:07:30Z"},
			// fakeTimeBase is 2025-06-15T15:06:40Z: 50 s later is offset
			// 50; orders-2 has no record that new (its high watermark);
			// payments-0 ends at 42.
			check: offsets("audit", "orders-0=50", "orders-1=50", "orders-2=0", "payments-0=42")},
		// A new group is created by its first reset.
		{name: "groups_reset_new_group", args: []string{"groups", "reset-offsets", "fresh", "--topic", "payments", "--to-earliest"},
			check: offsets("fresh", "payments-0=5")},
		// A group with members: the coordinator refuses the commit with
		// UNKNOWN_MEMBER_ID, which says to stop the consumers.
		{name: "groups_reset_unknown_member", args: []string{"groups", "reset-offsets", "orders-app", "--topic", "orders", "--to-earliest"},
			check: offsets("orders-app", "orders-0=100", "orders-1=80", "payments-0=40")},
		{name: "groups_reset_dry_run_members", args: []string{"groups", "reset-offsets", "orders-app", "--all-topics", "--to-earliest", "--dry-run"}},
		{name: "groups_delete", args: []string{"groups", "delete", "audit", "idle"}, check: func(t *testing.T, f *fakeGroups) {
			if f.groupOffsets("audit") != nil || f.groupOffsets("idle") != nil {
				t.Errorf("audit or idle still exists")
			}
		}},
		{name: "groups_delete_json", args: []string{"groups", "delete", "batch", "--json"}, check: func(t *testing.T, f *fakeGroups) {
			if f.groupOffsets("batch") != nil {
				t.Errorf("batch still exists")
			}
		}},
		// NON_EMPTY_GROUP fails the command; the other group is deleted.
		{name: "groups_delete_non_empty", args: []string{"groups", "delete", "orders-app", "audit", "nope"}, check: func(t *testing.T, f *fakeGroups) {
			if f.groupOffsets("orders-app") == nil || f.groupOffsets("audit") != nil {
				t.Errorf("orders-app deleted or audit not")
			}
		}},
		// The coordinator moved: FindCoordinator names broker 3 twice more,
		// which answers NOT_COORDINATOR; the command finds it again and
		// succeeds within its retries.
		{name: "groups_describe_not_coordinator", args: []string{"groups", "describe", "audit"},
			setup: func(f *fakeGroups) { f.groups["audit"].movedFrom, f.groups["audit"].staleFinds = 3, 2 },
			check: func(t *testing.T, f *fakeGroups) {
				want := []string{
					"b1 FindCoordinator audit", "b3 DescribeGroups audit",
					"b1 FindCoordinator audit", "b3 DescribeGroups audit",
					"b1 FindCoordinator audit", "b1 DescribeGroups audit", "b1 FetchOffsets audit",
				}
				if diff := cmp.Diff(want, f.callsMatching("FindCoordinator", "DescribeGroups", "FetchOffsets")); diff != "" {
					t.Errorf("calls (-want +got):\n%s", diff)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goldenGroups()
			if tt.setup != nil {
				tt.setup(f)
			}
			h := startGroups(t, f)
			stdout, stderr, code := h.run(t, tt.args...)
			checkGolden(t, tt.name, groupsOutput(stdout, stderr, code))
			if tt.check != nil {
				tt.check(t, f)
			}
			if h.dialedTo("b4:9092") {
				t.Errorf("dialed the fenced broker b4:9092")
			}
		})
	}
}

func (h *harness) dialedTo(addr string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.dialed, addr)
}

// TestGroupsCoordinatorRetries: each command that talks to a coordinator
// finds it again after NOT_COORDINATOR (moved) and
// COORDINATOR_LOAD_IN_PROGRESS (loading), and gives up with exit 1 after
// groupAttempts tries, naming the code.
func TestGroupsCoordinatorRetries(t *testing.T) {
	commands := []struct {
		name  string
		args  []string
		check func(*fakeGroups) string // "" when the command did its work
	}{
		{"describe", []string{"groups", "describe", "audit"}, func(*fakeGroups) string { return "" }},
		{"reset", []string{"groups", "reset-offsets", "audit", "--all-topics", "--to-earliest"}, func(f *fakeGroups) string {
			if got := strings.Join(f.groupOffsets("audit"), " "); got != "orders-0=0 orders-1=10" {
				return "audit's offsets are " + got
			}
			return ""
		}},
		{"delete", []string{"groups", "delete", "audit"}, func(f *fakeGroups) string {
			if f.groupOffsets("audit") != nil {
				return "audit was not deleted"
			}
			return ""
		}},
	}
	faults := []struct {
		name  string
		setup func(*fakeGroup)
		ok    bool
	}{
		{"moved twice", func(g *fakeGroup) { g.movedFrom, g.staleFinds = 2, 2 }, true},
		{"loading twice", func(g *fakeGroup) { g.loading = 2 }, true},
		{"moved for good", func(g *fakeGroup) { g.movedFrom, g.staleFinds = 2, 1000 }, false},
	}
	for _, c := range commands {
		for _, fault := range faults {
			t.Run(c.name+"/"+fault.name, func(t *testing.T) {
				f := goldenGroups()
				fault.setup(f.groups["audit"])
				h := startGroups(t, f)
				_, stderr, code := h.run(t, c.args...)
				if !fault.ok {
					if code != ExitError || !strings.Contains(stderr, "gave up after 5 attempts") || !strings.Contains(stderr, "group audit: NOT_COORDINATOR") {
						t.Errorf("exit %d, stderr %q: want exit 1 giving up on NOT_COORDINATOR", code, stderr)
					}
					if n := len(f.callsMatching("FindCoordinator")); n != groupAttempts {
						t.Errorf("%d FindCoordinator calls, want %d", n, groupAttempts)
					}
					if msg := c.check(f); msg == "" && c.name != "describe" {
						t.Errorf("the command changed the group although every attempt failed")
					}
					return
				}
				if code != ExitOK {
					t.Fatalf("exit %d, stderr:\n%s", code, stderr)
				}
				if msg := c.check(f); msg != "" {
					t.Error(msg)
				}
			})
		}
	}
}

// TestGroupsListRetriesLoadingBroker: a broker whose coordinators are
// still loading is asked again; one that keeps failing fails the command
// after the list of the others is printed.
func TestGroupsListRetriesLoadingBroker(t *testing.T) {
	f := goldenGroups()
	f.groups["audit"].loading = 1 // broker 1's ListGroups
	h := startGroups(t, f)
	stdout, stderr, code := h.run(t, "groups", "list")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "\naudit ") {
		t.Errorf("stdout lacks audit:\n%s", stdout)
	}
	if n := len(slices.DeleteFunc(f.callsMatching("ListGroups"), func(c string) bool { return !strings.HasPrefix(c, "b1 ") })); n != 2 {
		t.Errorf("broker 1 asked %d times, want 2", n)
	}

	f = goldenGroups()
	f.groups["audit"].loading = 1000
	h = startGroups(t, f)
	stdout, stderr, code = h.run(t, "groups", "list")
	if code != ExitError || !strings.Contains(stderr, "broker 1 (b1:9092): COORDINATOR_LOAD_IN_PROGRESS") || !strings.Contains(stderr, "the list lacks broker 1's groups") {
		t.Errorf("exit %d, stderr %q: want exit 1 naming broker 1", code, stderr)
	}
	if !strings.Contains(stdout, "\norders-app ") || strings.Contains(stdout, "audit") {
		t.Errorf("stdout should list the other brokers' groups only:\n%s", stdout)
	}
}

// TestGroupsDescribeLeaderMoved: a partition whose leader moved since the
// Metadata answer (NOT_LEADER_OR_FOLLOWER) is asked again after a refresh.
func TestGroupsDescribeLeaderMoved(t *testing.T) {
	f := goldenGroups()
	f.logs[topicPart{"orders", 1}].staleMeta = 1
	h := startGroups(t, f)
	stdout, stderr, code := h.run(t, "groups", "describe", "audit")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "audit  orders  1          12              80              68") {
		t.Errorf("stdout lacks orders-1's log end 80 and lag 68:\n%s", stdout)
	}
	want := []string{
		"b1 Metadata orders",
		"b1 ListOffsets orders-0:HIGH_WATERMARK",
		"b3 ListOffsets orders-1:HIGH_WATERMARK", // the stale leader
		"b1 Metadata orders",
		"b2 ListOffsets orders-1:HIGH_WATERMARK",
	}
	if diff := cmp.Diff(want, f.callsMatching("Metadata", "ListOffsets")); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestGroupsResetUsage: reset-offsets needs one scope and one target; bad
// ones are usage errors (exit 2), unknown topics and partitions protocol
// errors (exit 1), and none of them commits anything.
func TestGroupsResetUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"no target", []string{"audit", "--all-topics"}, ExitUsage, "pass exactly one of --to-earliest"},
		{"two targets", []string{"audit", "--all-topics", "--to-earliest", "--to-offset", "3"}, ExitUsage, "pass exactly one of"},
		{"no scope", []string{"audit", "--to-earliest"}, ExitUsage, "--topic T[:P,P...] or pass --all-topics"},
		{"both scopes", []string{"audit", "--all-topics", "--topic", "orders", "--to-earliest"}, ExitUsage, "(not both)"},
		{"bad datetime", []string{"audit", "--all-topics", "--to-datetime", "yesterday"}, ExitUsage, "bad --to-datetime"},
		{"negative offset", []string{"audit", "--all-topics", "--to-offset", "-1"}, ExitUsage, "--to-offset must be ≥ 0"},
		{"bad partition", []string{"audit", "--topic", "orders:x", "--to-earliest"}, ExitUsage, "bad partition"},
		{"no group", []string{"--all-topics", "--to-earliest"}, ExitUsage, "takes one group id"},
		{"unknown topic", []string{"audit", "--topic", "nope", "--to-earliest"}, ExitError, "topic nope: does not exist"},
		{"unknown partition", []string{"audit", "--topic", "orders:0,7", "--to-earliest"}, ExitError, "partition orders-7: unknown topic or partition (topic orders has 3 partitions)"},
		{"all topics of a group without offsets", []string{"idle", "--all-topics", "--to-earliest"}, ExitError, "group idle has no committed offsets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goldenGroups()
			h := startGroups(t, f)
			_, stderr, code := h.run(t, append([]string{"groups", "reset-offsets"}, tt.args...)...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.wantCode, tt.want)
			}
			if c := f.callsMatching("CommitOffsets"); len(c) > 0 {
				t.Errorf("committed: %v", c)
			}
		})
	}
}

// TestGroupsArgs: describe and delete need group ids.
func TestGroupsArgs(t *testing.T) {
	h := startGroups(t, goldenGroups())
	for _, args := range [][]string{{"groups", "describe"}, {"groups", "delete"}, {"groups", "list", "x"}, {"groups"}} {
		if _, stderr, code := h.run(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d (stderr %q), want %d", args, code, stderr, ExitUsage)
		}
	}
}
