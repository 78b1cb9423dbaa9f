// Command twinchaos runs the SPEC §8.12/§8.13 history checker
// (internal/history.History, one per cluster, plus the mirror model in
// check.go) against the docker-compose deployment of both clusters (issue
// 7, `make chaos`, scripts/chaos.sh).
//
//	twinchaos run [flags]     on the host: starts the client container,
//	                          injects seeded faults on both clusters (docker
//	                          kill/restart of brokers and controllers,
//	                          network disconnects, cross-cluster link cuts)
//	                          and, at seeded moments, has the client fail the
//	                          mirror over and back; writes the history as
//	                          JSON lines, checks it, prints a summary, exits
//	                          1 on any violation.
//	twinchaos client [flags]  inside a container on both cluster networks
//	                          (the brokers advertise service names):
//	                          producers (acks=all, unique values) on the
//	                          writable cluster, consumers on both, the
//	                          operator steps, streaming everything as JSON
//	                          lines.
//	twinchaos check FILE      re-checks a recorded history.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "client" {
		if err := runClient(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "twinchaos client:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "check" {
		os.Exit(runCheck(os.Args[2:]))
	}
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	}
	os.Exit(runHost(args))
}

// runCheck re-checks a history file: exit 0 clean, 1 violations, 2 unreadable.
func runCheck(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: twinchaos check HISTORY.jsonl")
		return 2
	}
	f, err := os.Open(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "twinchaos:", err)
		return 2
	}
	defer f.Close()
	evs, err := readHistory(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "twinchaos:", err)
		return 2
	}
	res := check(evs)
	fmt.Println("checker:", countsString(res.Counts))
	for _, cl := range []string{"a", "b"} {
		fmt.Printf("history %s: %s\n", cl, res.History[cl])
	}
	for _, l := range violationLines(res.Violations, 3) {
		fmt.Println(l)
	}
	if len(res.Violations) > 0 {
		return 1
	}
	return 0
}

// node is one container of the compose project and the networks it joins.
type node struct {
	service string
	cluster string
	broker  bool
	nets    []string // network suffixes (project_ prefix added)
}

var nodes = []node{
	{"a-controller", "a", false, []string{"cluster-a", "interlink"}},
	{"a-broker-1", "a", true, []string{"cluster-a", "interlink"}},
	{"a-broker-2", "a", true, []string{"cluster-a", "interlink"}},
	{"a-broker-3", "a", true, []string{"cluster-a", "interlink"}},
	{"b-controller", "b", false, []string{"cluster-b", "interlink"}},
	{"b-broker-1", "b", true, []string{"cluster-b", "interlink"}},
	{"b-broker-2", "b", true, []string{"cluster-b", "interlink"}},
	{"b-broker-3", "b", true, []string{"cluster-b", "interlink"}},
}

type host struct {
	project, image string
	seed           uint64
	rng            *rand.Rand // the fault lane's
	opRng          *rand.Rand // the operator lane's
	cids           map[string]string

	mu     sync.Mutex
	events []event
	file   *json.Encoder
	faults map[string]int
	start  time.Time

	stdin    io.Writer
	opDone   chan event
	readDone chan struct{} // closed when the client's output ends
	ready    chan struct{}
	// operator state (schedule goroutine only)
	phase  string // "mirroring" (the writable cluster is mirrored) or "failed-over"
	era    int
	opBusy bool
}

func (x *host) logf(format string, args ...any) {
	fmt.Printf("[chaos %5.1fs] %s\n", time.Since(x.start).Seconds(), fmt.Sprintf(format, args...))
}

