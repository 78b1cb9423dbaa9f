// Package state is the record format of the __mirror_state topic (SPEC
// §6.4) and what a reader makes of it: records are keyed
//
//	"l" 0x00 topicId 0x00 partition            → MirrorLmleRecord
//	"r" 0x00 mirror 0x00 topicId 0x00 partition → MirrorRunRecord
//
// (empty value: tombstone). Writers are the mirrored partitions' leaders
// (acks=all, stateEpoch = their LE); every reader applies records in log
// order with plan.StateTable's rule (View). The broker reads and writes
// the topic with it; no I/O here.
package state

import (
	"bytes"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
)

// LmleKey is the record key of a partition's LMLE record.
func LmleKey(k plan.LmleKey) []byte {
	return []byte("l\x00" + k.TopicID + "\x00" + strconv.Itoa(int(k.Partition)))
}

// RunKey is the record key of a partition's run record in a mirror.
func RunKey(k plan.RunKey) []byte {
	return []byte("r\x00" + k.Mirror + "\x00" + k.TopicID + "\x00" + strconv.Itoa(int(k.Partition)))
}

// DecodeKey parses a key written by LmleKey or RunKey; exactly one result
// is non-nil when err is nil, and it encodes back to key byte for byte.
// Any other key is an error: a reader ignores its record.
func DecodeKey(key []byte) (*plan.LmleKey, *plan.RunKey, error) {
	parts := bytes.Split(key, []byte{0})
	switch {
	case len(parts) == 3 && string(parts[0]) == "l":
		p, err := partition(parts[2])
		if err != nil {
			return nil, nil, err
		}
		return &plan.LmleKey{TopicID: string(parts[1]), Partition: p}, nil, nil
	case len(parts) == 4 && string(parts[0]) == "r":
		p, err := partition(parts[3])
		if err != nil {
			return nil, nil, err
		}
		return nil, &plan.RunKey{Mirror: string(parts[1]), TopicID: string(parts[2]), Partition: p}, nil
	}
	return nil, nil, fmt.Errorf("state: __mirror_state key %q is neither an LMLE nor a run key", key)
}

// partition parses the partition of a key: the canonical decimal
// strconv.Itoa writes, 0 to MaxInt32. Atoi and an int32 cast used to read
// "+0", "00", "4294967296" and "-4294967296" all as partition 0, so a
// record (or tombstone) under such a key replaced (or removed) partition
// 0's.
func partition(s []byte) (int32, error) {
	p, err := strconv.ParseInt(string(s), 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != string(s) {
		return 0, fmt.Errorf("state: __mirror_state key partition %q is not a canonical partition number", s)
	}
	return int32(p), nil
}

// View is what a reader has read of one __mirror_state partition: the
// latest record per key, and the offset to read from next.
type View struct {
	Next twinlog.Offset
	// Last is the leader epoch of the batch of the last record read
	// (below Next), which the next read checks the log still holds;
	// NoEpoch when unknown (Next moved over offsets without records).
	// Unused while Next is 0.
	Last twinlog.Epoch
	Lmle plan.StateTable[plan.LmleKey, *pb.MirrorLmleRecord]
	Run  plan.StateTable[plan.RunKey, *pb.MirrorRunRecord]
}

// Apply applies one record. A record it cannot read (a key DecodeKey
// refuses, a value that is not the key's record) changes nothing and is
// returned as an error for the caller to report.
func (v *View) Apply(key, value []byte) error {
	lk, rk, err := DecodeKey(key)
	if err != nil {
		return err
	}
	if lk != nil {
		rec, err := decode[pb.MirrorLmleRecord](key, value)
		if err == nil {
			v.Lmle.Apply(*lk, rec)
		}
		return err
	}
	rec, err := decode[pb.MirrorRunRecord](key, value)
	if err == nil {
		v.Run.Apply(*rk, rec)
	}
	return err
}

// decode reads a record's value: nil for a tombstone (empty value).
func decode[T any, P interface {
	*T
	proto.Message
}](key, value []byte) (P, error) {
	if len(value) == 0 {
		return nil, nil
	}
	rec := P(new(T))
	if err := proto.Unmarshal(value, rec); err != nil {
		return nil, fmt.Errorf("state: __mirror_state record %q: %w", key, err)
	}
	return rec, nil
}
