package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog/cmd/twinctl/internal/cli"
	"github.com/twinlog/twinlog/storage"
)

func TestStorageCodecRoundTrip(t *testing.T) {
	in := []cli.Record{
		{Timestamp: 1000, Key: []byte("k"), Value: []byte("v1")},
		{Timestamp: 1001, Value: []byte("v2"), Headers: []cli.RecordHeader{{Key: "h", Value: []byte("x")}}},
	}
	b1, err := encodeBatch(in, cli.NoProducer)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := encodeBatch(in[:1], cli.Producer{ID: 1<<48 | 3, Epoch: 2, BaseSequence: 40})
	if err != nil {
		t.Fatal(err)
	}
	buf := append(append([]byte{}, b1...), b2...)
	// A trailing batch cut by maxBytes is dropped, not an error.
	got, err := decodeBatches(buf[:len(buf)-3])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Records) != 2 || got[0].LastOffset != 1 {
		t.Fatalf("got %+v", got)
	}
	want := []cli.Record{
		{Offset: 0, Timestamp: 1000, Key: []byte("k"), Value: []byte("v1")},
		{Offset: 1, Timestamp: 1001, Value: []byte("v2"), Headers: []cli.RecordHeader{{Key: "h", Value: []byte("x")}}},
	}
	if diff := cmp.Diff(want, got[0].Records); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	// The producer fields are the batch's.
	if v, _, err := storage.DecodeBatch(b2); err != nil || v.ProducerID() != 1<<48|3 || v.ProducerEpoch() != 2 || v.BaseSequence() != 40 {
		t.Fatalf("producer fields: %v %d/%d/%d", err, v.ProducerID(), v.ProducerEpoch(), v.BaseSequence())
	}
	if v, _, _ := storage.DecodeBatch(b1); v.ProducerID() != -1 || v.ProducerEpoch() != -1 || v.BaseSequence() != -1 {
		t.Fatalf("no producer: %d/%d/%d", v.ProducerID(), v.ProducerEpoch(), v.BaseSequence())
	}
	// A corrupt batch is an error.
	bad := append([]byte{}, b1...)
	bad[len(bad)-1] ^= 0xff
	if _, err := decodeBatches(bad); err == nil {
		t.Fatal("corrupt batch decoded")
	}
}
