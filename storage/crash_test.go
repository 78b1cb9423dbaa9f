package storage

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twinlog/twinlog"
)

const crashDirEnv = "TWINLOG_CRASH_WRITER_DIR"

// TestHelperWriter is the child of TestCrashSIGKILL: it opens the log
// (recovering it), then appends batches whose record values are their own
// offsets, fsyncing every few batches and printing "synced <LEO>" after each
// fsync, until it is killed.
func TestHelperWriter(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCrashSIGKILL")
	}
	l, err := Open(OSFS{}, dir, Options{SegmentMaxBytes: 256 << 10, IndexIntervalBytes: 1024})
	if err != nil {
		fmt.Println("open error:", err)
		os.Exit(2)
	}
	fmt.Printf("opened %d\n", l.LogEndOffset())
	r := rand.New(rand.NewPCG(uint64(os.Getpid()), 1))
	e := twinlog.Epoch(r.IntN(3)) + l.Epochs().Latest()
	e = max(e, 0)
	for i := 0; ; i++ {
		base := l.LogEndOffset()
		n := 1 + r.IntN(20)
		rs := make([]Record, n)
		for j := range rs {
			v := make([]byte, 8+r.IntN(500))
			binary.BigEndian.PutUint64(v, uint64(base)+uint64(j))
			rs[j] = Record{Timestamp: int64(i), Value: v}
		}
		b, _ := EncodeBatch(rs, BatchOptions{})
		if _, err := l.AppendAsLeader(b, e); err != nil {
			fmt.Println("append error:", err)
			os.Exit(2)
		}
		if i%4 == 0 {
			if err := l.Flush(); err != nil {
				fmt.Println("flush error:", err)
				os.Exit(2)
			}
			fmt.Printf("synced %d\n", l.LogEndOffset())
		}
	}
}

// TestCrashSIGKILL kills a real writer process mid-append over and over and
// checks after each kill that the log reopens as a valid prefix holding
// every batch the writer reported fsynced. TWINLOG_CRASH_SECONDS sets the
// duration (default 8 s, 2 s with -short).
func TestCrashSIGKILL(t *testing.T) {
	budget := 8 * time.Second
	if testing.Short() {
		budget = 2 * time.Second
	}
	if s := os.Getenv("TWINLOG_CRASH_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		budget = time.Duration(n) * time.Second
	}
	dir := t.TempDir() + "/crash-0"
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	deadline := time.Now().Add(budget)
	var synced twinlog.Offset
	iters := 0
	for iters < 3 || time.Now().Before(deadline) {
		iters++
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		kill := time.After(time.Duration(10+r.IntN(90)) * time.Millisecond)
		opened := false
	loop:
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					break loop
				}
				switch {
				case strings.HasPrefix(line, "opened "):
					o, _ := strconv.ParseInt(strings.TrimPrefix(line, "opened "), 10, 64)
					if twinlog.Offset(o) < synced {
						t.Fatalf("iteration %d: child reopened at %d, below synced %d", iters, o, synced)
					}
					opened = true
				case strings.HasPrefix(line, "synced "):
					o, _ := strconv.ParseInt(strings.TrimPrefix(line, "synced "), 10, 64)
					synced = max(synced, twinlog.Offset(o))
				default:
					t.Fatalf("child: %s", line)
				}
			case <-kill:
				if opened {
					cmd.Process.Signal(syscall.SIGKILL)
					kill = nil
				} else {
					kill = time.After(10 * time.Millisecond)
				}
			}
		}
		cmd.Wait()
		verifyCrashLog(t, dir, synced)
	}
	t.Logf("%d kills, %d offsets synced", iters, synced)
}

func verifyCrashLog(t *testing.T, dir string, synced twinlog.Offset) {
	t.Helper()
	l, err := Open(OSFS{}, dir, Options{SegmentMaxBytes: 256 << 10, IndexIntervalBytes: 1024})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer l.Close()
	if l.LogEndOffset() < synced {
		t.Fatalf("LEO %d below the fsynced offset %d", l.LogEndOffset(), synced)
	}
	next := l.LogStartOffset()
	for next < l.LogEndOffset() {
		res, err := l.Read(next, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		bs, err := SplitBatches(res.Batches)
		if err != nil || len(bs) == 0 {
			t.Fatalf("read at %d: %v", next, err)
		}
		for _, b := range bs {
			if b.BaseOffset() != next {
				t.Fatalf("batch at %d, expected %d (not a dense prefix)", b.BaseOffset(), next)
			}
			recs, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				if got := twinlog.Offset(binary.BigEndian.Uint64(rec.Value)); got != rec.Offset {
					t.Fatalf("record at %d holds value for %d", rec.Offset, got)
				}
			}
			next = b.NextOffset()
		}
	}
	checkEpochs(t, OSFS{}, l)
}
