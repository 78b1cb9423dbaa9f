package broker

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/storage"
)

// FuzzMirrorStateRecord feeds __mirror_state decoding (decodeStateRecords,
// then stateView.apply, as readState and syncMirrorState do) arbitrary keys
// and values, and arbitrary fetched bytes: it never panics, bad bytes are an
// error, a record comes back with the key and value it was written with,
// and a tombstone of the same key undoes whatever the record applied.
func FuzzMirrorStateRecord(f *testing.F) {
	lmle, _ := proto.Marshal(&pb.MirrorLmleRecord{StateEpoch: 3})
	run, _ := proto.Marshal(&pb.MirrorRunRecord{StateEpoch: 3})
	lk := lmleStateKey(plan.LmleKey{TopicID: "Zq3v0x8cQ2Ki0P5ayqAfyQ", Partition: 2})
	rk := runStateKey(plan.RunKey{Mirror: "a-to-b", TopicID: "Zq3v0x8cQ2Ki0P5ayqAfyQ", Partition: 0})
	batch, err := storage.EncodeBatch([]storage.Record{{Key: lk, Value: lmle}, {Key: rk, Value: run}}, storage.BatchOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(lk, lmle, batch)
	f.Add(rk, run, batch[:len(batch)-1])
	f.Add(rk, []byte{}, []byte{})
	f.Add([]byte("l\x00t\x002147483648"), lmle, []byte{0xff})
	f.Add([]byte("r\x00\x00\x00-1"), []byte{0x0a, 0xff}, batch[:61])
	f.Fuzz(func(t *testing.T, key, value, raw []byte) {
		// Bytes as a fetch returns them: an error or records, never a panic.
		if recs, err := decodeStateRecords(raw); err == nil {
			var v stateView
			for _, r := range recs {
				v.apply(r)
			}
		}
		buf, err := storage.EncodeBatch([]storage.Record{{Key: key, Value: value}}, storage.BatchOptions{})
		if err != nil {
			return // the encoder refuses it (size); nothing to decode
		}
		recs, err := decodeStateRecords(buf)
		if err != nil {
			t.Fatalf("decode a batch just encoded: %v", err)
		}
		if len(recs) != 1 || !bytes.Equal(recs[0].Key, key) || !bytes.Equal(recs[0].Value, value) {
			t.Fatalf("decoded %+v, want key %q value %q", recs, key, value)
		}
		var v stateView
		v.apply(recs[0])
		if n := v.lmle.Len() + v.run.Len(); n > 1 {
			t.Fatalf("one record applied %d keys", n)
		}
		v.apply(storage.Record{Key: key})
		if n := v.lmle.Len() + v.run.Len(); n != 0 {
			t.Fatalf("the tombstone of key %q left %d keys", key, n)
		}
	})
}
