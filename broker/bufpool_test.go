package broker

import "testing"

func TestDirtyPoolSizes(t *testing.T) {
	p := newDirtyPool()
	for _, n := range []int{0, 1, 255, 256, 257, 4096, 65536 + 1, 16 << 20, 1 << 26, 1<<26 + 1} {
		b := p.Get(n)
		if len(*b) != n || cap(*b) < n {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		p.Put(b)
		b = p.Get(n)
		if len(*b) != n || cap(*b) < n {
			t.Fatalf("Get(%d) after Put: len %d cap %d", n, len(*b), cap(*b))
		}
	}
	// A foreign buffer with an odd capacity lands in a tier it covers.
	odd := make([]byte, 10, 3000)
	p.Put(&odd)
	if b := p.Get(2048); cap(*b) < 2048 || len(*b) != 2048 {
		t.Fatalf("Get(2048): len %d cap %d", len(*b), cap(*b))
	}
}
