package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a batch's compression codec: attributes bits 0–2, Kafka's
// numbers. A compressed batch's header stays plain; the bytes after it
// are its records, compressed together.
type Codec int8

// The codecs Kafka defines.
const (
	CodecNone Codec = iota
	CodecGzip
	CodecSnappy
	CodecLZ4
	CodecZstd
)

// Attribute bits besides the codec (SPEC §2.2). None is accepted: twinlog
// stamps create time only and has no transactions.
const (
	attrCodecMask     = 0x7
	attrLogAppendTime = 1 << 3
	attrTransactional = 1 << 4
	attrControl       = 1 << 5
)

// MaxDecompressedBytes bounds the records of one compressed batch once
// decompressed: a batch that inflates past it (a compression bomb) is
// corrupt. Kafka's own bound is the JVM's memory; 64 MiB is the broker's
// message limit, far above what a 1 MiB batch holds at real ratios.
const MaxDecompressedBytes = 64 << 20

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// Codec is the batch's compression codec.
func (b BatchView) Codec() Codec { return Codec(b.Attributes() & attrCodecMask) }

// checkAttributes refuses what twinlog does not store: an unknown codec,
// log-append-time, transactional and control batches.
func checkAttributes(a int16) error {
	switch {
	case a&attrTransactional != 0:
		return corruptf(0, "transactional batch (attributes %#x): transactions are not supported", a)
	case a&attrControl != 0:
		return corruptf(0, "control batch (attributes %#x): transactions are not supported", a)
	case a&attrLogAppendTime != 0:
		return corruptf(0, "log-append-time batch (attributes %#x): only create time is supported", a)
	case a&^attrCodecMask != 0:
		return corruptf(0, "unsupported attributes %#x", a)
	case Codec(a&attrCodecMask) > CodecZstd:
		return corruptf(0, "unknown compression codec %d", a&attrCodecMask)
	}
	return nil
}

// recordBytes are the batch's records: the bytes after the header, or
// those decompressed for a compressed batch.
func (b BatchView) recordBytes() ([]byte, error) { return b.recordBytesTo(nil) }

// recordBytesTo is recordBytes, decompressing into dst's memory (its
// length is ignored) when it is large enough.
func (b BatchView) recordBytesTo(dst []byte) ([]byte, error) {
	c := b.Codec()
	if c == CodecNone {
		return b[BatchHeaderSize:], nil
	}
	out, err := decompressTo(dst[:0], c, b[BatchHeaderSize:])
	if err != nil {
		return nil, corruptf(0, "%s records: %v", c, err)
	}
	return out, nil
}

// scratchRecordBytes is recordBytes for a caller that is done with the
// records when it calls release: a compressed batch is decompressed into
// a pooled buffer (a leader validates every batch a producer sends, and
// the records it decompresses only to check them need not be allocated
// each time).
func (b BatchView) scratchRecordBytes() (recs []byte, release func(), err error) {
	if b.Codec() == CodecNone {
		return b[BatchHeaderSize:], func() {}, nil
	}
	p, _ := scratchBuffers.Get().(*[]byte)
	if p == nil {
		p = new([]byte)
	}
	recs, err = b.recordBytesTo(*p)
	return recs, func() {
		if cap(recs) <= maxScratchBytes {
			*p = recs[:0]
		}
		scratchBuffers.Put(p)
	}, err
}

// scratchBuffers hold decompressed records between uses
// (scratchRecordBytes); one larger than maxScratchBytes is not kept.
var scratchBuffers sync.Pool // *[]byte

const maxScratchBytes = 4 << 20

var errTooLarge = fmt.Errorf("decompress to more than %d bytes", MaxDecompressedBytes)

// decompressTo inflates src with codec c, at most MaxDecompressedBytes,
// appending to dst.
func decompressTo(dst []byte, c Codec, src []byte) ([]byte, error) {
	switch c {
	case CodecGzip:
		r, _ := gzipReaders.Get().(*gzip.Reader)
		if r == nil {
			r = new(gzip.Reader)
		}
		defer gzipReaders.Put(r)
		if err := r.Reset(bytes.NewReader(src)); err != nil {
			return nil, err
		}
		return readBounded(dst, r, len(src))
	case CodecSnappy:
		return unsnappy(dst, src)
	case CodecLZ4:
		r := lz4Readers.Get().(*lz4.Reader)
		defer lz4Readers.Put(r)
		r.Reset(bytes.NewReader(src))
		return readBounded(dst, r, len(src))
	case CodecZstd:
		d := zstdDecoders.Get().(*zstd.Decoder)
		defer zstdDecoders.Put(d)
		if err := d.Reset(bytes.NewReader(src)); err != nil {
			return nil, err
		}
		return readBounded(dst, d, len(src))
	}
	return nil, fmt.Errorf("unknown codec %d", c)
}

