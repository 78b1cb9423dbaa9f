package producer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/twinlog/twinlog"
)

// A snapshot is the state as of an offset, the bytes of a
// <offset>.snapshot file beside a partition's segments (storage/doc.go),
// big-endian:
//
//	version u16 (1) | crc u32 | count u32 | producer ...
//	producer: id i64 | epoch i16 | lastTimestamp i64 | batches u8 | batch ...
//	batch:    firstSeq i32 | lastSeq i32 | firstOffset i64 | lastOffset i64 | maxTimestamp i64
//
// crc is CRC-32C of everything after it. Unlike Kafka's snapshot, which
// keeps only each producer's last batch, it keeps all of a producer's last
// MaxBatches, so a leader loaded from one still answers a retry of any of
// them as a duplicate.
const (
	snapshotVersion  = 1
	snapshotHeader   = 2 + 4 + 4
	producerFixed    = 8 + 2 + 8 + 1
	batchEncodedSize = 4 + 4 + 8 + 8 + 8
)

// ErrCorruptSnapshot: the bytes are not a snapshot this version wrote.
var ErrCorruptSnapshot = errors.New("producer: corrupt snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MarshalSnapshot encodes the state.
func (s *State) MarshalSnapshot() []byte {
	ps := s.Producers()
	n := snapshotHeader
	for _, p := range ps {
		n += producerFixed + len(p.Batches)*batchEncodedSize
	}
	buf := make([]byte, snapshotHeader, n)
	be := binary.BigEndian
	be.PutUint16(buf, snapshotVersion)
	be.PutUint32(buf[6:], uint32(len(ps)))
	for _, p := range ps {
		buf = be.AppendUint64(buf, uint64(p.ID))
		buf = be.AppendUint16(buf, uint16(p.Epoch))
		buf = be.AppendUint64(buf, uint64(s.producers[p.ID].lastTimestamp))
		buf = append(buf, byte(len(p.Batches)))
		for _, b := range p.Batches {
			buf = be.AppendUint32(buf, uint32(b.FirstSeq))
			buf = be.AppendUint32(buf, uint32(b.LastSeq))
			buf = be.AppendUint64(buf, uint64(b.FirstOffset))
			buf = be.AppendUint64(buf, uint64(b.LastOffset))
			buf = be.AppendUint64(buf, uint64(b.MaxTimestamp))
		}
	}
	be.PutUint32(buf[2:], crc32.Checksum(buf[6:], castagnoli))
	return buf
}

// UnmarshalSnapshot decodes a snapshot. Every field is checked, so damaged
// bytes give ErrCorruptSnapshot, never a state that could answer a retry
// wrongly.
func UnmarshalSnapshot(buf []byte) (*State, error) {
	be := binary.BigEndian
	if len(buf) < snapshotHeader {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorruptSnapshot, len(buf))
	}
	if v := be.Uint16(buf); v != snapshotVersion {
		return nil, fmt.Errorf("%w: version %d", ErrCorruptSnapshot, v)
	}
	if got, want := crc32.Checksum(buf[6:], castagnoli), be.Uint32(buf[2:]); got != want {
		return nil, fmt.Errorf("%w: crc %08x, want %08x", ErrCorruptSnapshot, got, want)
	}
	count := be.Uint32(buf[6:])
	rest := buf[snapshotHeader:]
	if uint64(count)*producerFixed > uint64(len(rest)) {
		return nil, fmt.Errorf("%w: %d producers in %d bytes", ErrCorruptSnapshot, count, len(rest))
	}
	s := New()
	for range count {
		if len(rest) < producerFixed {
			return nil, fmt.Errorf("%w: producer cut short", ErrCorruptSnapshot)
		}
		id, epoch := int64(be.Uint64(rest)), int16(be.Uint16(rest[8:]))
		e := &entry{epoch: epoch, lastTimestamp: int64(be.Uint64(rest[10:]))}
		nb := int(rest[18])
		rest = rest[producerFixed:]
		if id < 0 || epoch < 0 || nb > MaxBatches || len(rest) < nb*batchEncodedSize {
			return nil, fmt.Errorf("%w: producer %d epoch %d with %d batches", ErrCorruptSnapshot, id, epoch, nb)
		}
		if _, dup := s.producers[id]; dup {
			return nil, fmt.Errorf("%w: producer %d twice", ErrCorruptSnapshot, id)
		}
		for range nb {
			b := Batch{
				ProducerID: id, Epoch: epoch,
				FirstSeq: int32(be.Uint32(rest)), LastSeq: int32(be.Uint32(rest[4:])),
				FirstOffset: twinlog.Offset(be.Uint64(rest[8:])), LastOffset: twinlog.Offset(be.Uint64(rest[16:])),
				MaxTimestamp: int64(be.Uint64(rest[24:])),
			}
			rest = rest[batchEncodedSize:]
			if b.FirstSeq < 0 || b.LastSeq < 0 || b.FirstOffset < 0 || b.LastOffset < b.FirstOffset || b.LastOffset == math.MaxInt64 {
				return nil, fmt.Errorf("%w: producer %d batch %+v", ErrCorruptSnapshot, id, b)
			}
			if n := len(e.batches); n > 0 && b.FirstOffset <= e.batches[n-1].LastOffset {
				return nil, fmt.Errorf("%w: producer %d batches out of offset order", ErrCorruptSnapshot, id)
			}
			e.batches = append(e.batches, b)
		}
		s.producers[id] = e
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last producer", ErrCorruptSnapshot, len(rest))
	}
	return s, nil
}

// LastOffset is the largest offset of any batch the state holds, −1 if
// none: a snapshot taken at offset o holds only batches below o.
func (s *State) LastOffset() twinlog.Offset {
	last := twinlog.Offset(-1)
	for _, e := range s.producers {
		if n := len(e.batches); n > 0 {
			last = max(last, e.batches[n-1].LastOffset)
		}
	}
	return last
}
