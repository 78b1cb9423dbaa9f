package assign

import (
	"maps"
	"slices"
	"testing"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/metadata"
)

// image: brokers 1–3 (3 fenced); topic "plain" (2 partitions, replicas
// [1 2] and [2 3], min.insync.replicas 2), "mirrored" (a mirror topic,
// replicas [3 1]), "once" (once mirrored, replicas [1 2 3], a truncation
// point).
func image(t *testing.T) *metadata.Image {
	t.Helper()
	img := metadata.New("c")
	d := &pb.MetadataDelta{Offset: 1,
		Brokers: []*pb.BrokerRecord{{BrokerId: 1, BrokerEpoch: 11}, {BrokerId: 2, BrokerEpoch: 12}, {BrokerId: 3, BrokerEpoch: 13, Fenced: true}},
		Topics: []*pb.TopicRecord{
			{Name: "plain", TopicId: "p", PartitionCount: 2, Configs: map[string]string{metadata.KeyMinInsyncReplicas: "2"}},
			{Name: "mirrored", TopicId: "m", PartitionCount: 1, MirrorName: "link"},
			{Name: "once", TopicId: "o", PartitionCount: 1, OnceMirrored: true},
		},
		Partitions: []*pb.PartitionRecord{
			{Topic: "plain", TopicId: "p", Partition: 0, Replicas: []int32{1, 2}, Isr: []int32{1, 2}, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 6},
			{Topic: "plain", TopicId: "p", Partition: 1, Replicas: []int32{2, 3}, Isr: []int32{2}, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1},
			{Topic: "mirrored", TopicId: "m", Partition: 0, Replicas: []int32{3, 1}, Isr: []int32{1}, Elr: []int32{3}, Leader: 1, LeaderEpoch: 2, PartitionEpoch: 3},
			{Topic: "once", TopicId: "o", Partition: 0, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2}, Leader: 2, LeaderEpoch: 7, PartitionEpoch: 9,
				TruncationPoints: []*pb.TruncationPoint{{LeaderEpoch: 5, Offset: 40}}},
		},
	}
	if err := img.Apply(d); err != nil {
		t.Fatal(err)
	}
	return img
}

// TestOf: the partitions an image assigns to a broker, in order, with the
// topic's min ISR and mirror flags.
func TestOf(t *testing.T) {
	img := image(t)
	var got []string
	for _, a := range Of(img, 1) {
		got = append(got, a.TP.String())
		switch a.TP.Topic {
		case "plain":
			if a.MinISR != 2 || a.InMirror || a.HasTaints {
				t.Errorf("plain: %+v", a)
			}
		case "mirrored":
			if !a.InMirror || !a.HasTaints {
				t.Errorf("mirrored: %+v", a)
			}
		case "once":
			if a.InMirror || !a.HasTaints {
				t.Errorf("once: %+v", a)
			}
		}
	}
	if want := []string{"mirrored-0", "once-0", "plain-0"}; !slices.Equal(got, want) {
		t.Fatalf("broker 1 hosts %v, want %v", got, want)
	}
	if n := len(Of(img, 4)); n != 0 {
		t.Fatalf("broker 4 hosts %d partitions", n)
	}
}

// TestState: every field the replica needs, from the record and the image.
func TestState(t *testing.T) {
	img := image(t)
	registered, acceptable := img.BrokerEpochs()
	var once Assignment
	for _, a := range Of(img, 1) {
		if a.TP.Topic == "once" {
			once = a
		}
	}
	st := once.State(registered, acceptable)
	if st.Leader != 2 || st.LeaderEpoch != 7 || st.PartitionEpoch != 9 || !slices.Equal(st.Replicas, []twinlog.BrokerID{1, 2, 3}) ||
		!slices.Equal(st.ISR, []twinlog.BrokerID{1, 2}) || st.MinISR != once.MinISR {
		t.Fatalf("state %+v", st)
	}
	if want := []replica.TruncationPoint{{LeaderEpoch: 5, Offset: 40}}; !slices.Equal(st.TruncationPoints, want) {
		t.Fatalf("truncation points %v, want %v", st.TruncationPoints, want)
	}
	if _, ok := st.Brokers[3]; ok || !maps.Equal(st.Registered, registered) || st.Registered[3] != 13 {
		t.Fatalf("brokers %v registered %v: a fenced broker is registered, not acceptable", st.Brokers, st.Registered)
	}
}