// record writes ev to the history file and keeps it for the checker.
func (x *host) record(ev event) {
	if ev.At == "" {
		ev.At = time.Now().UTC().Format(time.RFC3339Nano)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	_ = x.file.Encode(ev)
	x.events = append(x.events, ev)
	if ev.Ev == "fault" {
		x.faults[ev.Kind]++
	}
}

func (x *host) send(cmd string) {
	x.logf("operator: %s", cmd)
	x.record(event{Ev: "command", Msg: cmd})
	fmt.Fprintln(x.stdin, cmd)
}

func docker(args ...string) error {
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func dockerOut(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).Output()
	return strings.TrimSpace(string(out)), err
}

func (x *host) cid(service string) (string, error) {
	id, err := dockerOut("ps", "-aq", "--filter", "label=com.docker.compose.project="+x.project, "--filter", "label=com.docker.compose.service="+service)
	if err != nil || id == "" {
		return "", fmt.Errorf("no container for %s in project %s: %v", service, x.project, err)
	}
	return strings.Fields(id)[0], nil
}

func (x *host) net(suffix string) string { return x.project + "_" + suffix }

func (x *host) disconnect(n node, nets []string) error {
	var err error
	for _, s := range nets {
		if e := docker("network", "disconnect", x.net(s), x.cids[n.service]); e != nil && err == nil {
			err = e
		}
	}
	return err
}

func (x *host) connect(n node, nets []string) error {
	var err error
	for _, s := range nets {
		if e := docker("network", "connect", "--alias", n.service, x.net(s), x.cids[n.service]); e != nil && err == nil {
			err = e
		}
	}
	return err
}

func (x *host) pick(f func(node) bool) node {
	var c []node
	for _, n := range nodes {
		if f(n) {
			c = append(c, n)
		}
	}
	return c[x.rng.IntN(len(c))]
}

// faultKinds are weighted: brokers and controllers of both clusters; one
// node off its cluster network, off both networks, or off interlink (the
// other cluster); a whole cluster off interlink.
var faultKinds = []struct {
	kind   string
	weight int
}{
	{"broker-kill", 3}, {"broker-restart", 1}, {"controller-kill", 1}, {"controller-restart", 1},
	{"net-disconnect-cluster", 2}, {"net-disconnect-all", 1}, {"interlink-cut", 1}, {"cross-cut", 1},
}

// fault injects one seeded fault and heals it.
func (x *host) fault(ctx context.Context) {
	total := 0
	for _, f := range faultKinds {
		total += f.weight
	}
	var kind string
	r := x.rng.IntN(total)
	for _, f := range faultKinds {
		if r -= f.weight; r < 0 {
			kind = f.kind
			break
		}
	}
	down := time.Duration(1000+x.rng.IntN(4000)) * time.Millisecond
	var target string
	var err error
	switch kind {
	case "broker-kill", "controller-kill":
		n := x.pick(func(n node) bool { return n.broker == (kind == "broker-kill") })
		target = n.service
		x.record(event{Ev: "fault", Kind: kind, Target: target, Cl: n.cluster, Msg: "down " + down.String()})
		if err = docker("kill", x.cids[n.service]); err == nil {
			sleepCtx(ctx, down)
			err = docker("start", x.cids[n.service])
		}
	case "broker-restart", "controller-restart":
		n := x.pick(func(n node) bool { return n.broker == (kind == "broker-restart") })
		target = n.service
		x.record(event{Ev: "fault", Kind: kind, Target: target, Cl: n.cluster})
		err = docker("restart", "-t", "10", x.cids[n.service])
	case "net-disconnect-cluster", "net-disconnect-all", "interlink-cut":
		n := x.pick(func(node) bool { return true })
		nets := n.nets
		switch kind {
		case "net-disconnect-cluster":
			nets = n.nets[:1]
		case "interlink-cut":
			nets = n.nets[1:]
		}
		target = n.service
		x.record(event{Ev: "fault", Kind: kind, Target: target, Cl: n.cluster, Msg: fmt.Sprintf("%v down %v", nets, down)})
		err = x.disconnect(n, nets)
		sleepCtx(ctx, down)
		if e := x.connect(n, nets); e != nil && err == nil {
			err = e
		}
	case "cross-cut":
		cl := []string{"a", "b"}[x.rng.IntN(2)]
		err = x.crossCut(ctx, cl, down)
		target = "cluster " + cl
	}
	x.record(event{Ev: "heal", Kind: kind, Target: target})
	x.logf("fault %s %s done%s", kind, target, map[bool]string{true: "", false: fmt.Sprintf(" (error: %v)", err)}[err == nil])
}

// crossCut takes every node of cluster cl off interlink for down: the
// clusters cannot reach each other ("the source fails" for the other).
func (x *host) crossCut(ctx context.Context, cl string, down time.Duration) error {
	x.record(event{Ev: "fault", Kind: "cross-cut", Target: "cluster " + cl, Cl: cl, Msg: "down " + down.String()})
	var err error
	for _, n := range nodes {
		if n.cluster == cl {
			if e := x.disconnect(n, []string{"interlink"}); e != nil && err == nil {
				err = e
			}
		}
	}
	sleepCtx(ctx, down)
	for _, n := range nodes {
		if n.cluster == cl {
			if e := x.connect(n, []string{"interlink"}); e != nil && err == nil {
				err = e
			}
		}
	}
	return err
}

// operate starts the next operator step in the client: a failover
// (planned or not, maybe with a straggling producer and the old source cut
// off) or a failback.
func (x *host) operate(ctx context.Context) {
	x.opBusy = true
	if x.phase == "mirroring" {
		x.era++
		x.phase = "failed-over"
		planned := x.opRng.IntN(2) == 0
		if planned {
			x.send(fmt.Sprintf("failover %d planned 0", x.era))
			return
		}
		straggle := 0
		if x.opRng.IntN(3) > 0 {
			straggle = 1000 + x.opRng.IntN(3000)
		}
		x.send(fmt.Sprintf("failover %d unplanned %d", x.era, straggle))
		if x.opRng.IntN(2) == 0 {
			old := "a"
			if x.era%2 == 0 {
				old = "b"
			}
			x.logf("the old source %s fails: cut off from the other cluster", old)
			if err := x.crossCut(ctx, old, time.Duration(2000+x.opRng.IntN(4000))*time.Millisecond); err != nil {
				x.logf("cross-cut: %v", err)
			}
			x.record(event{Ev: "heal", Kind: "cross-cut", Target: "cluster " + old})
		}
		return
	}
	x.phase = "mirroring"
	x.send(fmt.Sprintf("failback %d", x.era))
}

// operatorLane runs an operator step (failover, failback, alternately)
// 4–10 s after the previous one finished, while the fault lane goes on.
func (x *host) operatorLane(ctx context.Context) {
	next := time.Duration(3000+x.opRng.IntN(4000)) * time.Millisecond
	for {
		sleepCtx(ctx, next)
		if ctx.Err() != nil {
			return
		}
		x.operate(ctx)
		select {
		case <-x.opDone:
			x.opBusy = false
		case <-x.readDone:
			return
		case <-ctx.Done():
			return
		}
		next = time.Duration(4000+x.opRng.IntN(6000)) * time.Millisecond
	}
}

// healAll reconnects and starts every node (idempotent) and waits until
// they report healthy.
func (x *host) healAll(timeout time.Duration) error {
	for _, n := range nodes {
		for _, s := range n.nets {
			_ = docker("network", "connect", "--alias", n.service, x.net(s), x.cids[n.service]) // fails if connected
		}
		_ = docker("start", x.cids[n.service])
	}
	deadline := time.Now().Add(timeout)
	for {
		bad := ""
		for _, n := range nodes {
			st, _ := dockerOut("inspect", "-f", "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}", x.cids[n.service])
			if st != "healthy" {
				bad += " " + n.service + "=" + st
			}
		}
		if bad == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy after %v:%s", timeout, bad)
		}
		time.Sleep(2 * time.Second)
	}
}

