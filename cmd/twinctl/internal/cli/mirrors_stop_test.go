package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// lockedBuffer is an io.Writer the fake may read while the CLI writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stopRun is the outcome of one `twinctl mirrors stop` against a stopFake.
type stopRun struct {
	stdout, stderr string
	code           int
	// stdoutAtPoll is what stdout held when each DescribeMirrors arrived.
	stdoutAtPoll []string
	describes    int
	stopReqs     []*twinlogv1.StopMirrorTopicsRequest
}

// stopFake serves mirror "m" over orders (2 partitions) and payments (1),
// all MIRRORING. After a stop, DescribeMirrors shows the stopped partitions
// STOPPING for polls answers (-1: forever), then STOPPED.
func stopFake(polls int) *fakeAdmin {
	f := newFakeAdmin(map[string]int32{"orders": 2, "payments": 1})
	mirroring := twinlogv1.MirrorState_MIRROR_STATE_MIRRORING
	f.mirrors = []*twinlogv1.MirrorDescription{{
		Name: "m", SourceBootstrap: []string{"src:1"}, SourceClusterId: "cluster-a",
		Partitions: []*twinlogv1.MirrorPartitionStatus{
			{Mirror: "m", Topic: "orders", Partition: 0, State: mirroring, DesiredState: mirroring},
			{Mirror: "m", Topic: "orders", Partition: 1, State: mirroring, DesiredState: mirroring},
			{Mirror: "m", Topic: "payments", Partition: 0, State: mirroring, DesiredState: mirroring},
		},
	}}
	f.stoppingPolls = polls
	return f
}

func runStop(t *testing.T, fake *fakeAdmin, args ...string) stopRun {
	t.Helper()
	h := startFake(t, fake)
	var out lockedBuffer
	var errb bytes.Buffer
	var r stopRun
	var atPoll []string // guarded by fake.mu, under which the hook runs
	fake.onDescribeMirrors = func() { atPoll = append(atPoll, out.String()) }
	opts := h.options()
	opts.Stdout, opts.Stderr, opts.Stdin, opts.HomeDir = &out, &errb, strings.NewReader(""), t.TempDir()
	r.code = Execute(t.Context(), append([]string{"--bootstrap", "fake:1"}, args...), opts)
	r.stdout, r.stderr = out.String(), errb.String()
	fake.mu.Lock()
	r.describes, r.stopReqs, r.stdoutAtPoll = fake.describeCalls, fake.stopReqs, atPoll
	fake.mu.Unlock()
	return r
}

