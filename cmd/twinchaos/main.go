// Command twinchaos runs the SPEC §8.12/§8.13 history checker
// (internal/sim.History) against the docker-compose deployment (issue 7,
// `make chaos`, scripts/chaos.sh).
//
//	twinchaos run [flags]     on the host: starts the client container,
//	                          injects docker kill/restart and network
//	                          disconnects on cluster A's brokers from a seed,
//	                          writes the history as JSON lines, prints a
//	                          summary, exits 1 on any violation.
//	twinchaos client [flags]  inside a container on the cluster network (the
//	                          brokers advertise service names): producers
//	                          (acks=all, unique values) and consumers,
//	                          streaming acks and reads as JSON lines.
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
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twinlog/twinlog/internal/sim"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "client" {
		if err := runClient(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "twinchaos client:", err)
			os.Exit(1)
		}
		return
	}
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	}
	os.Exit(runHost(args))
}

type host struct {
	project, image string
	seed           uint64
	rng            *rand.Rand
	cids           map[string]string

	mu     sync.Mutex
	h      *sim.History
	file   *json.Encoder
	faults map[string]int
	counts map[string]int
	finals map[string]map[int64]string
	done   bool
	start  time.Time
}

func (x *host) logf(format string, args ...any) {
	fmt.Printf("[chaos %5.1fs] %s\n", time.Since(x.start).Seconds(), fmt.Sprintf(format, args...))
}