// waitOp waits for the running operator step to finish.
func (x *host) waitOp(timeout time.Duration) bool {
	if !x.opBusy {
		return true
	}
	select {
	case <-x.opDone:
		x.opBusy = false
		return true
	case <-x.readDone:
		return false
	case <-time.After(timeout):
		return false
	}
}

// interesting events are echoed to the console.
func (x *host) echo(ev event) {
	switch ev.Ev {
	case "ready":
		x.logf("client ready: %s", ev.Msg)
	case "failover":
		x.logf("failover %d (%s): %s writable; %s", ev.Era, ev.Kind, ev.Cl, ev.Msg)
	case "failback":
		x.logf("failback %d: %s mirrors %s", ev.Era, ev.Cl, ev.Target)
	case "mirroring":
		x.logf("failback %d: %s", ev.Era, ev.Msg)
	case "paused":
		x.logf("planned failover %d: producers on %s paused", ev.Era+1, ev.Cl)
	case "snapend":
		x.logf("snapshot of %s %s for failover %d: stop point %d (LE %d)", ev.Cl, ev.TP, ev.Era, ev.Off, ev.LE)
	case "trunc":
		x.logf("truncation point on %s %s: LE %d offset %d", ev.Cl, ev.TP, ev.LE, ev.Off)
	case "unclean":
		x.logf("UNCLEAN election on %s %s: LE %d leader %d", ev.Cl, ev.TP, ev.LE, ev.N)
	case "repos":
		x.logf("consumer %s/%s %s repositioned %d -> %d (%s)", ev.Cl, ev.C, ev.TP, ev.N, ev.Off, ev.Kind)
	case "reset":
		x.logf("consumer %s/%s %s reset to 0 at %d (%s)", ev.Cl, ev.C, ev.TP, ev.N, ev.Kind)
	case "violation":
		x.logf("client saw a violation: %s %s %d %s", ev.Cl, ev.TP, ev.Off, ev.Msg)
	case "note", "op-error", "snapfail", "final-failed":
		x.logf("%s: %s %s", ev.Ev, ev.Cl, ev.Msg)
	case "op-done":
		if ev.Msg != "" {
			x.logf("%s %d failed: %s", ev.Kind, ev.Era, ev.Msg)
		}
	case "stats":
		x.logf("stats: %s %d", ev.Kind, ev.N)
	}
}

