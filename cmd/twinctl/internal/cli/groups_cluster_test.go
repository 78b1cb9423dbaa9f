package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/broker/brokertest"
	"github.com/twinlog/twinlog/metadata"
)

// TestGroupsAgainstCluster runs the groups commands against a real
// in-process cluster (brokertest: a controller and three brokers on
// bufconn, --bootstrap the controller): a reset of a new group creates it
// at its coordinator (the first FindCoordinator creates
// __consumer_offsets), describe shows the offsets and lags against the
// leaders' high watermarks, list finds the group on its coordinator; with a
// franz-go member in the group the coordinator refuses a reset
// (UNKNOWN_MEMBER_ID) and a delete (NON_EMPTY_GROUP) and describe shows the
// member's assignment; once it left, the group is deleted.
func TestGroupsAgainstCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := brokertest.NewCluster(t, brokertest.Options{
		ClusterConfigs: map[string]string{metadata.KeyOffsetsTopicNumPartitions: "3"},
		Configure:      func(cfg *broker.Config) { cfg.Groups.InitialRebalanceDelayMs = 50 },
	})
	c.CreateTopic("orders", 2, 3, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c.MustProduce(ctx, "orders", 0, -1, []byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e"))
	c.MustProduce(ctx, "orders", 1, -1, []byte("f"), []byte("g"), []byte("h"))

	cli := clusterCLI(ctx, t, c)
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return cli(c.ControllerAddr(), args...)
	}
	mustRun := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := run(args...)
		if code != ExitOK {
			t.Fatalf("twinctl %s: exit %d, stderr:\n%s", strings.Join(args, " "), code, stderr)
		}
		return stdout
	}
	rows := func(stdout string) []string { // table rows without header, spaces squeezed
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n")[1:] {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
		return out
	}

	mustRun("groups", "reset-offsets", "app", "--topic", "orders", "--to-offset", "2")
	out := mustRun("groups", "describe", "app")
	if got, want := strings.Join(rows(out)[1:], "\n"), "app orders 0 2 5 3 - - -\napp orders 1 2 3 1 - - -"; got != want {
		t.Fatalf("describe:\n%s\nwant rows:\n%s", out, want)
	}
	if !strings.HasPrefix(out, "group app: Empty, 0 members, coordinator ") {
		t.Errorf("describe header: %s", out)
	}
	if out := mustRun("groups", "list"); !strings.Contains(out, "\napp ") {
		t.Errorf("list lacks app:\n%s", out)
	}

	// A member joins and reads: the group is Stable with it.
	member, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.Dialer(c.KafkaDialer()),
		kgo.ConsumerGroup("app"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	for read := 0; read < 2; { // from the committed offsets 2 and 2: d, e and h
		fs := member.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("member read %d records: %v", read, ctx.Err())
		}
		read += fs.NumRecords()
	}
	out = mustRun("groups", "describe", "app")
	if !strings.HasPrefix(out, "group app: Stable, 1 member, assignor ") {
		t.Errorf("describe with a member:\n%s", out)
	}
	for _, r := range rows(out)[1:] {
		if f := strings.Fields(r); len(f) != 9 || f[6] == "-" || f[8] == "-" {
			t.Errorf("row %q: want the member's id, host and client id", r)
		}
	}
	_, stderr, code := run("groups", "reset-offsets", "app", "--all-topics", "--to-earliest")
	if code != ExitError || !strings.Contains(stderr, "group app: UNKNOWN_MEMBER_ID (the group has active members") {
		t.Errorf("reset with a member: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = run("groups", "delete", "app")
	if code != ExitError || !strings.Contains(stderr, "group app: NON_EMPTY_GROUP") {
		t.Errorf("delete with a member: exit %d, stderr %q", code, stderr)
	}

	member.Close() // LeaveGroup: Empty
	mustRun("groups", "reset-offsets", "app", "--all-topics", "--to-earliest")
	out = mustRun("groups", "describe", "app")
	if got, want := strings.Join(rows(out)[1:], "\n"), "app orders 0 0 5 5 - - -\napp orders 1 0 3 3 - - -"; got != want {
		t.Errorf("describe after the reset to earliest:\n%s\nwant rows:\n%s", out, want)
	}
	mustRun("groups", "delete", "app")
	if out := mustRun("groups", "list"); strings.Contains(out, "\napp ") {
		t.Errorf("list still has app:\n%s", out)
	}
	if _, stderr, code := run("groups", "describe", "app"); code != ExitError || !strings.Contains(stderr, "GROUP_ID_NOT_FOUND") {
		t.Errorf("describe of the deleted group: exit %d, stderr %q", code, stderr)
	}
}