// TestMirrorsStopWaitsUntilStopped: the controller only records the stop;
// "stopped (writable)" may be printed only once DescribeMirrors reports
// every stopped partition STOPPED, and polling ends right then.
func TestMirrorsStopWaitsUntilStopped(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		polls     int // DescribeMirrors answers that still say STOPPING
		wantOut   string
		wantStop  *twinlogv1.StopMirrorTopicsRequest
		wantPolls int
	}{
		{
			// No topics named: the CLI lists the mirror's topics first
			// (one more DescribeMirrors) and names them in the request,
			// because the controller acts only on the topics it is given.
			name:      "all topics",
			args:      []string{"mirrors", "stop", "m"},
			polls:     3,
			wantOut:   "mirror m topic orders: stopped (writable)\nmirror m topic payments: stopped (writable)\n",
			wantStop:  &twinlogv1.StopMirrorTopicsRequest{Mirror: "m", Topics: []string{"orders", "payments"}},
			wantPolls: 5,
		},
		{
			name:      "one topic while another keeps mirroring",
			args:      []string{"mirrors", "stop", "m", "orders"},
			polls:     2,
			wantOut:   "mirror m topic orders: stopped (writable)\n",
			wantStop:  &twinlogv1.StopMirrorTopicsRequest{Mirror: "m", Topics: []string{"orders"}},
			wantPolls: 3,
		},
		{
			name:      "STOPPED at the first poll",
			args:      []string{"mirrors", "stop", "m", "payments"},
			polls:     0,
			wantOut:   "mirror m topic payments: stopped (writable)\n",
			wantStop:  &twinlogv1.StopMirrorTopicsRequest{Mirror: "m", Topics: []string{"payments"}},
			wantPolls: 1,
		},
		{
			name:      "wait for catch-up passes the server timeout",
			args:      []string{"mirrors", "stop", "m", "orders", "--wait-for-catch-up", "--wait-timeout", "5s"},
			polls:     1,
			wantOut:   "mirror m topic orders: stopped (writable)\n",
			wantStop:  &twinlogv1.StopMirrorTopicsRequest{Mirror: "m", Topics: []string{"orders"}, WaitForCatchUp: true, TimeoutMs: 5000},
			wantPolls: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runStop(t, stopFake(tt.polls), tt.args...)
			if r.code != ExitOK {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			if diff := cmp.Diff(tt.wantOut, r.stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if r.describes != tt.wantPolls {
				t.Errorf("DescribeMirrors called %d times, want %d (poll until STOPPED, then stop polling)", r.describes, tt.wantPolls)
			}
			for i, s := range r.stdoutAtPoll {
				if s != "" {
					t.Errorf("stdout before poll %d = %q, want nothing printed before every partition is STOPPED", i+1, s)
				}
			}
			if diff := cmp.Diff([]*twinlogv1.StopMirrorTopicsRequest{tt.wantStop}, r.stopReqs, protocmp.Transform()); diff != "" {
				t.Errorf("StopMirrorTopics requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMirrorsStopNoWait: --no-wait returns once the stop is recorded,
// without polling, and says the partitions are not writable yet.
func TestMirrorsStopNoWait(t *testing.T) {
	r := runStop(t, stopFake(-1), "mirrors", "stop", "m", "--no-wait")
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	want := "mirror m topic orders: stop recorded (partitions turn writable shortly)\n" +
		"mirror m topic payments: stop recorded (partitions turn writable shortly)\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	// One DescribeMirrors lists the mirror's topics (none were named); none
	// polls.
	if r.describes != 1 || len(r.stopReqs) != 1 {
		t.Errorf("DescribeMirrors calls = %d, StopMirrorTopics calls = %d; want 1 and 1", r.describes, len(r.stopReqs))
	}
}

// TestMirrorsStopTimeout: partitions that stay STOPPING past
// --stopped-timeout fail the command (exit 1, not usage) with a message
// that says the stop was recorded, and nothing claims they are writable.
func TestMirrorsStopTimeout(t *testing.T) {
	r := runStop(t, stopFake(-1), "mirrors", "stop", "m", "orders", "--stopped-timeout", "300ms")
	if r.code != ExitError {
		t.Errorf("exit %d, want %d (ExitError)", r.code, ExitError)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing", r.stdout)
	}
	if r.describes == 0 {
		t.Errorf("no DescribeMirrors poll before giving up")
	}
	for _, want := range []string{"twinctl: mirror m: stop recorded, but ", "(see `twinctl mirrors describe m`)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr = %q, want it to contain %q", r.stderr, want)
		}
	}
	if strings.Contains(r.stderr, "--help") {
		t.Errorf("stderr = %q: a timeout is not a usage error", r.stderr)
	}
	// The error names the partitions of the stopped topic that are not
	// STOPPED, as of the last answered poll, even when the deadline ends a
	// poll in flight.
	if !strings.Contains(r.stderr, "STOPPED yet: orders-0 STOPPING, orders-1 STOPPING (see") {
		t.Errorf("stderr = %q, want the pending partitions orders-0 and orders-1 (and not payments)", r.stderr)
	}
}

// TestMirrorsStopPartialFailure: when one topic's stop fails, the others'
// stop is recorded but not applied yet, so none is reported writable, and
// the command fails.
func TestMirrorsStopPartialFailure(t *testing.T) {
	f := stopFake(1)
	f.topicErrs = map[string]twinlogv1.ErrorCode{"payments": twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_STATE}
	r := runStop(t, f, "mirrors", "stop", "m")
	if r.code != ExitError {
		t.Errorf("exit %d, want %d (ExitError)", r.code, ExitError)
	}
	if want := "mirror m topic orders: stop recorded (partitions turn writable shortly)\n"; r.stdout != want {
		t.Errorf("stdout = %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "payments") {
		t.Errorf("stderr = %q, want the failed topic payments", r.stderr)
	}
}

// TestMirrorsStopBadTimeout: a non-positive --stopped-timeout is a usage
// error, found before anything is sent.
func TestMirrorsStopBadTimeout(t *testing.T) {
	for _, v := range []string{"0s", "-1s"} {
		r := runStop(t, stopFake(1), "mirrors", "stop", "m", "--stopped-timeout", v)
		if r.code != ExitUsage {
			t.Errorf("--stopped-timeout %s: exit %d, want %d (ExitUsage); stderr %q", v, r.code, ExitUsage, r.stderr)
		}
		if len(r.stopReqs) != 0 {
			t.Errorf("--stopped-timeout %s: %d stop requests sent, want 0", v, len(r.stopReqs))
		}
	}
}

// TestMirrorsStopJSON: --json prints one line {mirror, topic} per topic
// after the wait, and the same lines with --no-wait.
func TestMirrorsStopJSON(t *testing.T) {
	want := []any{map[string]any{"mirror": "m", "topic": "orders"}, map[string]any{"mirror": "m", "topic": "payments"}}
	tests := []struct {
		name      string
		args      []string
		wantPolls int
	}{
		// One DescribeMirrors lists the mirror's topics, then the polls.
		{"wait", []string{"--json", "mirrors", "stop", "m"}, 3},
		{"no wait", []string{"--json", "mirrors", "stop", "m", "--no-wait"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runStop(t, stopFake(1), tt.args...)
			if r.code != ExitOK {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			var got []any
			for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
				var v any
				if err := json.Unmarshal([]byte(l), &v); err != nil {
					t.Fatalf("stdout line is not one JSON object: %v\n%s", err, r.stdout)
				}
				got = append(got, v)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("JSON (-want +got):\n%s", diff)
			}
			if r.describes != tt.wantPolls {
				t.Errorf("DescribeMirrors called %d times, want %d", r.describes, tt.wantPolls)
			}
		})
	}
}
