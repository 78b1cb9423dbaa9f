package group

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog"
)

// Record is one __consumer_offsets record: Key and Value in Kafka's layout
// (a big-endian int16 schema version, then the schema's fields); a nil
// Value is a tombstone. The host sets the record timestamps.
type Record struct {
	Key, Value []byte
}

// The record schema versions this coordinator writes, as Kafka 2.3+ does
// (MetadataVersion.offsetCommitValueVersion, groupMetadataValueVersion):
// OffsetCommitKey v1, OffsetCommitValue v3 (v1 when the commit carries an
// explicit expiry), GroupMetadataKey v2, GroupMetadataValue v3 (the highest
// non-flexible one).
const (
	offsetCommitKeyVersion           = 1
	offsetCommitValueVersion         = 3
	offsetCommitValueVersionExpiring = 1
	groupMetadataKeyVersion          = 2
	groupMetadataValueVersion        = 3
)

// RecordKind says what a record is about.
type RecordKind int8

const (
	// OffsetCommitRecord: a group's committed offset of one partition
	// (key versions 0 and 1).
	OffsetCommitRecord RecordKind = iota + 1
	// GroupMetadataRecord: a group's membership (key version 2).
	GroupMetadataRecord
)

// GroupMetadata is a GroupMetadataValue: a group's generation, protocol and
// members with their assignments, as of its last rebalance.
type GroupMetadata struct {
	// ProtocolType is "" for a group without one (a simple group).
	ProtocolType string
	Generation   int32
	Protocol     *string
	Leader       *string
	// CurrentStateTimestampMs is when the group entered its state, -1
	// when unknown (records before v2).
	CurrentStateTimestampMs int64
	Members                 []MemberMetadata
}

// MemberMetadata is one member of a GroupMetadataValue.
type MemberMetadata struct {
	MemberID        string
	GroupInstanceID *string
	ClientID        string
	ClientHost      string
	// RebalanceTimeoutMs is -1 in records before v1.
	RebalanceTimeoutMs int32
	SessionTimeoutMs   int32
	// Subscription is the member's metadata for the group's protocol.
	Subscription []byte
	Assignment   []byte
}

// DecodedRecord is a record decoded.
type DecodedRecord struct {
	Kind  RecordKind
	Group string
	// Partition is an offset commit's partition.
	Partition twinlog.TopicPartition
	// Offset is an offset commit's value, nil for a tombstone.
	Offset *OffsetAndMetadata
	// Metadata is a group's value, nil for a tombstone.
	Metadata *GroupMetadata
}

// EncodeOffsetCommit is the record of a committed offset; a nil o is its
// tombstone.
func EncodeOffsetCommit(group string, tp twinlog.TopicPartition, o *OffsetAndMetadata) Record {
	k := kmsg.OffsetCommitKey{Version: offsetCommitKeyVersion, Group: group, Topic: tp.Topic, Partition: tp.Partition}
	r := Record{Key: k.AppendTo(nil)}
	if o == nil {
		return r
	}
	v := kmsg.OffsetCommitValue{
		Version:         offsetCommitValueVersion,
		Offset:          o.Offset,
		LeaderEpoch:     o.LeaderEpoch,
		Metadata:        o.Metadata,
		CommitTimestamp: o.CommitTimestampMs,
	}
	if o.ExpireTimestampMs >= 0 {
		// Only version 1 has the expire timestamp; it has no leader
		// epoch (Kafka writes the same).
		v.Version = offsetCommitValueVersionExpiring
		v.ExpireTimestamp = o.ExpireTimestampMs
	}
	r.Value = v.AppendTo(nil)
	return r
}

