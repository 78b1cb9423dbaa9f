// Command runlocal is `make run`: it starts cluster A and cluster B
// (controller + 3 brokers each, configs/cluster-{a,b}) as plain processes
// from the binaries in --bin, waits for their healthchecks, creates a demo
// topic on A mirrored to B, produces a few records, prints where everything
// is and waits. Ctrl-C (or SIGTERM) stops the brokers, then the controllers:
// SIGTERM, then SIGKILL after --stop-timeout.
//
// Security is on by default: runlocal makes a local CA and a certificate
// per daemon and for the operator (./run/tls), and starts every daemon with
// mutual TLS on every listener and the authorizer on (super users: the
// cluster's own daemons and User:admin, twinctl's certificate); each
// cluster grants the other's daemons what a mirror needs. --insecure keeps
// plaintext and no authorizer.
//
//	make run                       # builds ./bin, then ./bin/runlocal
//	./bin/runlocal --keep          # keep ./run data from the last run
//	./bin/runlocal --insecure      # plaintext, no authorizer
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twinlog/twinlog/security/pki"
)

// node is one daemon of the local setup; addresses match configs/.
type node struct {
	cluster string // "a" or "b"
	name    string // "controller", "broker-1", ...
	binary  string // "controllerd" or "brokerd"
	grpc    string
	metrics string
	kafka   string // the Kafka listener (brokers only; configs/cluster-*/broker-N.yaml)

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (n *node) id() string      { return "cluster-" + n.cluster + "/" + n.name }
func (n *node) logName() string { return n.cluster + "-" + n.name + ".log" }
func (n *node) config() string {
	return filepath.Join("configs", "cluster-"+n.cluster, n.name+".yaml")
}

func layout() []*node {
	var out []*node
	for i, c := range []string{"a", "b"} {
		base := 9090 + 10*i
		out = append(out, &node{cluster: c, name: "controller", binary: "controllerd",
			grpc: fmt.Sprintf("127.0.0.1:%d", base), metrics: fmt.Sprintf("127.0.0.1:%d", base+100)})
		for b := 1; b <= 3; b++ {
			out = append(out, &node{cluster: c, name: fmt.Sprintf("broker-%d", b), binary: "brokerd",
				grpc: fmt.Sprintf("127.0.0.1:%d", base+b), metrics: fmt.Sprintf("127.0.0.1:%d", base+100+b),
				kafka: fmt.Sprintf("127.0.0.1:%d", base+200+b)})
		}
	}
	return out
}

type runner struct {
	bin, runDir, logDir string
	nodes               []*node
	stopTimeout         time.Duration
	// insecure: plaintext listeners, no authorizer (--insecure); else tls
	// is the directory of the CA and certificates.
	insecure bool
	tls      string
}

func main() {
	var r runner
	var keep bool
	var healthTimeout time.Duration
	flag.StringVar(&r.bin, "bin", "bin", "directory holding brokerd, controllerd and twinctl")
	flag.StringVar(&r.runDir, "run", "run", "data and log directory (configs/cluster-* point log.dirs/data.dir here)")
	flag.BoolVar(&keep, "keep", false, "keep data from a previous run instead of starting empty")
	flag.DurationVar(&healthTimeout, "health-timeout", 60*time.Second, "how long to wait for every daemon to become SERVING")
	flag.DurationVar(&r.stopTimeout, "stop-timeout", 20*time.Second, "SIGTERM grace period before SIGKILL")
	flag.BoolVar(&r.insecure, "insecure", false, "plaintext listeners and no authorizer (default: mutual TLS and ACLs)")
	flag.Parse()
	r.logDir = filepath.Join(r.runDir, "logs")
	r.nodes = layout()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := r.run(ctx, keep, healthTimeout)
	r.shutdown()
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nmake run: %v\n", err)
		os.Exit(1)
	}
}

