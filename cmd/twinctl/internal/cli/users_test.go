package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twinlog/twinlog/broker/brokertest"
)

// TestUsersAgainstCluster: set-password stores a credential the
// controller describes (mechanism, iterations; never a key), a second
// mechanism adds a row, delete removes one mechanism or all, and bad flags
// are usage errors that send nothing.
func TestUsersAgainstCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := brokertest.NewCluster(t, brokertest.Options{Brokers: 1})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cli := clusterCLIWith(ctx, t, c, "10s")
	run := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		return cli(stdin, c.ControllerAddr(), args...)
	}
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, errb, code := run(stdin, args...)
		if code != ExitOK {
			t.Fatalf("twinctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errb)
		}
		return out
	}
	if out := must("s3cret\n", "users", "set-password", "alice"); out != "user alice: SCRAM-SHA-512 credential set (8192 iterations)\n" {
		t.Fatalf("set-password: %q", out)
	}
	must("other\n", "users", "set-password", "alice", "--mechanism", "scram-sha-256", "--iterations", "4096")
	must("pw\n", "users", "set-password", "bob")
	want := "USER   MECHANISM      ITERATIONS\nalice  SCRAM-SHA-256  4096\nalice  SCRAM-SHA-512  8192\nbob    SCRAM-SHA-512  8192\n"
	if out := must("", "users", "list"); out != want {
		t.Fatalf("list:\n%s\nwant:\n%s", out, want)
	}
	if out := must("", "--json", "users", "list", "bob"); out != `{"user":"bob","mechanism":"SCRAM-SHA-512","iterations":8192}`+"\n" {
		t.Fatalf("list --json bob: %q", out)
	}
	must("", "users", "delete", "alice", "--mechanism", "SCRAM-SHA-256")
	if out := must("", "users", "delete", "bob"); out != "user bob: SCRAM-SHA-512 credential deleted\n" {
		t.Fatalf("delete bob: %q", out)
	}
	if out := must("", "users", "list"); out != "USER   MECHANISM      ITERATIONS\nalice  SCRAM-SHA-512  8192\n" {
		t.Fatalf("list after deletes:\n%s", out)
	}
	if _, errb, code := run("", "users", "list", "bob"); code != ExitError || !strings.Contains(errb, "RESOURCE_NOT_FOUND") {
		t.Fatalf("list of a deleted user: exit %d, %s", code, errb)
	}
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"pw\n", []string{"users", "set-password", "carol", "--iterations", "100"}, "--iterations 100"},
		{"pw\n", []string{"users", "set-password", "carol", "--mechanism", "MD5"}, "bad --mechanism"},
		{"\n", []string{"users", "set-password", "carol"}, "empty password"},
		{"", []string{"users", "set-password"}, "accepts 1 arg"},
	} {
		if _, errb, code := run(tc.stdin, tc.args...); code != ExitUsage || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: exit %d, %s", tc.args, code, errb)
		}
	}
	if out := must("", "users", "list"); !strings.Contains(out, "alice") || strings.Contains(out, "carol") {
		t.Fatalf("usage errors changed the users:\n%s", out)
	}
}