// record writes ev to the history file and feeds it to the checker.
func (x *host) record(ev event) {
	if ev.At == "" {
		ev.At = time.Now().UTC().Format(time.RFC3339Nano)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	_ = x.file.Encode(ev)
	x.counts[ev.Ev]++
	switch ev.Ev {
	case "ack":
		x.h.RecordAck(ev.TP, ev.Off, ev.Val, ev.LE, true, 2)
	case "read":
		x.h.RecordRead(ev.C, ev.TP, ev.Off, ev.Val, ev.LE)
	case "reset":
		x.h.RecordReset(ev.C, ev.TP)
	case "finalrec":
		if x.finals[ev.TP] == nil {
			x.finals[ev.TP] = map[int64]string{}
		}
		x.finals[ev.TP][ev.Off] = ev.Val
	case "final":
		x.h.Final(ev.TP, x.finals[ev.TP], ev.LE)
	case "fault":
		x.faults[ev.Kind]++
	case "done":
		x.done = true
	}
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

var brokers = []string{"a-broker-1", "a-broker-2", "a-broker-3"}

// fault injects one seeded fault on one broker and heals it.
func (x *host) fault(ctx context.Context) {
	b := brokers[x.rng.IntN(len(brokers))]
	id := x.cids[b]
	down := time.Duration(1000+x.rng.IntN(5000)) * time.Millisecond
	var kind string
	var err error
	switch x.rng.IntN(4) {
	case 0, 1:
		kind = "docker-kill"
		x.record(event{Ev: "fault", Kind: kind, Target: b, Msg: "down " + down.String()})
		if err = docker("kill", id); err == nil {
			sleepCtx(ctx, down)
			err = docker("start", id)
		}
	case 2:
		kind = "docker-restart"
		x.record(event{Ev: "fault", Kind: kind, Target: b})
		err = docker("restart", "-t", "10", id)
	case 3:
		nets := []string{x.project + "_cluster-a"}
		kind = "net-disconnect-cluster"
		if x.rng.IntN(2) == 0 {
			nets = append(nets, x.project+"_interlink")
			kind = "net-disconnect-all"
		}
		x.record(event{Ev: "fault", Kind: kind, Target: b, Msg: "down " + down.String()})
		for _, n := range nets {
			if e := docker("network", "disconnect", n, id); e != nil && err == nil {
				err = e
			}
		}
		sleepCtx(ctx, down)
		for _, n := range nets {
			if e := docker("network", "connect", "--alias", b, n, id); e != nil && err == nil {
				err = e
			}
		}
	}
	x.record(event{Ev: "heal", Kind: kind, Target: b})
	x.logf("%s %s done%s", kind, b, map[bool]string{true: "", false: fmt.Sprintf(" (error: %v)", err)}[err == nil])
}

// healAll reconnects and starts every broker (idempotent) and waits until
// they report healthy.
func (x *host) healAll(timeout time.Duration) error {
	for _, b := range brokers {
		for _, n := range []string{x.project + "_cluster-a", x.project + "_interlink"} {
			_ = docker("network", "connect", "--alias", b, n, x.cids[b]) // fails if connected
		}
		_ = docker("start", x.cids[b])
	}
	deadline := time.Now().Add(timeout)
	for {
		bad := ""
		for _, b := range brokers {
			st, _ := dockerOut("inspect", "-f", "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}", x.cids[b])
			if st != "healthy" {
				bad += " " + b + "=" + st
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

func runHost(args []string) int {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	project := fs.String("project", "twinlog-chaos", "compose project")
	image := fs.String("image", "twinlog:dev", "twinlog image (FROM scratch; the driver binary is copied in)")
	bin := fs.String("binary", "deploy/bin/twinchaos", "static linux twinchaos binary to run as the client")
	duration := fs.Duration("duration", 60*time.Second, "fault phase")
	seed := fs.Uint64("seed", 0, "fault schedule seed (0: time-based, printed)")
	out := fs.String("out", "run/chaos-history.jsonl", "history file (JSON lines)")
	producers := fs.Int("producers", 3, "producers in the client")
	parts := fs.Int("partitions", 3, "partitions of the chaos topic")
	_ = fs.Parse(args)
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	x := &host{project: *project, image: *image, seed: *seed, rng: rand.New(rand.NewPCG(*seed, *seed)),
		cids: map[string]string{}, h: sim.NewHistory(), faults: map[string]int{}, counts: map[string]int{},
		finals: map[string]map[int64]string{}, start: time.Now()}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "twinchaos: "+format+"\n", a...)
		return 2
	}
	for _, b := range brokers {
		id, err := x.cid(b)
		if err != nil {
			return fail("%v", err)
		}
		x.cids[b] = id
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
	x.logf("seed %d (--seed=%d replays the fault schedule), duration %v, history %s", *seed, *seed, *duration, *out)

	// The client container: on cluster A's network, the driver binary
	// copied into the scratch image (no shell, no registry).
	name := *project + "-chaos-client"
	_ = docker("rm", "-f", name)
	if err := docker("create", "-i", "--name", name, "--network", *project+"_cluster-a", "--entrypoint", "/twinchaos", *image,
		"client", "--partitions", fmt.Sprint(*parts), "--producers", fmt.Sprint(*producers)); err != nil {
		return fail("%v", err)
	}
	defer func() { _ = docker("rm", "-f", name) }()
	if err := docker("cp", *bin, name+":/twinchaos"); err != nil {
		return fail("%v", err)
	}
	cmd := exec.Command("docker", "start", "-a", "-i", name)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return fail("%v", err)
	}
	ready := make(chan struct{})
	readDone := make(chan struct{})
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
			switch ev.Ev {
			case "ready":
				x.logf("client ready: %s", ev.Msg)
				once.Do(func() { close(ready) })
			case "violation":
				x.logf("client saw a violation: %s %d %s", ev.TP, ev.Off, ev.Msg)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-ready:
	case <-readDone:
		_ = cmd.Wait()
		return fail("client exited before ready")
	case <-time.After(3 * time.Minute):
		return fail("client not ready after 3m")
	}

	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	for ctx.Err() == nil {
		sleepCtx(ctx, time.Duration(1000+x.rng.IntN(3000))*time.Millisecond)
		if ctx.Err() != nil {
			break
		}
		x.fault(ctx)
	}
	cancel()
	x.logf("fault phase over; stopping the workload and healing")
	fmt.Fprintln(stdin, "stop")
	healErr := x.healAll(3 * time.Minute)
	if healErr != nil {
		x.logf("heal: %v", healErr)
	}
	x.record(event{Ev: "healed"})
	fmt.Fprintln(stdin, "final")
	<-readDone
	clientErr := cmd.Wait()
	stdin.Close()

	x.mu.Lock()
	defer x.mu.Unlock()
	vs := x.h.Violations()
	kinds := make([]string, 0, len(x.faults))
	total := 0
	for k, n := range x.faults {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		total += n
	}
	sort.Strings(kinds)
	for _, v := range vs {
		_ = x.file.Encode(event{Ev: "history-violation", TP: v.Partition, Kind: v.Invariant, Msg: v.Detail})
	}
	summary := fmt.Sprintf("seed %d, fault phase %v, total %.0fs: acked %d, reads %d, final records %d, faults %d (%s), client-side violations %d, history: %s",
		*seed, *duration, time.Since(x.start).Seconds(), x.counts["ack"], x.counts["read"], x.counts["finalrec"], total, strings.Join(kinds, " "),
		x.counts["violation"], x.h.Summary())
	_ = x.file.Encode(event{Ev: "summary", Msg: summary})
	fmt.Println("twinchaos summary:", summary)
	for _, v := range vs {
		fmt.Println("VIOLATION:", v)
	}
	switch {
	case clientErr != nil || !x.done:
		fmt.Printf("twinchaos: FAIL: client did not finish (%v); heal: %v\n", clientErr, healErr)
		return 1
	case len(vs) > 0 || x.counts["violation"] > 0:
		fmt.Println("twinchaos: FAIL: violations")
		return 1
	case x.counts["ack"] == 0:
		fmt.Println("twinchaos: FAIL: nothing acked")
		return 1
	}
	fmt.Println("twinchaos: PASS")
	return 0
}
