package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestReassign checks what twinctl reassign sends (from arguments, a Kafka
// plan file or --cancel) and how it reports the per-partition results.
func TestReassign(t *testing.T) {
	plan := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"orders","partition":2,"replicas":[3,1,2]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	type part = twinlogv1.ReassignablePartition
	tests := []struct {
		name       string
		args       []string
		wantParts  []*part
		wantCode   int
		wantOut    string
		wantStderr string
	}{
		{
			name:      "arguments",
			args:      []string{"reassign", "orders:0=1,2,4", "orders:1=2,4,1"},
			wantParts: []*part{{Topic: "orders", Partition: 0, Replicas: []int32{1, 2, 4}}, {Topic: "orders", Partition: 1, Replicas: []int32{2, 4, 1}}},
			wantOut: "TOPIC   PARTITION  RESULT\n" +
				"orders  0          reassignment started\n" +
				"orders  1          reassignment started\n",
		},
		{
			name:      "plan file then arguments",
			args:      []string{"reassign", "--file", plan, "payments:0=2"},
			wantParts: []*part{{Topic: "orders", Partition: 2, Replicas: []int32{3, 1, 2}}, {Topic: "payments", Partition: 0, Replicas: []int32{2}}},
			wantOut: "TOPIC     PARTITION  RESULT\n" +
				"orders    2          reassignment started\n" +
				"payments  0          reassignment started\n",
		},
		{
			name:      "cancel sends empty targets, also for a plan file",
			args:      []string{"reassign", "--cancel", "--file", plan, "orders:0", "orders:1=9,9"},
			wantParts: []*part{{Topic: "orders", Partition: 2}, {Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}},
			wantOut: "TOPIC   PARTITION  RESULT\n" +
				"orders  2          reassignment cancelled\n" +
				"orders  0          reassignment cancelled\n" +
				"orders  1          reassignment cancelled\n",
		},
		{
			name:      "json",
			args:      []string{"--json", "reassign", "orders:0=1,2,3"},
			wantParts: []*part{{Topic: "orders", Partition: 0, Replicas: []int32{1, 2, 3}}},
			wantOut:   "{\"topic\":\"orders\",\"partition\":0}\n",
		},
		{
			name:      "one partition fails",
			args:      []string{"reassign", "orders:0=1,2,3", "nope:0=1,2,3"},
			wantParts: []*part{{Topic: "orders", Partition: 0, Replicas: []int32{1, 2, 3}}, {Topic: "nope", Partition: 0, Replicas: []int32{1, 2, 3}}},
			wantCode:  ExitError,
			wantOut: "TOPIC   PARTITION  RESULT\n" +
				"orders  0          reassignment started\n" +
				"nope    0          UNKNOWN_TOPIC_OR_PARTITION\n",
			wantStderr: "twinctl: partition nope-0: unknown topic or partition: list topics with `twinctl topics list`\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFakeAdmin(map[string]int32{"orders": 3, "payments": 1})
			h := startFake(t, fake)
			stdout, stderr, code := h.run(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if diff := cmp.Diff(tt.wantOut, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if stderr != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", stderr, tt.wantStderr)
			}
			want := []*twinlogv1.AlterPartitionReassignmentsRequest{{Partitions: tt.wantParts}}
			if diff := cmp.Diff(want, fake.reassigns(), protocmp.Transform()); diff != "" {
				t.Errorf("AlterPartitionReassignments requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReassignUsage: malformed plans are usage errors and send nothing.
func TestReassignUsage(t *testing.T) {
	fake := newFakeAdmin(map[string]int32{"orders": 3})
	h := startFake(t, fake)
	for _, args := range [][]string{
		{"reassign"},
		{"reassign", "orders:0"},
		{"reassign", "orders=1,2"},
		{"reassign", "orders:0=a,b"},
		{"reassign", "--file", filepath.Join(t.TempDir(), "missing.json")},
	} {
		_, stderr, code := h.run(t, args...)
		if code != ExitUsage || !strings.Contains(stderr, "run `twinctl --help`") {
			t.Errorf("%v: exit %d stderr %q, want usage error", args, code, stderr)
		}
	}
	if n := len(fake.reassigns()); n != 0 {
		t.Errorf("sent %d requests for malformed plans", n)
	}
}

func (f *fakeAdmin) reassigns() []*twinlogv1.AlterPartitionReassignmentsRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reassignReqs
}