func newReplica(t *testing.T) *replica.Replica {
	t.Helper()
	r, err := replica.New(replica.Config{ID: 1, Partition: twinlog.TopicPartition{Topic: "x"}}, replica.LogState{AlignedEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestApply: a mirror topic's new leadership starts read-only with taints
// pending (SPEC §6.2a, §6.4), and the runner's writable flag does not
// survive into an LE it did not make; a metadata change within the same
// leadership keeps both; a topic in no mirror is writable.
func TestApply(t *testing.T) {
	img := image(t)
	registered, acceptable := img.BrokerEpochs()
	as := map[string]Assignment{}
	for _, a := range Of(img, 1) {
		as[a.TP.Topic] = a
	}
	m := as["mirrored"]
	st := m.State(registered, acceptable)
	r := newReplica(t)
	if w := Apply(r, m, st, 1, true, 1, 0); w || r.Writable() || !r.TaintsPending() {
		t.Fatalf("new mirror leadership: writable flag %t, replica writable %t, taints pending %t; want false, false, true", w, r.Writable(), r.TaintsPending())
	}
	for r.HasReady() {
		r.Advance()
	}
	// The runner loaded the taints and (as STOPPED) made it writable in LE 2.
	r.SetTaintsPending(false)
	r.SetWritable(true)
	st.PartitionEpoch++ // an ISR change: the same leadership
	if w := Apply(r, m, st, 1, true, 2, 0); !w || !r.Writable() || r.TaintsPending() {
		t.Fatalf("same leadership: writable flag %t, replica writable %t, taints pending %t; want true, true, false", w, r.Writable(), r.TaintsPending())
	}
	st.LeaderEpoch = 3 // a later LE the runner did not cause
	if w := Apply(r, m, st, 1, true, 2, 0); w || r.Writable() || !r.TaintsPending() {
		t.Fatalf("later LE: writable flag %t, replica writable %t, taints pending %t; want false, false, true", w, r.Writable(), r.TaintsPending())
	}

	p := as["plain"]
	r = newReplica(t)
	if w := Apply(r, p, p.State(registered, acceptable), 1, false, -1, 0); w || !r.Writable() || r.TaintsPending() {
		t.Fatalf("plain topic: writable flag %t, replica writable %t, taints pending %t; want false, true, false", w, r.Writable(), r.TaintsPending())
	}
	if r.Role() != replica.RoleLeader || r.LeaderEpoch() != 4 {
		t.Fatalf("plain: role %v LE %d", r.Role(), r.LeaderEpoch())
	}
}

// TestReconcile: nothing until the image has reached the broker's
// registration; then the hosted partitions no assignment wants, or wanted
// with another topic id, are removed in order, and every assignment is
// hosted.
func TestReconcile(t *testing.T) {
	img := image(t) // at offset 1
	tp := func(topic string, p int32) twinlog.TopicPartition {
		return twinlog.TopicPartition{Topic: topic, Partition: p}
	}
	hosted := map[twinlog.TopicPartition]string{
		tp("plain", 0): "p",       // still wanted
		tp("plain", 1): "p",       // moved away
		tp("once", 0):  "o-older", // the topic was created again
		tp("gone", 3):  "g",       // deleted topic
	}
	if _, ok := Reconcile(img, 1, 0, hosted); ok {
		t.Fatal("planned before registration")
	}
	if _, ok := Reconcile(img, 1, 2, hosted); ok {
		t.Fatal("planned on an image older than the registration")
	}
	plan, ok := Reconcile(img, 1, 1, hosted)
	if !ok {
		t.Fatal("no plan on a caught-up image")
	}
	if want := []twinlog.TopicPartition{tp("gone", 3), tp("once", 0), tp("plain", 1)}; !slices.Equal(plan.Remove, want) {
		t.Fatalf("remove %v, want %v", plan.Remove, want)
	}
	var host []twinlog.TopicPartition
	for _, a := range plan.Host {
		host = append(host, a.TP)
	}
	if want := []twinlog.TopicPartition{tp("mirrored", 0), tp("once", 0), tp("plain", 0)}; !slices.Equal(host, want) {
		t.Fatalf("host %v, want %v", host, want)
	}
	for _, c := range []struct {
		tp   twinlog.TopicPartition
		want bool
	}{{tp("plain", 0), true}, {tp("once", 0), true}, {tp("plain", 1), false}, {tp("gone", 3), false}} {
		if got := plan.Wanted(c.tp); got != c.want {
			t.Errorf("Wanted(%v) = %t, want %t", c.tp, got, c.want)
		}
	}
	onDisk := []twinlog.TopicPartition{tp("plain", 1), tp("plain", 0), tp("zz", 0), tp("gone", 3)}
	if got, want := plan.Orphans(onDisk), []twinlog.TopicPartition{tp("gone", 3), tp("plain", 1), tp("zz", 0)}; !slices.Equal(got, want) {
		t.Fatalf("orphans %v, want %v", got, want)
	}
}
