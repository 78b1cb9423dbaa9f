package state_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/state"
)

// TestView: keys decode to what they encode; records apply by the
// StateTable rule, a tombstone removes, and unreadable keys or values
// change nothing.
func TestView(t *testing.T) {
	lk := plan.LmleKey{TopicID: "x", Partition: 3}
	rk := plan.RunKey{Mirror: "m", TopicID: "x", Partition: 3}
	if l, r, err := state.DecodeKey(state.LmleKey(lk)); err != nil || r != nil || *l != lk {
		t.Fatalf("LMLE key: %v %v %v", l, r, err)
	}
	if l, r, err := state.DecodeKey(state.RunKey(rk)); err != nil || l != nil || *r != rk {
		t.Fatalf("run key: %v %v %v", l, r, err)
	}
	lmle, _ := proto.Marshal(&pb.MirrorLmleRecord{Lmle: 4, StateEpoch: 2})
	run, _ := proto.Marshal(&pb.MirrorRunRecord{State: pb.MirrorState_MIRROR_STATE_MIRRORING, StateEpoch: 2})
	var v state.View
	if err := v.Apply(state.LmleKey(lk), lmle); err != nil {
		t.Fatal(err)
	}
	if err := v.Apply(state.RunKey(rk), run); err != nil {
		t.Fatal(err)
	}
	if got, ok := v.Lmle.Get(lk); !ok || got.GetLmle() != 4 {
		t.Fatalf("LMLE record %v %t", got, ok)
	}
	if got, ok := v.Run.Get(rk); !ok || got.GetState() != pb.MirrorState_MIRROR_STATE_MIRRORING {
		t.Fatalf("run record %v %t", got, ok)
	}
	for _, bad := range [][2][]byte{
		{[]byte("l\x00x\x0003"), lmle},    // not a canonical partition
		{[]byte("q\x00x\x003"), lmle},     // no such kind
		{state.LmleKey(lk), []byte{0xff}}, // not a record
	} {
		if err := v.Apply(bad[0], bad[1]); err == nil {
			t.Fatalf("key %q value %x applied", bad[0], bad[1])
		}
	}
	if got, _ := v.Lmle.Get(lk); got.GetLmle() != 4 {
		t.Fatalf("an unreadable record changed the LMLE record: %v", got)
	}
	if err := v.Apply(state.RunKey(rk), nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Run.Get(rk); ok {
		t.Fatal("a tombstone left the run record")
	}
}