// EncodeGroupMetadata is the record of a group's metadata; a nil m is its
// tombstone.
func EncodeGroupMetadata(group string, m *GroupMetadata) Record {
	k := kmsg.GroupMetadataKey{Version: groupMetadataKeyVersion, Group: group}
	r := Record{Key: k.AppendTo(nil)}
	if m == nil {
		return r
	}
	v := kmsg.GroupMetadataValue{
		Version:               groupMetadataValueVersion,
		ProtocolType:          m.ProtocolType,
		Generation:            m.Generation,
		Protocol:              m.Protocol,
		Leader:                m.Leader,
		CurrentStateTimestamp: m.CurrentStateTimestampMs,
		Members:               make([]kmsg.GroupMetadataValueMember, len(m.Members)),
	}
	for i, mm := range m.Members {
		v.Members[i] = kmsg.GroupMetadataValueMember{
			MemberID:               mm.MemberID,
			InstanceID:             mm.GroupInstanceID,
			ClientID:               mm.ClientID,
			ClientHost:             mm.ClientHost,
			RebalanceTimeoutMillis: mm.RebalanceTimeoutMs,
			SessionTimeoutMillis:   mm.SessionTimeoutMs,
			Subscription:           mm.Subscription,
			Assignment:             mm.Assignment,
		}
	}
	r.Value = v.AppendTo(nil)
	return r
}

// DecodeRecord decodes a record of any version Kafka has written of the
// offset commit and group metadata schemas (values v0–v4). Other record
// types are ErrUnsupportedRecord, malformed ones ErrCorruptRecord.
func DecodeRecord(r Record) (DecodedRecord, error) {
	if len(r.Key) < 2 {
		return DecodedRecord{}, fmt.Errorf("%w: key of %d bytes", ErrCorruptRecord, len(r.Key))
	}
	switch kv := int16(binary.BigEndian.Uint16(r.Key)); kv {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err != nil {
			return DecodedRecord{}, fmt.Errorf("%w: offset commit key: %v", ErrCorruptRecord, err)
		}
		d := DecodedRecord{Kind: OffsetCommitRecord, Group: k.Group, Partition: twinlog.TopicPartition{Topic: k.Topic, Partition: k.Partition}}
		if r.Value == nil {
			return d, nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(r.Value); err != nil {
			return DecodedRecord{}, fmt.Errorf("%w: offset commit value of %s %s: %v", ErrCorruptRecord, k.Group, d.Partition, err)
		}
		o := &OffsetAndMetadata{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTimestampMs: v.CommitTimestamp, ExpireTimestampMs: -1}
		if v.Version >= 3 {
			o.LeaderEpoch = v.LeaderEpoch
		}
		if v.Version == 1 && v.ExpireTimestamp != -1 {
			o.ExpireTimestampMs = v.ExpireTimestamp
		}
		d.Offset = o
		return d, nil
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			return DecodedRecord{}, fmt.Errorf("%w: group metadata key: %v", ErrCorruptRecord, err)
		}
		d := DecodedRecord{Kind: GroupMetadataRecord, Group: k.Group}
		if r.Value == nil {
			return d, nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(r.Value); err != nil {
			return DecodedRecord{}, fmt.Errorf("%w: group metadata value of %s: %v", ErrCorruptRecord, k.Group, err)
		}
		m := &GroupMetadata{
			ProtocolType:            v.ProtocolType,
			Generation:              v.Generation,
			Protocol:                v.Protocol,
			Leader:                  v.Leader,
			CurrentStateTimestampMs: v.CurrentStateTimestamp,
			Members:                 make([]MemberMetadata, len(v.Members)),
		}
		for i, mm := range v.Members {
			m.Members[i] = MemberMetadata{
				MemberID:           mm.MemberID,
				GroupInstanceID:    mm.InstanceID,
				ClientID:           mm.ClientID,
				ClientHost:         mm.ClientHost,
				RebalanceTimeoutMs: mm.RebalanceTimeoutMillis,
				SessionTimeoutMs:   mm.SessionTimeoutMillis,
				Subscription:       mm.Subscription,
				Assignment:         mm.Assignment,
			}
		}
		d.Metadata = m
		return d, nil
	default:
		return DecodedRecord{}, fmt.Errorf("%w: key version %d", ErrUnsupportedRecord, kv)
	}
}