// Readers are reused across batches: each allocates its buffers (lz4's
// block buffers, gzip's window, zstd's tables) on creation, which every
// validated compressed batch would otherwise pay.
var (
	gzipReaders sync.Pool // *gzip.Reader, made on first use (NewReader needs a stream)
	lz4Readers  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
)

// zstdDecoders are reusable (building one allocates its tables); each
// decodes synchronously within its caller's goroutine.
var zstdDecoders = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxDecompressedBytes))
	if err != nil {
		panic(err) // only for invalid options, which are constant
	}
	return d
}}

// readBounded appends r's bytes up to its end to dst, refusing more than
// MaxDecompressedBytes. It starts with room for four times the compressed
// size (compressed records of real data shrink 2-5x), then doubles.
func readBounded(dst []byte, r io.Reader, compressed int) ([]byte, error) {
	dst = slices.Grow(dst, min(4*compressed+512, MaxDecompressedBytes+1))
	for {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, min(cap(dst), MaxDecompressedBytes+1-len(dst)))
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst) > MaxDecompressedBytes {
			return nil, errTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// xerialMagic starts snappy data in the xerial framing Kafka's Java client
// writes: the magic, a version and a compatible version (4 bytes each),
// then chunks of a 4-byte length and a snappy block. Other clients
// (librdkafka, franz-go) may write one raw snappy block; both are read.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// unsnappy decodes raw or xerial-framed snappy, appending to dst.
func unsnappy(dst, src []byte) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return unsnappyBlock(dst, src)
	}
	if len(src) < xerialHeaderSize {
		return nil, errors.New("truncated xerial snappy header")
	}
	out := dst
	for p := src[xerialHeaderSize:]; len(p) > 0; {
		if len(p) < 4 {
			return nil, errors.New("truncated xerial snappy chunk length")
		}
		n := binary.BigEndian.Uint32(p)
		p = p[4:]
		if uint64(n) > uint64(len(p)) {
			return nil, fmt.Errorf("xerial snappy chunk of %d bytes with %d left", n, len(p))
		}
		var err error
		if out, err = unsnappyBlock(out, p[:n]); err != nil {
			return nil, err
		}
		p = p[n:]
	}
	return out, nil
}

// unsnappyBlock appends the decoding of one snappy block to dst.
func unsnappyBlock(dst, block []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > MaxDecompressedBytes-len(dst) {
		return nil, errTooLarge
	}
	dst = slices.Grow(dst, n)
	if _, err := snappy.Decode(dst[len(dst):len(dst)+n], block); err != nil {
		return nil, err
	}
	return dst[:len(dst)+n], nil
}

// compress compresses src with codec c as Kafka's brokers write a batch
// they rebuild (the cleaner's, cleaner.go): gzip, snappy in the Java
// client's xerial framing (which every client reads; raw blocks are not
// read by all), an LZ4 frame of independent blocks, zstd.
func compress(c Codec, src []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch c {
	case CodecGzip:
		w, _ := gzipWriters.Get().(*gzip.Writer)
		if w == nil {
			w = gzip.NewWriter(&buf)
		} else {
			w.Reset(&buf)
		}
		defer gzipWriters.Put(w)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CodecSnappy:
		buf.Write(xerialMagic)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1}) // version 1, compatible version 1
		for len(src) > 0 {
			n := min(len(src), xerialChunkSize)
			block := snappy.Encode(nil, src[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(block))))
			buf.Write(block)
			src = src[n:]
		}
	case CodecLZ4:
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		w.Reset(&buf)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CodecZstd:
		return zstdEncoder().EncodeAll(src, nil), nil
	default:
		return nil, fmt.Errorf("unknown codec %d", c)
	}
	return buf.Bytes(), nil
}

// xerialChunkSize is the uncompressed size of one xerial snappy chunk
// (the Java client's block size).
const xerialChunkSize = 32 << 10

var (
	gzipWriters sync.Pool // *gzip.Writer
	lz4Writers  = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}
	// zstdEncoder's EncodeAll is safe for concurrent use; it is built on
	// first use (only the cleaner compresses).
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			panic(err) // only for invalid options, which are constant
		}
		return e
	})
)
