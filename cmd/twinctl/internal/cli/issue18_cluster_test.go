package cli

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/twinlog/twinlog/broker/brokertest"
	"github.com/twinlog/twinlog/storage"
)

// TestOperatorHabitsAgainstClusters runs twinctl against two real
// in-process clusters, A mirrored into B (brokertest.TwoClusters), for the
// twinctl items of issue 18:
//   - partitions describe shows each leader's log start offset, high
//     watermark and log end offset;
//   - topics list and topics describe mark B's mirror topic, from the
//     controller and from a broker;
//   - --bootstrap takes a list and uses the address that serves the
//     command: a broker's address for a mirror command fails naming what
//     it needs, a list with the controller works, and produce given only
//     the controller finds a broker; brokers unregister (not forwarded by
//     brokers) finds the controller in the list;
//   - a mirror command sent to the source cluster says mirrors live on the
//     destination, and --source given a controller says it wants brokers;
//   - min.insync.replicas above the replication factor is refused at
//     create and at alter.
func TestOperatorHabitsAgainstClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two clusters")
	}
	a, b := brokertest.TwoClusters(t)
	a.CreateTopic("orders", 2, 3, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a.MustProduce(ctx, "orders", 0, -1, []byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e"))
	a.MustProduce(ctx, "orders", 1, -1, []byte("f"), []byte("g"), []byte("h"))
	b.CreateMirror("a-to-b", a, "orders")

	run := clusterCLI(ctx, t, a)
	mustRun := func(bootstrap string, args ...string) string {
		t.Helper()
		stdout, stderr, code := run(bootstrap, args...)
		if code != ExitOK {
			t.Fatalf("twinctl --bootstrap %s %s: exit %d, stderr:\n%s", bootstrap, strings.Join(args, " "), code, stderr)
		}
		return stdout
	}
	mustFail := func(bootstrap string, wants []string, args ...string) {
		t.Helper()
		_, stderr, code := run(bootstrap, args...)
		if code == ExitOK {
			t.Fatalf("twinctl --bootstrap %s %s: exit 0, want a failure", bootstrap, strings.Join(args, " "))
		}
		for _, w := range wants {
			if !strings.Contains(stderr, w) {
				t.Errorf("twinctl --bootstrap %s %s: stderr %q lacks %q", bootstrap, strings.Join(args, " "), stderr, w)
			}
		}
	}
	rows := func(stdout string) []string { // table rows without header, spaces squeezed
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n")[1:] {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
		return out
	}
	ctlA, ctlB := a.ControllerAddr(), b.ControllerAddr()
	brokerA, brokerB := a.Addr(a.IDs()[0]), b.Addr(b.IDs()[0])

	// Item 2: LS, HW and LEO from the leaders, with the controller or a
	// broker as --bootstrap.
	for _, bs := range []string{ctlA, brokerA} {
		got := rows(mustRun(bs, "partitions", "describe", "orders"))
		for i, want := range []string{"0 5 5 -", "0 3 3 -"} {
			if i >= len(got) || !strings.HasSuffix(got[i], " "+want) {
				t.Fatalf("--bootstrap %s partitions describe orders: rows %q, want partition %d ending %q (LS HW LEO ERROR)", bs, got, i, want)
			}
		}
	}
	if out := mustRun(ctlA, "partitions", "describe", "orders:0", "--json"); !strings.Contains(out, `"log_start_offset":0,"high_watermark":5,"log_end_offset":5}`) {
		t.Errorf("partitions describe --json: %s", out)
	}

	// Item 1: B's orders is a mirror topic, in the controller's answer and
	// a broker's.
	for _, bs := range []string{ctlB, brokerB} {
		if got := rows(mustRun(bs, "topics", "list")); len(got) != 1 || !strings.HasSuffix(got[0], " 2 no a-to-b") {
			t.Errorf("--bootstrap %s topics list on B: %q, want orders marked a-to-b", bs, got)
		}
		if out := mustRun(bs, "topics", "describe", "--json"); !strings.Contains(out, `"name":"orders"`) || !strings.Contains(out, `"mirror":"a-to-b"`) {
			t.Errorf("--bootstrap %s topics describe --json on B: %s", bs, out)
		}
	}
	if got := rows(mustRun(ctlA, "topics", "describe")); len(got) != 2 || !strings.HasPrefix(got[0], "orders - 0 ") {
		t.Errorf("topics describe (all) on A: %q, want orders' two partitions, no mirror", got)
	}

	// Item 4: the kind of server.
	mustFail(brokerB, []string{"--bootstrap " + brokerB + " is a broker", "`twinctl mirrors describe` needs the controller of the mirror's destination cluster"}, "mirrors", "describe")
	if out := mustRun(brokerB+","+ctlB, "mirrors", "describe", "a-to-b"); !strings.Contains(out, "mirror a-to-b from cluster ") {
		t.Errorf("mirrors describe via a list: %s", out)
	}
	if out := mustRun(ctlA, "produce", "--topic", "orders", "--partition", "1", "--value", "i"); !strings.Contains(out, "produced 1 record(s) to orders-1 at offset 3") {
		t.Errorf("produce with the controller as --bootstrap: %s", out)
	}
	mustFail(brokerA, []string{"--bootstrap " + brokerA + " is a broker", "`twinctl brokers unregister` needs the cluster's controller"}, "brokers", "unregister", "99")
	mustFail(brokerA+","+ctlA, []string{"broker 99: "}, "brokers", "unregister", "99")

	// A mirror command at the source cluster; --source a controller.
	mustFail(ctlA, []string{"mirror a-to-b: ", "mirrors live on their destination cluster's controller"}, "mirrors", "describe", "a-to-b")
	mustFail(ctlB, []string{"--source " + ctlA + ": not a broker", "e.g. --source " + strings.Join(a.BootstrapAddrs(), ",")}, "mirrors", "create", "again", "--source", ctlA, "orders")

	// Item 6: min.insync.replicas above the replication factor.
	mustFail(ctlA, []string{"min.insync.replicas 3 is above the replication factor 2", "at most 2"},
		"topics", "create", "tight", "--partitions", "1", "--replication-factor", "2", "--config", "min.insync.replicas=3")
	mustFail(ctlA, []string{"min.insync.replicas 4 is above the replication factor 3"}, "configs", "set", "--topic", "orders", "min.insync.replicas=4")
	mustRun(ctlA, "configs", "set", "--topic", "orders", "min.insync.replicas=3")
}

// clusterCLI returns a twinctl runner for in-process clusters on c's
// network (the clusters of brokertest.TwoClusters share one): stdout,
// stderr and the exit code of one command against bootstrap, with
// --timeout 20s and no stdin.
func clusterCLI(ctx context.Context, t *testing.T, c *brokertest.Cluster) func(bootstrap string, args ...string) (string, string, int) {
	run := clusterCLIWith(ctx, t, c, "20s")
	return func(bootstrap string, args ...string) (string, string, int) {
		t.Helper()
		return run("", bootstrap, args...)
	}
}

// clusterCLIWith is clusterCLI with twinctl's --timeout and each
// command's stdin.
func clusterCLIWith(ctx context.Context, t *testing.T, c *brokertest.Cluster, timeout string) func(stdin, bootstrap string, args ...string) (string, string, int) {
	codec := CodecFuncs{
		EncodeFunc: func(rs []Record, _ Producer) ([]byte, error) {
			recs := make([]storage.Record, len(rs))
			for i, r := range rs {
				recs[i] = storage.Record{Timestamp: r.Timestamp, Key: r.Key, Value: r.Value}
			}
			return storage.EncodeBatch(recs, storage.BatchOptions{})
		},
		DecodeFunc: func([]byte) ([]Batch, error) { return nil, nil },
	}
	return func(stdin, bootstrap string, args ...string) (string, string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		opts := Options{
			Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin), HomeDir: t.TempDir(), Codec: codec,
			DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				return c.Net.DialConn(ctx, "twinctl", addr)
			})},
			StderrIsTerminal: func() bool { return false },
		}
		code := Execute(ctx, append([]string{"--bootstrap", bootstrap, "--timeout", timeout}, args...), opts)
		return out.String(), errb.String(), code
	}
}
