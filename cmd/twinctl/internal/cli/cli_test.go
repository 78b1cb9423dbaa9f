package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// flatten lists "topic/partition" in result order.
func flatten(ts []*twinlogv1.DescribeTopicPartitionsTopicResult) []string {
	var out []string
	for _, t := range ts {
		if len(t.GetPartitions()) == 0 {
			out = append(out, t.GetName()+"/"+codeName(t.GetError()))
		}
		for _, p := range t.GetPartitions() {
			out = append(out, fmt.Sprintf("%s/%d", t.GetName(), p.GetPartitionIndex()))
		}
	}
	return out
}

func (h *harness) pager(t *testing.T, limit int32, chunk int) *Pager {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///fake", append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, h.options().DialOptions...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &Pager{Client: twinlogv1.NewAdminServiceClient(cc), Limit: limit, Chunk: chunk}
}

func cursors(reqs []*twinlogv1.DescribeTopicPartitionsRequest) []string {
	var out []string
	for _, r := range reqs {
		if r.GetCursor() == nil {
			out = append(out, "-")
		} else {
			out = append(out, cursorString(r.GetCursor()))
		}
	}
	return out
}

// TestPagerFollowsCursor is SPEC §9 S16 seen from the client: the pager
// resends the same topics with each nextCursor and merges the pages.
func TestPagerFollowsCursor(t *testing.T) {
	tests := []struct {
		name        string
		topics      map[string]int32
		sels        []TopicSelector
		limit       int32
		wantParts   []string
		wantCursors []string
	}{
		{
			name:        "S16 all topics limit 2",
			topics:      map[string]int32{"a": 3, "b": 2, "c": 1},
			limit:       2,
			wantParts:   []string{"a/0", "a/1", "a/2", "b/0", "b/1", "c/0"},
			wantCursors: []string{"-", "(a,2)", "(b,1)"},
		},
		{
			name:        "S16 with d: page 3 ends at a topic boundary",
			topics:      map[string]int32{"a": 3, "b": 2, "c": 1, "d": 1},
			limit:       2,
			wantParts:   []string{"a/0", "a/1", "a/2", "b/0", "b/1", "c/0", "d/0"},
			wantCursors: []string{"-", "(a,2)", "(b,1)", "(d,0)"},
		},
		{
			name:        "S16 mixed selectors",
			topics:      map[string]int32{"a": 3, "b": 2, "c": 1},
			sels:        []TopicSelector{{Topic: "b"}, {Topic: "a", Partitions: []int32{2, 0}}},
			limit:       2,
			wantParts:   []string{"a/0", "a/2", "b/0", "b/1"},
			wantCursors: []string{"-", "(b,0)"},
		},
		{
			name:        "limit 1 walks every partition",
			topics:      map[string]int32{"x": 3},
			limit:       1,
			wantParts:   []string{"x/0", "x/1", "x/2"},
			wantCursors: []string{"-", "(x,1)", "(x,2)"},
		},
		{
			name:        "unknown topic and partition entries survive merging",
			topics:      map[string]int32{"a": 2},
			sels:        []TopicSelector{{Topic: "a", Partitions: []int32{1, 5}}, {Topic: "zz"}},
			limit:       1,
			wantParts:   []string{"a/1", "a/5", "zz/UNKNOWN_TOPIC_OR_PARTITION"},
			wantCursors: []string{"-", "(a,5)", "(zz,0)"},
		},
		{
			name:        "no limit set: server max, one page",
			topics:      map[string]int32{"a": 3, "b": 2},
			wantParts:   []string{"a/0", "a/1", "a/2", "b/0", "b/1"},
			wantCursors: []string{"-"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startFake(t, newFakeAdmin(tt.topics))
			got, err := h.pager(t, tt.limit, 0).Describe(t.Context(), tt.sels)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantParts, flatten(got)); diff != "" {
				t.Errorf("partitions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCursors, cursors(h.fake.requests)); diff != "" {
				t.Errorf("request cursors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPagerChunksTopicLists checks that long topic lists are split, each
// chunk paged on its own, and the merged output is in one byte-wise order.
func TestPagerChunksTopicLists(t *testing.T) {
	topics := map[string]int32{}
	var sels []TopicSelector
	for _, n := range []string{"e", "d", "c", "b", "a"} {
		topics[n] = 2
		sels = append(sels, TopicSelector{Topic: n})
	}
	sels = append(sels, TopicSelector{Topic: "a", Partitions: []int32{1}}) // whole-topic selector wins
	h := startFake(t, newFakeAdmin(topics))
	got, err := h.pager(t, 3, 2).Describe(t.Context(), sels)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/0", "a/1", "b/0", "b/1", "c/0", "c/1", "d/0", "d/1", "e/0", "e/1"}
	if diff := cmp.Diff(want, flatten(got)); diff != "" {
		t.Errorf("partitions (-want +got):\n%s", diff)
	}
	var names [][]string
	for _, r := range h.fake.requests {
		var ns []string
		for _, tp := range r.GetTopics() {
			ns = append(ns, tp.GetName())
		}
		names = append(names, ns)
	}
	wantReqs := [][]string{{"a", "b"}, {"a", "b"}, {"c", "d"}, {"c", "d"}, {"e"}}
	if diff := cmp.Diff(wantReqs, names); diff != "" {
		t.Errorf("request topics (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"-", "(b,1)", "-", "(d,1)", "-"}, cursors(h.fake.requests)); diff != "" {
		t.Errorf("cursors (-want +got):\n%s", diff)
	}
}

// TestPagerRejectsProtocolViolations covers SPEC §8 invariant 14 from the
// client side: a cursor iff REQUEST_LIMIT_REACHED, and it must advance.
func TestPagerRejectsProtocolViolations(t *testing.T) {
	tests := []struct {
		name    string
		hook    func(*twinlogv1.DescribeTopicPartitionsResponse)
		wantErr string
	}{
		{"cursor with NONE", func(r *twinlogv1.DescribeTopicPartitionsResponse) {
			r.Error = twinlogv1.ErrorCode_ERROR_CODE_NONE
		}, "with error NONE"},
		{"limit reached without cursor", func(r *twinlogv1.DescribeTopicPartitionsResponse) {
			r.Error = twinlogv1.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED
			r.NextCursor = nil
		}, "without nextCursor"},
		{"cursor does not advance", func(r *twinlogv1.DescribeTopicPartitionsResponse) {
			r.NextCursor = &twinlogv1.Cursor{TopicName: "a", PartitionIndex: 1}
			r.Error = twinlogv1.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED
		}, "did not advance"},
		{"other page error", func(r *twinlogv1.DescribeTopicPartitionsResponse) {
			r.Error = twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST
			r.NextCursor = nil
		}, "INVALID_REQUEST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFakeAdmin(map[string]int32{"a": 3})
			fake.pageHook = tt.hook
			h := startFake(t, fake)
			_, err := h.pager(t, 1, 0).Describe(t.Context(), nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestPagerOnPage(t *testing.T) {
	h := startFake(t, newFakeAdmin(map[string]int32{"a": 5}))
	p := h.pager(t, 2, 0)
	var seen []int
	p.OnPage = func(partitions, _ int) { seen = append(seen, partitions) }
	if _, err := p.Describe(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{2, 4, 5}, seen); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}

func TestExitCodes(t *testing.T) {
	fake := newFakeAdmin(map[string]int32{"orders": 2})
	h := startFake(t, fake)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"ok", []string{"topics", "list"}, ExitOK, ""},
		{"unknown topic", []string{"topics", "describe", "nope"}, ExitError, "topic nope: does not exist: list topics with `twinctl topics list`"},
		{"unknown partition", []string{"partitions", "describe", "orders:7"}, ExitError, "partition orders-7: unknown topic or partition"},
		{"topic exists", []string{"topics", "create", "orders"}, ExitError, "inspect it with `twinctl topics describe orders`"},
		{"configs of unknown topic", []string{"configs", "get", "--topic", "nope"}, ExitError, "list topics with `twinctl topics list`"},
		{"unimplemented RPC", []string{"elect-leaders", "--all"}, ExitError, "--bootstrap fake:1 does not serve twinlog.v1.AdminService/ElectLeaders"},
		{"unknown command", []string{"frobnicate"}, ExitUsage, `unknown command "frobnicate"`},
		{"unknown subcommand", []string{"topics", "frobnicate"}, ExitUsage, `unknown command "frobnicate" for "twinctl topics"`},
		{"group without subcommand", []string{"mirrors"}, ExitUsage, "needs a subcommand"},
		{"unknown flag", []string{"topics", "list", "--nope"}, ExitUsage, "unknown flag: --nope"},
		{"bad flag value", []string{"topics", "create", "x", "--partitions", "many"}, ExitUsage, "invalid argument"},
		{"missing arg", []string{"topics", "create"}, ExitUsage, "takes one topic name"},
		{"bad selector", []string{"partitions", "describe", "orders:x"}, ExitUsage, "bad partition"},
		{"bad election type", []string{"elect-leaders", "--type", "dirty", "--all"}, ExitUsage, "--type must be preferred or unclean"},
		{"election needs scope", []string{"elect-leaders", "--type", "unclean"}, ExitUsage, "--all"},
		{"configs needs resource", []string{"configs", "get"}, ExitUsage, "--topic NAME or --cluster"},
		{"produce without codec", []string{"produce", "--topic", "orders", "--value", "x"}, ExitError, "no record batch codec"},
		{"dump-log without reader", []string{"dump-log", "/tmp/x-0"}, ExitError, "cannot read segments"},
		{"bad acks", []string{"produce", "--topic", "orders", "--acks", "2"}, ExitUsage, "--acks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := h.run(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, tt.wantStderr)
			}
		})
	}
}

func TestUnreachableServer(t *testing.T) {
	h := startFake(t, newFakeAdmin(nil))
	h.srv.Stop()
	_, stderr, code := h.run(t, "--timeout", "2s", "brokers", "list")
	if code != ExitError {
		t.Fatalf("exit code = %d, want %d", code, ExitError)
	}
	if !strings.Contains(stderr, "cannot reach fake:1") || !strings.Contains(stderr, "TWINLOG_BOOTSTRAP") {
		t.Errorf("stderr = %q, want a hint about the address", stderr)
	}
}

func TestExitCodeMapping(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{usagef("x"), ExitUsage},
		{fmt.Errorf("wrapped: %w", usagef("x")), ExitUsage},
		{errors.New("unknown command \"x\" for \"twinctl\""), ExitUsage},
		{&ProtocolError{Code: twinlogv1.ErrorCode_ERROR_CODE_READ_ONLY_TOPIC}, ExitError},
		{context.DeadlineExceeded, ExitError},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// TestBootstrapPrecedence checks flag > TWINLOG_BOOTSTRAP > config file > default.
func TestBootstrapPrecedence(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".twinctl.yaml"), []byte("bootstrap: from-file:9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  string
		home string
		args []string
		want string
	}{
		{"default", "", t.TempDir(), nil, DefaultBootstrap},
		{"config file", "", home, nil, "from-file:9"},
		{"env beats file", "from-env:8", home, nil, "from-env:8"},
		{"flag beats env", "from-env:8", home, []string{"--bootstrap", "from-flag:7"}, "from-flag:7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TWINLOG_BOOTSTRAP", tt.env)
			if tt.env == "" {
				os.Unsetenv("TWINLOG_BOOTSTRAP")
			}
			h := startFake(t, newFakeAdmin(nil))
			opts := h.options()
			opts.HomeDir = tt.home
			var out, errb strings.Builder
			opts.Stdout, opts.Stderr = &out, &errb
			code := Execute(t.Context(), append(tt.args, "brokers", "list"), opts)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			if len(h.dialed) == 0 || h.dialed[0] != tt.want {
				t.Errorf("dialed %v, want %s", h.dialed, tt.want)
			}
		})
	}
}

func TestExplicitConfigMustExist(t *testing.T) {
	h := startFake(t, newFakeAdmin(nil))
	_, stderr, code := h.run(t, "--config", filepath.Join(t.TempDir(), "missing.yaml"), "brokers", "list")
	if code != ExitError || !strings.Contains(stderr, "read config") {
		t.Fatalf("code %d stderr %q", code, stderr)
	}
}

func goldenFake() *fakeAdmin {
	f := newFakeAdmin(map[string]int32{"orders": 3, "payments": 1, "__mirror_state": 1})
	f.mirrorOf = map[string]string{"orders": "a-to-b"}
	f.brokers = []*twinlogv1.BrokerRecord{
		{BrokerId: 2, Host: "10.0.0.2", Port: 9092, BrokerEpoch: 12, Fenced: true, LogDirs: []string{"/data/2"}},
		{BrokerId: 1, Host: "10.0.0.1", Port: 9091, BrokerEpoch: 11, LogDirs: []string{"/data/1a", "/data/1b"}, OfflineLogDirs: []string{"/data/1b"}},
		{BrokerId: 3, Host: "10.0.0.3", Port: 9093, KafkaHost: "10.0.0.3", KafkaPort: 9293, BrokerEpoch: 13, LogDirs: []string{"/data/3"}},
	}
	f.offline = []*twinlogv1.BrokerOfflinePartitions{{BrokerId: 1, Count: 2, Partitions: []*twinlogv1.OfflinePartition{
		{Topic: "orders", Partition: 1, Reason: "storage: log offline: /data/1a/orders-1/00000000000000000000.log: batch at position 4096: bad CRC"},
		{Topic: "payments", Partition: 0, Reason: "storage: log offline: /data/1a/payments-0/leader-epoch-checkpoint: bad version"},
	}}}
	f.configs = []*twinlogv1.ConfigEntry{
		{Name: "unclean.recovery.strategy", Value: "balanced", Source: twinlogv1.ConfigSource_CONFIG_SOURCE_DEFAULT},
		{Name: "min.insync.replicas", Value: "2", Source: twinlogv1.ConfigSource_CONFIG_SOURCE_TOPIC},
	}
	f.mirrors = []*twinlogv1.MirrorDescription{{
		Name: "a-to-b", SourceBootstrap: []string{"127.0.0.1:9091", "127.0.0.1:9092"}, SourceClusterId: "cluster-a",
		Partitions: []*twinlogv1.MirrorPartitionStatus{
			{Mirror: "a-to-b", Topic: "orders", Partition: 0, State: twinlogv1.MirrorState_MIRROR_STATE_MIRRORING, DesiredState: twinlogv1.MirrorState_MIRROR_STATE_MIRRORING,
				Lmle: 3, SourceHighWatermark: 120, SourceLogEndOffset: 125, HighWatermark: 118, LogEndOffset: 120, LagRecords: 2, LagSeconds: 0.25,
				SkippedReplicas: []int32{3}, Taints: []*twinlogv1.ReplicaTaint{{Replica: 3, Epoch: 3, Offset: 100}}, LeaderId: 1, LeaderEpoch: 7,
				SourceFetchAgeSeconds: 0.4, ReportedAtMs: fakeReportedAtMs},
			{Mirror: "a-to-b", Topic: "orders", Partition: 1, State: twinlogv1.MirrorState_MIRROR_STATE_FAILED, DesiredState: twinlogv1.MirrorState_MIRROR_STATE_MIRRORING,
				Lmle: -1, LeaderId: -1, LastError: "INCONSISTENT_TOPIC_ID", RetryCount: 4,
				SourceHighWatermark: -1, SourceLogEndOffset: -1, SourceFetchAgeSeconds: -1, ReportedAtMs: fakeReportedAtMs},
		},
		OffsetSync: &twinlogv1.MirrorOffsetSyncStatus{SyncedAtMs: fakeReportedAtMs, Groups: 4, OffsetsCommitted: 7, OffsetsClamped: 1,
			GroupsActiveOnDestination: 1, Error: "group g3 at the source: NOT_COORDINATOR"},
		AclSync: &twinlogv1.MirrorAclSyncStatus{SyncedAtMs: fakeReportedAtMs, SourceBindings: 12, Created: 2, Removed: 0, RemovalsSkipped: true,
			Error: "mirror a-to-c: DescribeAcls from 127.0.0.1:9191: not allowed"},
	}}
	return f
}

// goldenLogs are the logs behind goldenFake's partitions, at their
// leaders' addresses: broker 1 and 3 answer; broker 2 (orders-1's leader)
// cannot be reached (startGoldenFake); payments-0 moved to broker 3, so
// broker 1, its leader in the fake's describe, answers
// NOT_LEADER_OR_FOLLOWER.
func goldenLogs() *fakeGroups {
	return &fakeGroups{
		brokers: map[int32]string{1: "10.0.0.1:9091", 3: "10.0.0.3:9093"},
		logs: map[topicPart]*fakeLog{
			{"__mirror_state", 0}: {leader: 1, start: 0, hw: 12, end: 12},
			{"orders", 0}:         {leader: 1, start: 100, hw: 250, end: 252},
			{"orders", 1}:         {leader: 2, start: 0, hw: 80, end: 80},
			{"orders", 2}:         {leader: 3, start: 0, hw: 0, end: 0},
			{"payments", 0}:       {leader: 3, start: 5, hw: 42, end: 42},
		},
	}
}

// startGoldenFake serves goldenFake and, at its brokers' addresses,
// goldenLogs; broker 2's address refuses connections.
func startGoldenFake(t *testing.T) *harness {
	h := startFake(t, goldenFake())
	h.serveBrokers(t, goldenLogs())
	down := bufconn.Listen(1)
	down.Close()
	h.routes["10.0.0.2:9092"] = down
	return h
}

func TestGolden(t *testing.T) {
	h := startGoldenFake(t)
	tests := []struct {
		name string
		args []string
	}{
		{"topics_list", []string{"topics", "list"}},
		{"topics_list_internal_json", []string{"topics", "list", "--internal", "--json"}},
		{"topics_describe", []string{"topics", "describe"}},
		{"topics_describe_json", []string{"topics", "describe", "--internal", "--json"}},
		{"partitions_describe", []string{"partitions", "describe", "--page-limit", "2"}},
		{"partitions_describe_json", []string{"partitions", "describe", "orders:0,2", "--json"}},
		{"brokers_list", []string{"brokers", "list"}},
		{"brokers_list_json", []string{"brokers", "list", "--json"}},
		{"configs_get", []string{"configs", "get", "--topic", "orders"}},
		{"configs_get_json", []string{"configs", "get", "--cluster", "--json"}},
		{"mirrors_describe", []string{"mirrors", "describe"}},
		{"mirrors_describe_json", []string{"mirrors", "describe", "--json"}},
		{"topics_create", []string{"topics", "create", "fresh", "--partitions", "3"}},
		{"topics_create_json", []string{"topics", "create", "fresh", "--json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := h.run(t, tt.args...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			checkGolden(t, tt.name, stdout)
		})
	}
}
