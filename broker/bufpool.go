package broker

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// BufferPool is the gRPC buffer pool the broker's server and peer
// connections use: power-of-two tiers like gRPC's default, but without
// zeroing buffers on Get. gRPC fills every buffer it takes (message reads
// are io.ReadFull of the length, encodes write the whole size) and the
// protobuf codec copies bytes fields out, so zeroing only burns CPU: with
// the default pool, clearing 128 KiB buffers for 64 KiB produce batches and
// 16 MiB ones for follower fetches was ~20% of the broker's CPU in
// twinbench. Processes may also install it with
// experimental.SetDefaultBufferPool so the codec uses it.
var BufferPool mem.BufferPool = newDirtyPool()

// gRPC transport sizes for the broker's server and peer connections.
const (
	streamWorkers       = 64
	transportBufferSize = 256 << 10
	streamWindowSize    = 16 << 20
	connWindowSize      = 64 << 20
)

const (
	minPoolShift = 8  // 256 B
	maxPoolShift = 26 // 64 MiB, the max message size
)

type dirtyPool struct {
	tiers [maxPoolShift + 1]sync.Pool
}

func newDirtyPool() *dirtyPool { return &dirtyPool{} }

// Get returns a buffer of length n; its contents are unspecified.
func (p *dirtyPool) Get(n int) *[]byte {
	shift := minPoolShift
	if n > 1<<minPoolShift {
		shift = bits.Len(uint(n - 1))
	}
	if shift > maxPoolShift {
		b := make([]byte, n)
		return &b
	}
	if v, ok := p.tiers[shift].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<shift)
	return &b
}

// Put returns a buffer to the tier its capacity fully covers.
func (p *dirtyPool) Put(b *[]byte) {
	c := cap(*b)
	if c < 1<<minPoolShift {
		return
	}
	shift := bits.Len(uint(c)) - 1 // 1<<shift <= c
	if shift > maxPoolShift {
		return
	}
	p.tiers[shift].Put(b)
}

// pooledRead allocates fetch read buffers from BufferPool. Before, every
// Log.Read made (and zeroed) a fresh buffer: the largest allocation source
// in the broker's profile.
func pooledRead(n int) []byte { return *BufferPool.Get(n) }

// releaseFetchBuffers returns resp's record buffers to BufferPool. Only for
// responses built with pooledRead that nothing reads any more.
func releaseFetchBuffers(resp *pb.FetchResponse) {
	for _, pr := range resp.GetPartitions() {
		if r := pr.GetRecords(); cap(r) > 0 {
			buf := r[:cap(r)]
			BufferPool.Put(&buf)
			pr.Records = nil
		}
	}
}
