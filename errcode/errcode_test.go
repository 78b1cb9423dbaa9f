package errcode_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/errcode"
	"github.com/twmb/franz-go/pkg/kerr"
)

// codes returns every value of the enum, ascending.
func codes() []twinlogv1.ErrorCode {
	var out []twinlogv1.ErrorCode
	for n := range twinlogv1.ErrorCode_name {
		out = append(out, twinlogv1.ErrorCode(n))
	}
	slices.Sort(out)
	return out
}

// TestEveryCodeHasAnEntry: each enum value has an entry under the enum's
// own name and a description, so a new value fails here until the table
// says what it means.
func TestEveryCodeHasAnEntry(t *testing.T) {
	for _, c := range codes() {
		in := errcode.Of(c)
		if want := twinlogv1.ErrorCode_name[int32(c)]; "ERROR_CODE_"+in.Name != want {
			t.Errorf("%d: Name %q, want %q without ERROR_CODE_", c, in.Name, want)
		}
		if in.Description == "" {
			t.Errorf("%s: no Description", in.Name)
		}
	}
}

// TestUnknownCode: a value the enum lacks (a newer server's) is named by its
// number, as the enum's String does, and is neither retried nor fatal.
func TestUnknownCode(t *testing.T) {
	for _, c := range []twinlogv1.ErrorCode{-1, twinlogv1.ErrorCode(len(twinlogv1.ErrorCode_name)), 1000} {
		in := errcode.Of(c)
		if in.Name != c.String() {
			t.Errorf("Of(%d).Name = %q, want %q", c, in.Name, c.String())
		}
		if in.Retriable || in.RefreshMetadata || in.MirrorFatal || in.Hint != "" {
			t.Errorf("Of(%d) = %+v, want only a name and description", c, in)
		}
	}
}

// TestConsistency checks what holds across entries: a refresh is a kind of
// retry, a fatal code is not retried and has a reason, and a hint names no
// placeholder but {topic}.
func TestConsistency(t *testing.T) {
	for _, c := range codes() {
		in := errcode.Of(c)
		if in.RefreshMetadata && !in.Retriable {
			t.Errorf("%s: RefreshMetadata without Retriable", in.Name)
		}
		if in.MirrorFatal && in.Retriable {
			t.Errorf("%s: MirrorFatal and Retriable", in.Name)
		}
		if in.MirrorFatal != (in.MirrorFatalReason != "") {
			t.Errorf("%s: MirrorFatal %v with reason %q", in.Name, in.MirrorFatal, in.MirrorFatalReason)
		}
		if h := strings.ReplaceAll(in.Hint, "{topic}", ""); strings.ContainsAny(h, "{}") {
			t.Errorf("%s: hint %q has a placeholder other than {topic}", in.Name, in.Hint)
		}
	}
}

