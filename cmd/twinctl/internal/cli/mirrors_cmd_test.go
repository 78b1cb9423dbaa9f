package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// mirrorOpsOf returns the Create/Start/Pause/Resume requests fake saw.
func mirrorOpsOf(f *fakeAdmin) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.mirrorOps...)
}

// TestMirrorsActionAllTopics: pause, resume and start without topics act on
// every topic of the mirror, as their help says. The controller acts only on
// the topics a request names (an empty list answers nothing), so the CLI
// must name them; before, it sent none and exited 0 having done nothing.
func TestMirrorsActionAllTopics(t *testing.T) {
	tests := []struct {
		verb, okWord string
		setup        func(*fakeAdmin)
	}{
		{"pause", "paused", nil},
		{"resume", "resumed", func(f *fakeAdmin) {
			for _, p := range f.mirrors[0].Partitions {
				p.State, p.DesiredState = twinlogv1.MirrorState_MIRROR_STATE_PAUSED, twinlogv1.MirrorState_MIRROR_STATE_PAUSED
			}
		}},
		{"start", "started", nil},
	}
	for _, tt := range tests {
		t.Run(tt.verb, func(t *testing.T) {
			f := stopFake(0)
			if tt.setup != nil {
				tt.setup(f)
			}
			h := startFake(t, f)
			stdout, stderr, code := h.run(t, "mirrors", tt.verb, "m")
			if code != ExitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			if diff := cmp.Diff([]string{tt.verb + " m orders,payments"}, mirrorOpsOf(f)); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			want := "mirror m topic orders: " + tt.okWord + "\nmirror m topic payments: " + tt.okWord + "\n"
			if diff := cmp.Diff(want, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMirrorsUnknownMirror: every mirror command given a mirror the
// controller does not know fails with exit 1 and says so, with or without
// topics. Without topics the controller answers an empty result list (and
// DescribeMirrors NotFound); before, the CLI printed nothing and exited 0.
func TestMirrorsUnknownMirror(t *testing.T) {
	for _, verb := range []string{"pause", "resume", "start", "stop"} {
		for _, args := range [][]string{{"mirrors", verb, "nope"}, {"mirrors", verb, "nope", "orders"}} {
			t.Run(strings.Join(args[1:], " "), func(t *testing.T) {
				f := stopFake(0)
				h := startFake(t, f)
				stdout, stderr, code := h.run(t, args...)
				if code != ExitError {
					t.Errorf("exit %d, want %d (ExitError); stderr %q", code, ExitError, stderr)
				}
				if !strings.Contains(stderr, "mirror nope") || !strings.Contains(stderr, "no such mirror") {
					t.Errorf("stderr = %q, want it to say mirror nope does not exist", stderr)
				}
				if stdout != "" {
					t.Errorf("stdout = %q, want nothing", stdout)
				}
			})
		}
	}
	t.Run("describe", func(t *testing.T) {
		h := startFake(t, stopFake(0))
		_, stderr, code := h.run(t, "mirrors", "describe", "nope")
		if code != ExitError || !strings.Contains(stderr, "mirror nope: no such mirror") {
			t.Errorf("exit %d, stderr %q; want exit 1 and \"mirror nope: no such mirror\"", code, stderr)
		}
	})
}

// TestMirrorsNoAnswer: a controller answer without a result for a named
// topic means nothing is known to have happened to it: exit 1, and no
// topic is reported done. Before, an empty answer exited 0.
func TestMirrorsNoAnswer(t *testing.T) {
	for _, args := range [][]string{
		{"mirrors", "pause", "m"},
		{"mirrors", "resume", "m", "orders"},
		{"mirrors", "start", "m", "payments"},
		{"mirrors", "stop", "m", "orders"},
		{"mirrors", "stop", "m", "--no-wait"},
		{"mirrors", "create", "m2", "--source", "src:1", "orders"},
	} {
		t.Run(strings.Join(args[1:], " "), func(t *testing.T) {
			f := stopFake(0)
			f.dropResults = true
			h := startFake(t, f)
			stdout, stderr, code := h.run(t, args...)
			if code != ExitError {
				t.Errorf("exit %d, want %d (ExitError); stderr %q", code, ExitError, stderr)
			}
			if !strings.Contains(stderr, "answered no topic results") {
				t.Errorf("stderr = %q, want it to say the controller answered nothing", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}
}

// TestMirrorsPerTopicError: a per-topic failure anywhere fails the command
// (exit 1) with the topic and the server's reason; the topics that did
// succeed are still reported (pause/resume/start apply per topic).
func TestMirrorsPerTopicError(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		wantOut string
	}{
		{[]string{"mirrors", "pause", "m"}, "mirror m topic orders: paused\n"},
		{[]string{"mirrors", "start", "m", "orders", "payments"}, "mirror m topic orders: started\n"},
		{[]string{"mirrors", "pause", "m", "orders", "ghost"}, "mirror m topic orders: paused\n"},
	} {
		t.Run(strings.Join(tt.args[1:], " "), func(t *testing.T) {
			f := stopFake(0)
			f.topicErrs = map[string]twinlogv1.ErrorCode{"payments": twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_STATE}
			h := startFake(t, f)
			stdout, stderr, code := h.run(t, tt.args...)
			if code != ExitError {
				t.Errorf("exit %d, want %d (ExitError); stderr %q", code, ExitError, stderr)
			}
			if diff := cmp.Diff(tt.wantOut, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			bad := tt.args[len(tt.args)-1]
			if bad == "m" {
				bad = "payments"
			}
			if !strings.Contains(stderr, "mirror m topic "+bad+": ") || !strings.Contains(stderr, "fake says no to "+bad) {
				t.Errorf("stderr = %q, want topic %s and the server's reason", stderr, bad)
			}
		})
	}
}

// TestMirrorsCreatePartialFailure: a create in which any topic failed
// exits 1, names the topic and reason, and prints no "created" line, not
// even for the topics that went through. Before, it printed "created" for
// them.
func TestMirrorsCreatePartialFailure(t *testing.T) {
	f := newFakeAdmin(map[string]int32{"orders": 1, "payments": 1})
	f.topicErrs = map[string]twinlogv1.ErrorCode{"payments": twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID}
	h := startFake(t, f)
	stdout, stderr, code := h.run(t, "mirrors", "create", "m", "--source", "src:1", "orders", "payments")
	if code != ExitError {
		t.Errorf("exit %d, want %d (ExitError); stderr %q", code, ExitError, stderr)
	}
	if strings.Contains(stdout, "created") || stdout != "" {
		t.Errorf("stdout = %q, want nothing (and never \"created\")", stdout)
	}
	for _, want := range []string{"mirror m topic payments: INCONSISTENT_TOPIC_ID (fake says no to payments)", "mirror m was not created as asked", "twinctl mirrors describe m"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr = %q, want it to contain %q", stderr, want)
		}
	}
}

// TestMirrorsNoTopics: a mirror that has no topics is refused when no topic
// is named, rather than a successful no-op.
func TestMirrorsNoTopics(t *testing.T) {
	f := newFakeAdmin(nil)
	f.mirrors = []*twinlogv1.MirrorDescription{{Name: "empty", SourceBootstrap: []string{"src:1"}}}
	h := startFake(t, f)
	for _, verb := range []string{"pause", "resume", "start", "stop"} {
		_, stderr, code := h.run(t, "mirrors", verb, "empty")
		if code != ExitError || !strings.Contains(stderr, "mirror empty has no topics to act on") {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and \"has no topics to act on\"", verb, code, stderr)
		}
	}
	if ops := mirrorOpsOf(f); len(ops) != 0 {
		t.Errorf("requests sent: %v, want none", ops)
	}
}

// TestMirrorsGolden pins the output of mirror commands that succeed, and
// of topics create --validate-only, which must not say "created".
func TestMirrorsGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"mirrors_create", []string{"mirrors", "create", "m2", "--source", "src:1,src:2", "orders", "payments"}},
		{"mirrors_create_json", []string{"mirrors", "create", "m2", "--source", "src:1", "orders", "--json"}},
		{"mirrors_pause_all", []string{"mirrors", "pause", "m"}},
		{"mirrors_pause_all_json", []string{"mirrors", "pause", "m", "--json"}},
		{"topics_create_validate_only", []string{"topics", "create", "fresh", "--partitions", "3", "--validate-only"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startFake(t, stopFake(0))
			stdout, stderr, code := h.run(t, tt.args...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			checkGolden(t, tt.name, stdout)
		})
	}
}
