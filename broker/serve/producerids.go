package serve

import "fmt"

// ProducerIDBlock is the part of a broker's producer id allocation that
// decides (KIP-730): the unused ids [next, end) of the block the
// controller gave it last. Take hands each id out once; Refill accepts a
// new block only if it lies wholly above every id handed out before, so
// that no id is given twice even if the controller answered a block twice.
// The broker's allocator (broker/producerids.go) and the simulator's
// brokers both hand out ids through it. The zero value holds no ids. Not
// safe for concurrent use.
type ProducerIDBlock struct {
	next, end int64
}

// Take returns the block's next unused id, and false when it is used up.
func (b *ProducerIDBlock) Take() (int64, bool) {
	if b.next >= b.end {
		return 0, false
	}
	id := b.next
	b.next++
	return id, true
}

// Refill replaces the block by [start, start+n): an error, and the block
// unchanged, when the new one is empty or starts below the end of the ids
// handed out before.
func (b *ProducerIDBlock) Refill(start int64, n int32) error {
	if n <= 0 || start < b.end {
		return fmt.Errorf("producer id block [%d, +%d) is empty or overlaps ids given before (up to %d)", start, n, b.end)
	}
	b.next, b.end = start, start+int64(n)
	return nil
}