// TestClassification pins which codes have each property (SPEC §1.4,
// §6.3), so a change to one is a visible decision.
func TestClassification(t *testing.T) {
	for _, tc := range []struct {
		name string
		has  func(errcode.Info) bool
		want []twinlogv1.ErrorCode
	}{
		{"Retriable", func(in errcode.Info) bool { return in.Retriable }, []twinlogv1.ErrorCode{
			// SPEC §1.4's list.
			twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER,
			twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH,
			twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_LEADER_EPOCH,
			twinlogv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER,
			twinlogv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS,
			twinlogv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
			twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT,
			twinlogv1.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE,
			twinlogv1.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS,
			twinlogv1.ErrorCode_ERROR_CODE_INVALID_MIRROR_SOURCE,
			twinlogv1.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED,
			// Kafka's clients retry it too; the proto's comments mark the
			// last two retriable.
			twinlogv1.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR,
			twinlogv1.ErrorCode_ERROR_CODE_INVALID_FETCH_SESSION_EPOCH,
			twinlogv1.ErrorCode_ERROR_CODE_DUPLICATE_BROKER_REGISTRATION,
			// Kafka's retriable group coordinator codes.
			twinlogv1.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE,
			twinlogv1.ErrorCode_ERROR_CODE_NOT_COORDINATOR,
		}},
		{"RefreshMetadata", func(in errcode.Info) bool { return in.RefreshMetadata }, []twinlogv1.ErrorCode{
			twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER,
			twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH,
			twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_LEADER_EPOCH,
			twinlogv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS,
			twinlogv1.ErrorCode_ERROR_CODE_KAFKA_STORAGE_ERROR,
		}},
		{"MirrorFatal", func(in errcode.Info) bool { return in.MirrorFatal }, []twinlogv1.ErrorCode{
			twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID,
			twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
			twinlogv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED,
			// SPEC §6.3's "authorization": the source refuses the mirror's
			// principal for the mirror, or does not know it at all.
			twinlogv1.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED,
			twinlogv1.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED,
		}},
	} {
		var got []twinlogv1.ErrorCode
		for _, c := range codes() {
			if tc.has(errcode.Of(c)) {
				got = append(got, c)
			}
		}
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMirrorFatalReasons: each reason says the records are kept, and the
// ones the operator can undo by stopping say how.
func TestMirrorFatalReasons(t *testing.T) {
	for _, tc := range []struct {
		c    twinlogv1.ErrorCode
		stop bool
	}{
		{twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, true},
		{twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID, true},
		{twinlogv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED, false},
	} {
		r := errcode.Of(tc.c).MirrorFatalReason
		if !strings.Contains(r, "records kept") {
			t.Errorf("%v: reason %q does not say the records are kept", tc.c, r)
		}
		if got := strings.Contains(r, "stop the mirror topic"); got != tc.stop {
			t.Errorf("%v: reason %q names stopping: %v, want %v", tc.c, r, got, tc.stop)
		}
	}
}

// TestHintFor: the topic fills {topic}; other hints pass through as written.
func TestHintFor(t *testing.T) {
	for _, tc := range []struct {
		c     twinlogv1.ErrorCode
		topic string
		want  string
	}{
		{twinlogv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS, "orders", "inspect it with `twinctl topics describe orders`"},
		{twinlogv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER, "orders", "point --bootstrap at the cluster's controller"},
		{twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, "orders", ""},
	} {
		if got := errcode.Of(tc.c).HintFor(tc.topic); got != tc.want {
			t.Errorf("%v: HintFor(%q) = %q, want %q", tc.c, tc.topic, got, tc.want)
		}
	}
}

// kafkaName is the Kafka error each code maps to, by the name franz-go's
// kerr gives it: the code's own name where Kafka has it (kerr keeps the old
// NOT_LEADER_FOR_PARTITION and INVALID_TOPIC_EXCEPTION), else the nearest
// code, chosen for what a Kafka client then does.
var kafkaName = map[string]string{
	"NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION",
	"INVALID_TOPIC":          "INVALID_TOPIC_EXCEPTION",
	// Only a mirror's fetch from its source gets it; no Kafka client does.
	"INVALID_MIRROR_SOURCE": "UNKNOWN_SERVER_ERROR",
	// Retriable after a backoff, as a client treats a quota.
	"REQUEST_LIMIT_REACHED": "THROTTLING_QUOTA_EXCEEDED",
	// A consumer whose leader epoch predates an LMLE truncation below its
	// position: its epoch is stale, and a Kafka client answers fencing by
	// refreshing metadata and validating its position with
	// OffsetForLeaderEpoch (KIP-320), which finds the truncation.
	"LOG_TRUNCATED": "FENCED_LEADER_EPOCH",
	// Produce to a mirror topic: fatal for the batch, as Confluent's
	// cluster linking answers a write to a read-only mirror topic.
	"READ_ONLY_TOPIC":       "INVALID_REQUEST",
	"UNKNOWN_MIRROR":        "RESOURCE_NOT_FOUND",
	"MIRROR_ALREADY_EXISTS": "DUPLICATE_RESOURCE",
	"INVALID_MIRROR_STATE":  "INVALID_REQUEST",
}

// TestKafkaCodes pins each code's Kafka number to the name franz-go's kerr
// table gives that number: the code's own name or kafkaName's choice.
func TestKafkaCodes(t *testing.T) {
	for _, c := range codes() {
		in := errcode.Of(c)
		want := in.Name
		if n, ok := kafkaName[in.Name]; ok {
			want = n
		}
		got := "NONE"
		if err := kerr.ErrorForCode(in.Kafka); err != nil {
			var ke *kerr.Error
			if !errors.As(err, &ke) {
				t.Fatalf("%s: Kafka %d is no code kerr knows", in.Name, in.Kafka)
			}
			got = ke.Message
		}
		if got != want {
			t.Errorf("%s: Kafka code %d is %s, want %s", in.Name, in.Kafka, got, want)
		}
	}
	if k := errcode.Of(1000).Kafka; k != -1 {
		t.Errorf("unknown code: Kafka %d, want -1 (UNKNOWN_SERVER_ERROR)", k)
	}
}

// TestFromKafka: a group coordinator's Kafka code maps back to the enum
// value with that Kafka code (the group codes among them); 0 is NONE; a
// Kafka code the enum has no value for, and -1, are UNKNOWN_SERVER_ERROR
// and not ok.
func TestFromKafka(t *testing.T) {
	for _, c := range []twinlogv1.ErrorCode{
		twinlogv1.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS,
		twinlogv1.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE,
		twinlogv1.ErrorCode_ERROR_CODE_NOT_COORDINATOR,
		twinlogv1.ErrorCode_ERROR_CODE_ILLEGAL_GENERATION,
		twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID,
		twinlogv1.ErrorCode_ERROR_CODE_REBALANCE_IN_PROGRESS,
		twinlogv1.ErrorCode_ERROR_CODE_NON_EMPTY_GROUP,
		twinlogv1.ErrorCode_ERROR_CODE_GROUP_ID_NOT_FOUND,
		twinlogv1.ErrorCode_ERROR_CODE_INVALID_GROUP_ID,
		twinlogv1.ErrorCode_ERROR_CODE_OFFSET_METADATA_TOO_LARGE,
		twinlogv1.ErrorCode_ERROR_CODE_GROUP_SUBSCRIBED_TO_TOPIC,
		twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
	} {
		if got, ok := errcode.FromKafka(errcode.Of(c).Kafka); got != c || !ok {
			t.Errorf("FromKafka(%d) = %v, %v; want %v", errcode.Of(c).Kafka, got, ok, c)
		}
	}
	if got, ok := errcode.FromKafka(0); got != twinlogv1.ErrorCode_ERROR_CODE_NONE || !ok {
		t.Errorf("FromKafka(0) = %v, %v", got, ok)
	}
	for _, k := range []int16{-1, 79, 9999} {
		if got, ok := errcode.FromKafka(k); got != twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR || ok {
			t.Errorf("FromKafka(%d) = %v, %v; want UNKNOWN_SERVER_ERROR, false", k, got, ok)
		}
	}
}

// TestDenied: an authorization refusal's message names its code, which
// Denied reads back; a message naming none is CLUSTER_AUTHORIZATION_FAILED.
func TestDenied(t *testing.T) {
	for _, c := range []twinlogv1.ErrorCode{twinlogv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED,
		twinlogv1.ErrorCode_ERROR_CODE_GROUP_AUTHORIZATION_FAILED, twinlogv1.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED} {
		if got := errcode.Denied(errcode.DeniedMessagePrefix(c) + "principal User:x may not ..."); got != c {
			t.Errorf("%v: read back %v", c, got)
		}
	}
	for _, msg := range []string{"", "no rule", "NONE: x", "BOGUS: x"} {
		if got := errcode.Denied(msg); got != twinlogv1.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED {
			t.Errorf("%q: %v", msg, got)
		}
	}
	if c, ok := errcode.ByName("NOT_LEADER_OR_FOLLOWER"); !ok || c != twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER {
		t.Errorf("ByName: %v %v", c, ok)
	}
}
