package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog/cmd/twinctl/internal/cli"
)

func TestStorageCodecRoundTrip(t *testing.T) {
	in := []cli.Record{
		{Timestamp: 1000, Key: []byte("k"), Value: []byte("v1")},
		{Timestamp: 1001, Value: []byte("v2"), Headers: []cli.RecordHeader{{Key: "h", Value: []byte("x")}}},
	}
	b1, err := encodeBatch(in)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := encodeBatch(in[:1])
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
	// A corrupt batch is an error.
	bad := append([]byte{}, b1...)
	bad[len(bad)-1] ^= 0xff
	if _, err := decodeBatches(bad); err == nil {
		t.Fatal("corrupt batch decoded")
	}
}
