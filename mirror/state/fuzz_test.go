package state_test

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/mirror/state"
	"github.com/twinlog/twinlog/storage"
)

// FuzzMirrorStateRecord feeds __mirror_state decoding (state.DecodeRecords,
// then state.View.Apply, as Store.Sync does) arbitrary keys
// and values, and arbitrary fetched bytes: it never panics, bad bytes are an
// error, a record comes back with the key and value it was written with, a
// key state.DecodeKey accepts encodes back to the same bytes (so no two keys
// name one partition's record), a record under a refused key changes
// nothing, and a tombstone of the same key undoes whatever the record
// applied.
func FuzzMirrorStateRecord(f *testing.F) {
	lmle, _ := proto.Marshal(&pb.MirrorLmleRecord{StateEpoch: 3})
	run, _ := proto.Marshal(&pb.MirrorRunRecord{StateEpoch: 3})
	lk := state.LmleKey(plan.LmleKey{TopicID: "Zq3v0x8cQ2Ki0P5ayqAfyQ", Partition: 2})
	rk := state.RunKey(plan.RunKey{Mirror: "a-to-b", TopicID: "Zq3v0x8cQ2Ki0P5ayqAfyQ", Partition: 0})
	batch, err := storage.EncodeBatch([]storage.Record{{Key: lk, Value: lmle}, {Key: rk, Value: run}}, storage.BatchOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(lk, lmle, batch)
	f.Add(rk, run, batch[:len(batch)-1])
	f.Add(rk, []byte{}, []byte{})
	f.Add([]byte("l\x00t\x002147483648"), lmle, []byte{0xff})
	f.Add([]byte("r\x00\x00\x00-1"), []byte{0x0a, 0xff}, batch[:61])
	f.Add([]byte("l\x00t\x00+0"), []byte{}, batch)
	f.Add([]byte("l\x00t\x004294967296"), lmle, batch)
	f.Add([]byte("r\x00m\x00t\x0000"), run, batch)
	f.Fuzz(func(t *testing.T, key, value, raw []byte) {
		// Bytes as a fetch returns them: an error or records, never a panic.
		if recs, err := state.DecodeRecords(raw); err == nil {
			var v state.View
			for _, r := range recs {
				_ = v.Apply(r.Key, r.Value) // an unreadable record is skipped
			}
		}
		lk, rk, keyErr := state.DecodeKey(key)
		switch {
		case keyErr != nil:
		case lk != nil && rk == nil:
			if again := state.LmleKey(*lk); !bytes.Equal(again, key) {
				t.Fatalf("key %q decoded to %+v, which encodes to %q", key, *lk, again)
			}
		case rk != nil && lk == nil:
			if again := state.RunKey(*rk); !bytes.Equal(again, key) {
				t.Fatalf("key %q decoded to %+v, which encodes to %q", key, *rk, again)
			}
		default:
			t.Fatalf("key %q decoded to %v and %v", key, lk, rk)
		}
		buf, err := storage.EncodeBatch([]storage.Record{{Key: key, Value: value}}, storage.BatchOptions{})
		if err != nil {
			return // the encoder refuses it (size); nothing to decode
		}
		recs, err := state.DecodeRecords(buf)
		if err != nil {
			t.Fatalf("decode a batch just encoded: %v", err)
		}
		if len(recs) != 1 || !bytes.Equal(recs[0].Key, key) || !bytes.Equal(recs[0].Value, value) {
			t.Fatalf("decoded %+v, want key %q value %q", recs, key, value)
		}
		var v state.View
		err = v.Apply(recs[0].Key, recs[0].Value)
		if n := v.Lmle.Len() + v.Run.Len(); n > 1 || (keyErr != nil && n != 0) {
			t.Fatalf("one record applied %d keys (key error %v)", n, keyErr)
		}
		if keyErr != nil && err == nil {
			t.Fatalf("record under refused key %q applied without an error", key)
		}
		_ = v.Apply(key, nil)
		if n := v.Lmle.Len() + v.Run.Len(); n != 0 {
			t.Fatalf("the tombstone of key %q left %d keys", key, n)
		}
	})
}

// TestMirrorStateKeyPartitionCanonical (issue 13): a __mirror_state key's
// partition is read only in the form state.LmleKey writes. Before, Atoi and
// an int32 cast read "+0", "00", "4294967296" and "-4294967296" as
// partition 0: a tombstone under "l\x00T\x00+0" removed partition 0's LMLE
// record, and a record under "...\x004294967296" replaced it.
func TestMirrorStateKeyPartitionCanonical(t *testing.T) {
	const topicID = "Zq3v0x8cQ2Ki0P5ayqAfyQ"
	lmle := func(epoch int32) []byte {
		b, err := proto.Marshal(&pb.MirrorLmleRecord{StateEpoch: 1, Lmle: epoch})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	run, err := proto.Marshal(&pb.MirrorRunRecord{StateEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	p0 := plan.LmleKey{TopicID: topicID, Partition: 0}
	r0 := plan.RunKey{Mirror: "a-to-b", TopicID: topicID, Partition: 0}
	for _, suffix := range []string{"+0", "00", "-0", "4294967296", "-4294967296", "2147483648", "-1", " 0", "0x0", ""} {
		t.Run(suffix, func(t *testing.T) {
			var v state.View
			if err := v.Apply(state.LmleKey(p0), lmle(7)); err != nil {
				t.Fatal(err)
			}
			if err := v.Apply(state.RunKey(r0), run); err != nil {
				t.Fatal(err)
			}
			for _, r := range []storage.Record{
				{Key: []byte("l\x00" + topicID + "\x00" + suffix), Value: lmle(9)}, // would replace p0's
				{Key: []byte("l\x00" + topicID + "\x00" + suffix)},                 // tombstone
				{Key: []byte("r\x00a-to-b\x00" + topicID + "\x00" + suffix)},       // run tombstone
			} {
				if err := v.Apply(r.Key, r.Value); err == nil {
					t.Errorf("key %q accepted", r.Key)
				}
			}
			if got, ok := v.Lmle.Get(p0); !ok || got.GetLmle() != 7 {
				t.Errorf("partition 0's LMLE record after key suffix %q: %v (present %v), want lmle 7", suffix, got, ok)
			}
			if _, ok := v.Run.Get(r0); !ok {
				t.Errorf("partition 0's run record removed by key suffix %q", suffix)
			}
			if n := v.Lmle.Len() + v.Run.Len(); n != 2 {
				t.Errorf("%d keys, want 2", n)
			}
		})
	}
	// The canonical forms still apply, up to MaxInt32.
	var v state.View
	for _, key := range [][]byte{state.LmleKey(p0), state.LmleKey(plan.LmleKey{TopicID: topicID, Partition: 2147483647})} {
		if err := v.Apply(key, lmle(3)); err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
	}
	if v.Lmle.Len() != 2 {
		t.Fatalf("%d LMLE keys, want 2", v.Lmle.Len())
	}
}
