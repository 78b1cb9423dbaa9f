package serve

import "testing"

// TestProducerIDBlock: each id of a block once, then none; a block that
// overlaps the ids handed out (or is empty) is refused and changes nothing.
func TestProducerIDBlock(t *testing.T) {
	var b ProducerIDBlock
	if _, ok := b.Take(); ok {
		t.Fatal("the zero block gave an id")
	}
	if err := b.Refill(100, 2); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int64{100, 101} {
		if id, ok := b.Take(); !ok || id != want {
			t.Fatalf("Take = %d, %t; want %d", id, ok, want)
		}
	}
	if _, ok := b.Take(); ok {
		t.Fatal("a used-up block gave an id")
	}
	for _, bad := range []struct {
		start int64
		n     int32
	}{{100, 2}, {101, 5}, {50, 10}, {200, 0}} {
		if err := b.Refill(bad.start, bad.n); err == nil {
			t.Fatalf("Refill(%d, %d) accepted after ids up to 101", bad.start, bad.n)
		}
	}
	if _, ok := b.Take(); ok {
		t.Fatal("a refused block gave an id")
	}
	if err := b.Refill(102, 1); err != nil {
		t.Fatal(err)
	}
	if id, ok := b.Take(); !ok || id != 102 {
		t.Fatalf("Take = %d, %t; want 102", id, ok)
	}
}