func runHost(args []string) int {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	project := fs.String("project", "twinlog-chaos", "compose project")
	image := fs.String("image", "twinlog:dev", "twinlog image (FROM scratch; the driver binary is copied in)")
	bin := fs.String("binary", "deploy/bin/twinchaos", "static linux twinchaos binary to run as the client")
	duration := fs.Duration("duration", 60*time.Second, "fault phase")
	seed := fs.Uint64("seed", 0, "fault and operator schedule seed (0: time-based, printed)")
	out := fs.String("out", "run/chaos-history.jsonl", "history file (JSON lines)")
	producers := fs.Int("producers", 3, "producers in the client")
	parts := fs.Int("partitions", 3, "partitions of the chaos topic")
	tlsDir := fs.String("tls-dir", "", "directory with ca.crt, admin.crt and admin.key (scripts/gencerts; deploy/tls): the client uses TLS as User:admin (empty: plaintext)")
	_ = fs.Parse(args)
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	x := &host{project: *project, image: *image, seed: *seed, rng: rand.New(rand.NewPCG(*seed, *seed)), opRng: rand.New(rand.NewPCG(*seed, ^*seed)),
		cids: map[string]string{}, faults: map[string]int{}, start: time.Now(),
		opDone: make(chan event, 4), ready: make(chan struct{}), phase: "mirroring"}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "twinchaos: "+format+"\n", a...)
		return 2
	}
	for _, n := range nodes {
		id, err := x.cid(n.service)
		if err != nil {
			return fail("%v", err)
		}
		x.cids[n.service] = id
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fail("%v", err)
	}
	f, err := os.Create(*out)
	if err != nil {
		return fail("%v", err)
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	defer bw.Flush()
	x.file = json.NewEncoder(bw)
	x.record(event{Ev: "start", Msg: fmt.Sprintf("seed %d duration %v project %s", *seed, *duration, *project), N: int64(*seed)})
	x.logf("seed %d (--seed=%d replays the fault and operator schedule), duration %v, history %s", *seed, *seed, *duration, *out)

	// The client container: on both clusters' networks (not interlink),
	// the driver binary copied into the scratch image (no shell, no
	// registry).
	name := *project + "-chaos-client"
	_ = docker("rm", "-f", "-v", name)
	create := []string{"create", "-i", "--name", name, "--network", x.net("cluster-a"), "--entrypoint", "/twinchaos"}
	clientArgs := []string{"client", "--partitions", fmt.Sprint(*parts), "--producers", fmt.Sprint(*producers)}
	if *tlsDir != "" {
		// The secured deployment: the certificates mounted read-only, as
		// in the daemons' containers; the client presents admin's.
		abs, err := filepath.Abs(*tlsDir)
		if err != nil {
			return fail("%v", err)
		}
		// The metadata observers fetch as broker -1, which the template
		// (User:cluster-X-broker-{id}) names cluster-X-broker--1:
		// scripts/gencerts issues that certificate and chaos.sh grants it
		// ClusterAction.
		files := []string{"ca.crt", "admin.crt", "admin.key"}
		for _, cl := range []string{"a", "b"} {
			files = append(files, "cluster-"+cl+"-broker--1.crt", "cluster-"+cl+"-broker--1.key")
		}
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(abs, f)); err != nil {
				return fail("--tls-dir: %v (run scripts/gencerts)", err)
			}
		}
		const in = "/etc/twinlog/tls"
		create = append(create, "-v", abs+":"+in+":ro")
		clientArgs = append(clientArgs, "--tls-ca", in+"/ca.crt", "--tls-cert", in+"/admin.crt", "--tls-key", in+"/admin.key")
		for _, cl := range []string{"a", "b"} {
			obs := in + "/cluster-" + cl + "-broker--1"
			clientArgs = append(clientArgs, "--observer-tls-cert-"+cl, obs+".crt", "--observer-tls-key-"+cl, obs+".key")
		}
	}
	if err := docker(append(append(create, *image), clientArgs...)...); err != nil {
		return fail("%v", err)
	}
	defer func() { _ = docker("rm", "-f", "-v", name) }()
	if err := docker("network", "connect", x.net("cluster-b"), name); err != nil {
		return fail("%v", err)
	}
	if err := docker("cp", *bin, name+":/twinchaos"); err != nil {
		return fail("%v", err)
	}
	cmd := exec.Command("docker", "start", "-a", "-i", name)
	stdin, _ := cmd.StdinPipe()
	x.stdin = stdin
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return fail("%v", err)
	}
	readDone := make(chan struct{})
	x.readDone = readDone
	var done, stoppedSeen bool
	stopped := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			var ev event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				x.logf("client: %s", sc.Text())
				continue
			}
			x.record(ev)
			x.echo(ev)
			switch ev.Ev {
			case "ready":
				once.Do(func() { close(x.ready) })
			case "op-done":
				x.opDone <- ev
			case "stopped":
				if !stoppedSeen {
					stoppedSeen = true
					close(stopped)
				}
			case "done":
				done = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-x.ready:
	case <-readDone:
		_ = cmd.Wait()
		return fail("client exited before ready")
	case <-time.After(4 * time.Minute):
		return fail("client not ready after 4m")
	}

	// The schedule, two seeded lanes: faults one at a time, and operator
	// steps running in the client while faults go on.
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	var lanes sync.WaitGroup
	lanes.Add(1)
	go func() { defer lanes.Done(); x.operatorLane(ctx) }()
	for ctx.Err() == nil {
		sleepCtx(ctx, time.Duration(300+x.rng.IntN(1200))*time.Millisecond)
		if ctx.Err() != nil {
			break
		}
		x.fault(ctx)
	}
	cancel()
	lanes.Wait()
	x.logf("fault phase over; healing, finishing the operator step, final failback and catch-up")
	healErr := x.healAll(3 * time.Minute)
	if healErr != nil {
		x.logf("heal: %v", healErr)
	}
	x.record(event{Ev: "healed"})
	opOK := x.waitOp(5 * time.Minute)
	x.send("stop")
	select {
	case <-stopped:
	case <-readDone:
	case <-time.After(2 * time.Minute):
	}
	if opOK && x.phase == "failed-over" {
		x.operate(context.Background())
		opOK = x.waitOp(5 * time.Minute)
	}
	x.send("final")
	select {
	case <-readDone:
	case <-time.After(10 * time.Minute):
		x.logf("client did not finish in 10m; removing it")
		_ = docker("rm", "-f", "-v", name)
		<-readDone
	}
	clientErr := cmd.Wait()
	stdin.Close()

	x.mu.Lock()
	defer x.mu.Unlock()
	res := check(x.events)
	for _, v := range res.Violations {
		_ = x.file.Encode(event{Ev: "history-violation", TP: v.Partition, Kind: v.Invariant, Msg: v.Detail})
	}
	total := 0
	for _, n := range x.faults {
		total += n
	}
	c := res.Counts
	summary := fmt.Sprintf("seed %d, fault phase %v, total %.0fs\n"+
		"  faults %d: %s\n"+
		"  operator: failovers planned=%d unplanned=%d planned-timeout=%d, failbacks %d\n"+
		"  cluster a: acked %d, consumed %d, leader epochs %d, truncation points %d, unclean elections %d\n"+
		"  cluster b: acked %d, consumed %d, leader epochs %d, truncation points %d, unclean elections %d\n"+
		"  checker: %s\n"+
		"  history a: %s\n  history b: %s\n"+
		"  violations %d",
		*seed, *duration, time.Since(x.start).Seconds(), total, countsString(x.faults),
		c["failovers planned"], c["failovers unplanned"], c["failovers planned-timeout"], c["failbacks"],
		c["acked a"], c["consumed a"], c["leader epochs a"], c["truncation points a"], c["unclean elections a"],
		c["acked b"], c["consumed b"], c["leader epochs b"], c["truncation points b"], c["unclean elections b"],
		countsString(c), res.History["a"], res.History["b"], len(res.Violations))
	_ = x.file.Encode(event{Ev: "summary", Msg: summary})
	fmt.Println("twinchaos summary:", summary)
	for _, l := range violationLines(res.Violations, 3) {
		fmt.Println(l)
	}
	switch {
	case clientErr != nil || !done || !opOK:
		fmt.Printf("twinchaos: FAIL: client did not finish (client: %v, operator step finished: %t); heal: %v\n", clientErr, opOK, healErr)
		return 1
	case len(res.Violations) > 0:
		fmt.Println("twinchaos: FAIL: violations")
		return 1
	case c["acked a"]+c["acked b"] == 0:
		fmt.Println("twinchaos: FAIL: nothing acked")
		return 1
	}
	fmt.Println("twinchaos: PASS")
	return 0
}