func (r *runner) run(ctx context.Context, keep bool, healthTimeout time.Duration) error {
	for _, b := range []string{"controllerd", "brokerd", "twinctl"} {
		if _, err := os.Stat(filepath.Join(r.bin, b)); err != nil {
			return fmt.Errorf("%s/%s missing: build with `make run` (or go build -o %s/ ./cmd/...)", r.bin, b, r.bin)
		}
	}
	if _, err := os.Stat(filepath.Join("configs", "cluster-a", "controller.yaml")); err != nil {
		return fmt.Errorf("run from the repository root (configs/cluster-a not found)")
	}
	for _, n := range r.nodes {
		for _, a := range []string{n.grpc, n.metrics, n.kafka} {
			if a == "" {
				continue
			}
			l, err := net.Listen("tcp", a)
			if err != nil {
				return fmt.Errorf("%s is in use (another `make run`, or the docker-compose clusters?): %v", a, err)
			}
			_ = l.Close()
		}
	}
	if !keep {
		for _, c := range []string{"cluster-a", "cluster-b"} {
			if err := os.RemoveAll(filepath.Join(r.runDir, c)); err != nil {
				return err
			}
		}
		_ = os.RemoveAll(r.logDir)
	}
	// controllerd does not create data.dir itself (bbolt open fails with
	// ENOENT), so create every data directory up front.
	for _, c := range []string{"cluster-a", "cluster-b"} {
		for _, d := range []string{"controller", "broker-1", "broker-2", "broker-3"} {
			if err := os.MkdirAll(filepath.Join(r.runDir, c, d), 0o755); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(r.logDir, 0o755); err != nil {
		return err
	}
	if !r.insecure {
		if err := r.makeCerts(); err != nil {
			return fmt.Errorf("certificates: %w", err)
		}
	}

	start := time.Now()
	fmt.Printf("starting cluster A and cluster B (logs in %s/)\n", r.logDir)
	for _, n := range r.nodes { // controllers come first in layout()
		if err := r.start(n); err != nil {
			return err
		}
	}
	if err := r.waitHealthy(ctx, healthTimeout); err != nil {
		return err
	}
	fmt.Printf("all 8 daemons SERVING after %.1fs\n", time.Since(start).Seconds())

	mirrorErr := r.demo(ctx)
	r.printSummary(mirrorErr)
	fmt.Printf("\nready after %.1fs; Ctrl-C stops everything\n", time.Since(start).Seconds())

	select {
	case <-ctx.Done():
		fmt.Println("\nstopping (brokers, then controllers)...")
		return nil
	case n := <-r.anyExit():
		return fmt.Errorf("%s exited unexpectedly (%v); see %s", n.id(), n.err, filepath.Join(r.logDir, n.logName()))
	}
}

func (r *runner) start(n *node) error {
	f, err := os.Create(filepath.Join(r.logDir, n.logName()))
	if err != nil {
		return err
	}
	args := append([]string{"--config", n.config(), "--log.format", "text"}, r.daemonFlags(n)...)
	n.cmd = exec.Command(filepath.Join(r.bin, n.binary), args...)
	n.cmd.Stdout, n.cmd.Stderr = f, f
	// Own process group: the terminal's Ctrl-C reaches only runlocal, which
	// then stops the brokers before the controllers.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", n.id(), err)
	}
	n.done = make(chan struct{})
	go func() {
		n.err = n.cmd.Wait()
		f.Close()
		close(n.done)
	}()
	return nil
}

// anyExit reports the first daemon that exits.
func (r *runner) anyExit() <-chan *node {
	ch := make(chan *node, len(r.nodes))
	for _, n := range r.nodes {
		if n.done == nil {
			continue
		}
		go func() { <-n.done; ch <- n }()
	}
	return ch
}

func (r *runner) waitHealthy(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pending := append([]*node(nil), r.nodes...)
	for len(pending) > 0 {
		var next []*node
		for _, n := range pending {
			select {
			case <-n.done:
				return fmt.Errorf("%s exited during start-up (%v); last lines of %s:\n%s",
					n.id(), n.err, filepath.Join(r.logDir, n.logName()), r.tail(n, 15))
			default:
			}
			hc := exec.CommandContext(ctx, filepath.Join(r.bin, n.binary), append([]string{"healthcheck", "--address", n.grpc, "--timeout", "1s"}, r.clientFlags()...)...)
			if hc.Run() != nil {
				next = append(next, n)
			}
		}
		pending = next
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var ids []string
			for _, n := range pending {
				ids = append(ids, n.id())
			}
			return fmt.Errorf("not SERVING after %v: %s (logs in %s)", timeout, strings.Join(ids, ", "), r.logDir)
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted while waiting for health")
		case <-time.After(300 * time.Millisecond):
		}
	}
	return nil
}

func (r *runner) tail(n *node, lines int) string {
	b, _ := os.ReadFile(filepath.Join(r.logDir, n.logName()))
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return "    " + strings.Join(ls, "\n    ")
}

// principalRules maps a certificate subject "CN=name" to the principal
// User:name (ssl.principal.mapping.rules).
const principalRules = `RULE:^CN=([^,]+)$/$1/,DEFAULT`

// makeCerts creates r.tls: a CA, a certificate per daemon (CN
// cluster-<c>-<name>, for 127.0.0.1 and localhost) and admin's for twinctl,
// kcat and grpcurl.
func (r *runner) makeCerts() error {
	r.tls = filepath.Join(r.runDir, "tls")
	if err := os.MkdirAll(r.tls, 0o700); err != nil {
		return err
	}
	ca, err := pki.NewCA("twinlog make run CA", 30*24*time.Hour)
	if err != nil {
		return err
	}
	if err := ca.WriteFiles(filepath.Join(r.tls, "ca.crt"), filepath.Join(r.tls, "ca.key")); err != nil {
		return err
	}
	names := []string{"admin", "alice"} // alice: a client without ACLs (make kafka-e2e)
	for _, n := range r.nodes {
		names = append(names, n.principalName())
	}
	for _, name := range names {
		cert, key, err := ca.Issue(pki.LeafOptions{CommonName: name, DNSNames: []string{"localhost"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: name != "admin" && name != "alice", Client: true})
		if err != nil {
			return err
		}
		if _, _, err := pki.WriteLeaf(r.tls, name, cert, key); err != nil {
			return err
		}
	}
	fmt.Printf("certificates in %s/ (CA ca.crt; twinctl, kcat and grpcurl use admin.crt)\n", r.tls)
	return nil
}

// principalName is n's certificate CN and principal name.
func (n *node) principalName() string { return "cluster-" + n.cluster + "-" + n.name }

// daemonFlags are n's security flags: none with --insecure.
func (r *runner) daemonFlags(n *node) []string {
	if r.insecure {
		return nil
	}
	supers := []string{"User:admin", "User:cluster-" + n.cluster + "-controller"}
	for b := 1; b <= 3; b++ {
		supers = append(supers, fmt.Sprintf("User:cluster-%s-broker-%d", n.cluster, b))
	}
	flags := []string{
		"--tls.cert.file=" + filepath.Join(r.tls, n.principalName()+".crt"),
		"--tls.key.file=" + filepath.Join(r.tls, n.principalName()+".key"),
		"--tls.ca.file=" + filepath.Join(r.tls, "ca.crt"),
		"--ssl.principal.mapping.rules=" + principalRules,
		"--authorizer.enabled=true",
		"--super.users=" + strings.Join(supers, ";"),
		"--broker.principal.template=User:cluster-" + n.cluster + "-broker-{id}",
	}
	if n.binary == "brokerd" {
		// SASL on the Kafka listener: a client with a certificate of the CA
		// is that certificate's principal; one without must authenticate
		// (twinctl users set-password).
		flags = append(flags, "--sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN")
	}
	return flags
}

// clientFlags make twinctl and healthcheck present admin's certificate.
func (r *runner) clientFlags() []string {
	if r.insecure {
		return nil
	}
	return []string{"--tls-ca", filepath.Join(r.tls, "ca.crt"), "--tls-cert", filepath.Join(r.tls, "admin.crt"), "--tls-key", filepath.Join(r.tls, "admin.key")}
}

// twinctl runs bin/twinctl with args and returns its combined output.
func (r *runner) twinctl(ctx context.Context, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, filepath.Join(r.bin, "twinctl"), append(r.clientFlags(), args...)...)
	if stdin != "" {
		c.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return strings.TrimSpace(out.String()), err
}

const (
	ctlA    = "127.0.0.1:9090"
	ctlB    = "127.0.0.1:9100"
	brokerA = "127.0.0.1:9091"
	brokerB = "127.0.0.1:9101"
	srcA    = "127.0.0.1:9091,127.0.0.1:9092,127.0.0.1:9093"
	srcB    = "127.0.0.1:9101,127.0.0.1:9102,127.0.0.1:9103"
	kafkaA  = "127.0.0.1:9291"
	kafkaB  = "127.0.0.1:9301"
)

// demo creates the demo topic on A and the mirror a-to-b on B (which
// creates demo there) and produces to A. Setup errors are fatal for the demo but not for the
// clusters; the returned error says whether mirroring works.
func (r *runner) demo(ctx context.Context) error {
	step := func(what string, stdin string, args ...string) bool {
		out, err := r.twinctl(ctx, stdin, args...)
		if err != nil && !strings.Contains(out, "already exists") {
			fmt.Printf("  FAILED %s: %v\n    %s\n", what, err, strings.ReplaceAll(out, "\n", "\n    "))
			return false
		}
		fmt.Printf("  ok     %s\n", what)
		return true
	}
	fmt.Println("setting up the demo:")
	if !r.insecure {
		// Each cluster lets the other's daemons mirror from it (and sync
		// group offsets): Read and DescribeConfigs on every topic, Describe
		// on every group, and Read on the Mirror resource named by the
		// fetching cluster's id.
		for _, g := range []struct{ name, at, from, fromID string }{{"A", ctlA, "b", "cluster-b"}, {"B", ctlB, "a", "cluster-a"}} {
			var principals []string
			for _, n := range []string{"controller", "broker-1", "broker-2", "broker-3"} {
				principals = append(principals, "--allow-principal", "User:cluster-"+g.from+"-"+n)
			}
			for _, res := range [][]string{{"--topic", "*", "--operation", "Read"}, {"--topic", "*", "--operation", "DescribeConfigs"},
				{"--group", "*", "--operation", "Describe"}, {"--mirror", g.fromID, "--operation", "Read"}} {
				args := append(append([]string{"--bootstrap", g.at, "acls", "add"}, principals...), res...)
				step(fmt.Sprintf("ACL on %s: cluster %s's daemons may %s %s %s", g.name, strings.ToUpper(g.from), res[3], strings.TrimPrefix(res[0], "--"), res[1]), "", args...)
			}
		}
	}
	// The mirror creates demo on B with A's topic id and partition count
	// (SPEC §6.1); min.insync.replicas is local to each cluster.
	step("topic demo on A (3 partitions, RF 3, min ISR 2)", "", "--bootstrap", ctlA,
		"topics", "create", "demo", "--partitions", "3", "--replication-factor", "3", "--config", "min.insync.replicas=2")
	if !step("mirror a-to-b on B pulling demo from A (creates demo on B)", "", "--bootstrap", ctlB, "mirrors", "create", "a-to-b", "--source", srcA, "demo") {
		step("start demo on existing mirror a-to-b", "", "--bootstrap", ctlB, "mirrors", "start", "a-to-b", "demo")
	}
	step("min ISR 2 for demo on B", "", "--bootstrap", ctlB, "configs", "set", "--topic", "demo", "min.insync.replicas=2")
	var lines strings.Builder
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&lines, "key-%d:hello %d\n", i, i)
	}
	step("produce 6 records to demo on A (acks=all)", lines.String(), "--bootstrap", brokerA, "produce", "--topic", "demo", "--parse-key")

	// Mirroring: wait for B's copy to reach A's high watermarks.
	fmt.Print("  ...    waiting up to 20s for B to mirror the records: ")
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for {
		state, err := r.mirrorCaughtUp(ctx)
		if err == nil {
			fmt.Println("caught up")
			return nil
		}
		last = err.Error()
		if time.Now().After(deadline) || ctx.Err() != nil {
			fmt.Println("NOT mirrored")
			return fmt.Errorf("%s (%s)", last, state)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// mirrorCaughtUp compares the per-partition record counts of demo on A and B
// and returns the mirror's partition states.
func (r *runner) mirrorCaughtUp(ctx context.Context) (string, error) {
	var states []string
	out, err := r.twinctl(ctx, "", "--bootstrap", ctlB, "--json", "mirrors", "describe", "a-to-b")
	// --json is JSON Lines: one mirror per line.
	for line := range strings.Lines(out) {
		var m struct {
			Partitions []struct {
				Partition int32  `json:"partition"`
				State     string `json:"state"`
				LastError string `json:"last_error"`
			} `json:"partitions"`
		}
		if err != nil || json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		for _, p := range m.Partitions {
			s := fmt.Sprintf("demo-%d %s", p.Partition, p.State)
			if p.LastError != "" {
				s += ": " + p.LastError
			}
			states = append(states, s)
		}
	}
	state := "mirror states: " + strings.Join(states, ", ")
	for p := 0; p < 3; p++ {
		a, errA := r.twinctl(ctx, "", "--bootstrap", brokerA, "consume", "--topic", "demo", "--partition", fmt.Sprint(p))
		b, errB := r.twinctl(ctx, "", "--bootstrap", brokerB, "consume", "--topic", "demo", "--partition", fmt.Sprint(p))
		if errA != nil || errB != nil {
			return state, fmt.Errorf("consume demo-%d: A: %v, B: %v", p, errA, errB)
		}
		if a != b {
			return state, fmt.Errorf("demo-%d: A has %d records, B has %d", p, countLines(a), countLines(b))
		}
	}
	return state, nil
}

func countLines(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(s, "\n") + 1
}

func (r *runner) printSummary(mirrorErr error) {
	fmt.Println()
	fmt.Println("twinlog is running:")
	fmt.Printf("  %-22s %-16s %-16s %-32s %s\n", "NODE", "GRPC", "KAFKA", "METRICS", "LOG")
	for _, n := range r.nodes {
		k := n.kafka
		if k == "" {
			k = "-"
		}
		fmt.Printf("  %-22s %-16s %-16s %-32s %s\n", n.id(), n.grpc, k, "http://"+n.metrics+"/metrics", filepath.Join(r.logDir, n.logName()))
	}
	fmt.Printf("  data: %s/cluster-{a,b}/{controller,broker-N}\n", r.runDir)
	if mirrorErr != nil {
		fmt.Println()
		fmt.Println("  MIRRORING DID NOT CATCH UP: B did not receive A's records within 20s.")
		fmt.Printf("    %v\n", mirrorErr)
		fmt.Println("    Both clusters still run. Look at `twinctl --bootstrap 127.0.0.1:9100 mirrors describe a-to-b`")
		fmt.Printf("    (STATE, LAST-ERROR) and %s/b-broker-*.log.\n", r.logDir)
	} else {
		fmt.Println("\n  mirror a-to-b: cluster B mirrors topic demo from cluster A (caught up)")
	}
	t := r.bin + "/twinctl"
	kcat := "kcat"
	if !r.insecure {
		ca, cert, key := filepath.Join(r.tls, "ca.crt"), filepath.Join(r.tls, "admin.crt"), filepath.Join(r.tls, "admin.key")
		fmt.Printf(`
security: mutual TLS on every listener and ACLs (./bin/runlocal --insecure for plaintext).
You are User:admin, a super user; twinctl reads the certificate from the environment:
  export TWINLOG_TLS_CA=%[1]s TWINLOG_TLS_CERT=%[2]s TWINLOG_TLS_KEY=%[3]s
  %[4]s --bootstrap %[5]s acls list                     # what each cluster grants the other's daemons
  grpcurl -cacert %[1]s -cert %[2]s -key %[3]s %[5]s list
  KCAT="kcat -X security.protocol=ssl -X ssl.ca.location=%[1]s -X ssl.certificate.location=%[2]s -X ssl.key.location=%[3]s"
  SASL (no certificate): %[4]s --bootstrap %[5]s users set-password bob; kcat -X security.protocol=sasl_ssl -X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=bob -X sasl.password=PASSWORD -X ssl.ca.location=%[1]s -b %[6]s -L
`, ca, cert, key, t, ctlA, kafkaA)
		kcat = "$KCAT"
	}
	fmt.Printf(`
try:
  %[1]s --bootstrap %[2]s topics describe demo               # A's partitions, leaders, ISR
  %[1]s --bootstrap %[3]s produce --topic demo --value hi     # produce on A
  %[1]s --bootstrap %[3]s consume --topic demo               # partition, offset, leader epoch, time, key, value
  %[1]s --bootstrap %[4]s mirrors describe a-to-b            # mirror state and lag on B
  %[1]s --bootstrap %[5]s consume --topic demo               # B's copy
  curl -s http://127.0.0.1:9190/metrics | grep twinlog_cluster_electable_leaders

Kafka clients (any broker's Kafka listener bootstraps):
  echo hello | %[8]s -b %[6]s -P -t demo -p 0    # produce on A with kcat
  %[8]s -b %[6]s -C -t demo -p 0 -o beginning -e # consume A's demo-0
  %[8]s -b %[7]s -L                              # B's brokers, topics, leaders

planned failover to B (A reachable; stop producers on A first):
  %[1]s --bootstrap %[4]s mirrors stop a-to-b demo --wait-for-catch-up   # waits until B holds all A acked; demo writable on B
  %[1]s --bootstrap %[5]s produce --topic demo --value on-b
unplanned failover (A gone: a waited stop would wait for it):
  %[1]s --bootstrap %[4]s mirrors stop a-to-b demo                       # records A acked but B lacks stay on A only

fail back (A follows B, truncated to the last mirrored leader epoch):
  %[1]s --bootstrap %[2]s mirrors create b-to-a --source %[9]s demo
      # the next failbacks: mirrors start b-to-a demo (b-to-a exists)
  %[1]s --bootstrap %[2]s mirrors describe b-to-a                        # until LAG 0; then stop producers on B
  %[1]s --bootstrap %[2]s mirrors stop b-to-a demo --wait-for-catch-up   # A writable again (B must be reachable)
  %[1]s --bootstrap %[4]s mirrors start a-to-b demo                      # B follows A again; clients back to A
`, t, ctlA, brokerA, ctlB, brokerB, kafkaA, kafkaB, kcat, srcB)
	fmt.Println("\nsee docs/operations.md for the runbook")
}

// shutdown stops brokers first (so controlled shutdown can reach the
// controller), then controllers: SIGTERM, then SIGKILL after stopTimeout.
func (r *runner) shutdown() {
	var brokers, controllers []*node
	for _, n := range r.nodes {
		if n.done == nil {
			continue
		}
		if n.binary == "brokerd" {
			brokers = append(brokers, n)
		} else {
			controllers = append(controllers, n)
		}
	}
	for _, group := range [][]*node{brokers, controllers} {
		var wg sync.WaitGroup
		for _, n := range group {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.stopNode(n)
			}()
		}
		wg.Wait()
	}
}

func (r *runner) stopNode(n *node) {
	select {
	case <-n.done:
		return
	default:
	}
	start := time.Now()
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
		fmt.Printf("  stopped %-22s in %.1fs\n", n.id(), time.Since(start).Seconds())
	case <-time.After(r.stopTimeout):
		_ = n.cmd.Process.Kill()
		<-n.done
		fmt.Printf("  KILLED  %-22s after %v (no exit on SIGTERM)\n", n.id(), r.stopTimeout)
	}
}
