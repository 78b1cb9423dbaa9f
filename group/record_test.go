package group

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twinlog/twinlog"
)

// kafkaBytes builds bytes field by field as Kafka's non-flexible schemas
// lay them out (big-endian; strings and nullable strings with an int16
// length, -1 for null; bytes with an int32 length; arrays with an int32
// count), independently of kmsg.
type kafkaBytes struct{ b []byte }

func (k *kafkaBytes) i16(v int16) *kafkaBytes {
	k.b = binary.BigEndian.AppendUint16(k.b, uint16(v))
	return k
}
func (k *kafkaBytes) i32(v int32) *kafkaBytes {
	k.b = binary.BigEndian.AppendUint32(k.b, uint32(v))
	return k
}
func (k *kafkaBytes) i64(v int64) *kafkaBytes {
	k.b = binary.BigEndian.AppendUint64(k.b, uint64(v))
	return k
}
func (k *kafkaBytes) str(s string) *kafkaBytes {
	k.i16(int16(len(s)))
	k.b = append(k.b, s...)
	return k
}
func (k *kafkaBytes) nstr(s *string) *kafkaBytes {
	if s == nil {
		return k.i16(-1)
	}
	return k.str(*s)
}
func (k *kafkaBytes) bytes(b []byte) *kafkaBytes {
	k.i32(int32(len(b)))
	k.b = append(k.b, b...)
	return k
}

// TestRecordGolden checks the four record types and their tombstones
// against bytes laid out in the field order of Kafka's schemas
// (group-coordinator/src/main/resources/common/message/*.json), and that
// DecodeRecord reads them back.
func TestRecordGolden(t *testing.T) {
	tp := twinlog.TopicPartition{Topic: "orders", Partition: 7}
	o := OffsetAndMetadata{Offset: 1234, LeaderEpoch: 5, Metadata: "meta", CommitTimestampMs: 1_700_000_000_000, ExpireTimestampMs: -1}
	m := &GroupMetadata{
		ProtocolType: "consumer", Generation: 3, Protocol: ptr("range"), Leader: ptr("m1"), CurrentStateTimestampMs: 1_700_000_000_001,
		Members: []MemberMetadata{
			{MemberID: "m1", GroupInstanceID: ptr("i1"), ClientID: "c1", ClientHost: "/h1", RebalanceTimeoutMs: 30000, SessionTimeoutMs: 10000, Subscription: []byte{1, 2}, Assignment: []byte{3}},
			{MemberID: "m2", ClientID: "c2", ClientHost: "/h2", RebalanceTimeoutMs: 60000, SessionTimeoutMs: 45000, Subscription: []byte{}, Assignment: []byte{}},
		},
	}
	offsetKey := (&kafkaBytes{}).i16(1).str("g").str("orders").i32(7).b
	if want, _ := hex.DecodeString("00010001670006" + hex.EncodeToString([]byte("orders")) + "00000007"); !bytes.Equal(offsetKey, want) {
		t.Fatalf("test builder: %x", offsetKey)
	}
	gm := (&kafkaBytes{}).i16(3).str("consumer").i32(3).nstr(ptr("range")).nstr(ptr("m1")).i64(1_700_000_000_001).i32(2)
	gm.str("m1").nstr(ptr("i1")).str("c1").str("/h1").i32(30000).i32(10000).bytes([]byte{1, 2}).bytes([]byte{3})
	gm.str("m2").nstr(nil).str("c2").str("/h2").i32(60000).i32(45000).bytes(nil).bytes(nil)
	empty := &GroupMetadata{ProtocolType: "", Generation: 0, CurrentStateTimestampMs: 5, Members: nil}

	for _, tc := range []struct {
		name      string
		rec       Record
		key, val  []byte
		tombstone bool
		decoded   DecodedRecord
	}{
		{
			name:    "OffsetCommitKey v1 + OffsetCommitValue v3",
			rec:     EncodeOffsetCommit("g", tp, &o),
			key:     offsetKey,
			val:     (&kafkaBytes{}).i16(3).i64(1234).i32(5).str("meta").i64(1_700_000_000_000).b,
			decoded: DecodedRecord{Kind: OffsetCommitRecord, Group: "g", Partition: tp, Offset: &o},
		},
		{
			name: "OffsetCommitValue v1 with an expire timestamp",
			rec:  EncodeOffsetCommit("g", tp, &OffsetAndMetadata{Offset: 1, LeaderEpoch: -1, CommitTimestampMs: 10, ExpireTimestampMs: 99}),
			key:  offsetKey,
			val:  (&kafkaBytes{}).i16(1).i64(1).str("").i64(10).i64(99).b,
			decoded: DecodedRecord{Kind: OffsetCommitRecord, Group: "g", Partition: tp,
				Offset: &OffsetAndMetadata{Offset: 1, LeaderEpoch: -1, CommitTimestampMs: 10, ExpireTimestampMs: 99}},
		},
		{
			name: "offset tombstone", rec: EncodeOffsetCommit("g", tp, nil), key: offsetKey, tombstone: true,
			decoded: DecodedRecord{Kind: OffsetCommitRecord, Group: "g", Partition: tp},
		},
		{
			name:    "GroupMetadataKey v2 + GroupMetadataValue v3",
			rec:     EncodeGroupMetadata("grp", m),
			key:     (&kafkaBytes{}).i16(2).str("grp").b,
			val:     gm.b,
			decoded: DecodedRecord{Kind: GroupMetadataRecord, Group: "grp", Metadata: m},
		},
		{
			name:    "empty group (Kafka's newEmptyGroupMetadataRecord)",
			rec:     EncodeGroupMetadata("grp", empty),
			key:     (&kafkaBytes{}).i16(2).str("grp").b,
			val:     (&kafkaBytes{}).i16(3).str("").i32(0).nstr(nil).nstr(nil).i64(5).i32(0).b,
			decoded: DecodedRecord{Kind: GroupMetadataRecord, Group: "grp", Metadata: &GroupMetadata{CurrentStateTimestampMs: 5, Members: []MemberMetadata{}}},
		},
		{
			name: "group tombstone", rec: EncodeGroupMetadata("grp", nil), key: (&kafkaBytes{}).i16(2).str("grp").b, tombstone: true,
			decoded: DecodedRecord{Kind: GroupMetadataRecord, Group: "grp"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Equal(tc.rec.Key, tc.key) {
				t.Fatalf("key\n got %x\nwant %x", tc.rec.Key, tc.key)
			}
			if tc.tombstone != (tc.rec.Value == nil) || !bytes.Equal(tc.rec.Value, tc.val) {
				t.Fatalf("value\n got %x\nwant %x", tc.rec.Value, tc.val)
			}
			// Decode the Kafka-shaped bytes, not our own.
			var val []byte
			if !tc.tombstone {
				val = tc.val
			}
			d, err := DecodeRecord(Record{Key: tc.key, Value: val})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normalize(d), normalize(tc.decoded)) {
				t.Fatalf("decoded\n %+v\nwant %+v", d, tc.decoded)
			}
		})
	}
}

// normalize makes nil and empty byte slices and member lists equal.
func normalize(d DecodedRecord) DecodedRecord {
	if d.Metadata != nil {
		m := *d.Metadata
		ms := make([]MemberMetadata, len(m.Members))
		for i, mm := range m.Members {
			mm.Subscription, mm.Assignment = append([]byte{}, mm.Subscription...), append([]byte{}, mm.Assignment...)
			ms[i] = mm
		}
		m.Members = ms
		d.Metadata = &m
	}
	return d
}

// TestDecodeOlderVersions reads values Kafka wrote before the versions
// this coordinator writes: the fields they lack take Kafka's defaults.
func TestDecodeOlderVersions(t *testing.T) {
	key := (&kafkaBytes{}).i16(0).str("g").str("t").i32(0).b // key v0
	for _, tc := range []struct {
		val  []byte
		want OffsetAndMetadata
	}{
		{(&kafkaBytes{}).i16(0).i64(7).str("x").i64(100).b, OffsetAndMetadata{Offset: 7, LeaderEpoch: -1, Metadata: "x", CommitTimestampMs: 100, ExpireTimestampMs: -1}},
		{(&kafkaBytes{}).i16(1).i64(7).str("x").i64(100).i64(-1).b, OffsetAndMetadata{Offset: 7, LeaderEpoch: -1, Metadata: "x", CommitTimestampMs: 100, ExpireTimestampMs: -1}},
		{(&kafkaBytes{}).i16(2).i64(7).str("x").i64(100).b, OffsetAndMetadata{Offset: 7, LeaderEpoch: -1, Metadata: "x", CommitTimestampMs: 100, ExpireTimestampMs: -1}},
		// v4 is flexible: compact string (length+1) and an empty tag buffer.
		{append((&kafkaBytes{}).i16(4).i64(7).i32(2).b, append([]byte{2, 'x'}, append(binary.BigEndian.AppendUint64(nil, 100), 0)...)...),
			OffsetAndMetadata{Offset: 7, LeaderEpoch: 2, Metadata: "x", CommitTimestampMs: 100, ExpireTimestampMs: -1}},
	} {
		d, err := DecodeRecord(Record{Key: key, Value: tc.val})
		if err != nil {
			t.Fatalf("%x: %v", tc.val, err)
		}
		if *d.Offset != tc.want {
			t.Fatalf("%x: %+v, want %+v", tc.val, *d.Offset, tc.want)
		}
	}
	// GroupMetadataValue v0: no rebalance timeout, state timestamp or
	// instance id.
	v0 := (&kafkaBytes{}).i16(0).str("consumer").i32(1).nstr(ptr("range")).nstr(ptr("m")).i32(1)
	v0.str("m").str("c").str("/h").i32(10000).bytes([]byte{1}).bytes([]byte{2})
	d, err := DecodeRecord(Record{Key: (&kafkaBytes{}).i16(2).str("g").b, Value: v0.b})
	if err != nil {
		t.Fatal(err)
	}
	if m := d.Metadata; m.CurrentStateTimestampMs != -1 || m.Members[0].RebalanceTimeoutMs != -1 || m.Members[0].SessionTimeoutMs != 10000 {
		t.Fatalf("v0: %+v", m)
	}
	// Errors: a truncated value, an unsupported record type.
	if _, err := DecodeRecord(Record{Key: key, Value: []byte{0, 3, 0}}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := DecodeRecord(Record{Key: (&kafkaBytes{}).i16(3).str("g").b}); !errors.Is(err, ErrUnsupportedRecord) {
		t.Fatalf("key v3: %v", err)
	}
}

// TestPartitionFor pins the partition to Java's String.hashCode (values
// computed with Java's algorithm over UTF-16) and Kafka's Utils.abs.
func TestPartitionFor(t *testing.T) {
	for _, tc := range []struct {
		id      string
		p50, p3 int32
	}{
		{"", 0, 0},
		{"hello", 22, 1},             // hashCode 99162322
		{"polygenelubricants", 0, 0}, // hashCode Integer.MIN_VALUE
		{"my-group", 12, 0},          // hashCode -1906497762
		{"console-consumer-12345", 6, 0},
		{"日本語", 43, 2},
		{"😀grp", 36, 0}, // a surrogate pair
	} {
		if p := PartitionFor(tc.id, 50); p != tc.p50 {
			t.Errorf("PartitionFor(%q, 50) = %d, want %d", tc.id, p, tc.p50)
		}
		if p := PartitionFor(tc.id, 3); p != tc.p3 {
			t.Errorf("PartitionFor(%q, 3) = %d, want %d", tc.id, p, tc.p3)
		}
	}
}

// TestErrorCodes pins every code to franz-go's kerr table.
func TestErrorCodes(t *testing.T) {
	// kerr keeps code 6's name from before KIP-392.
	kerrName := map[ErrorCode]string{NotLeaderOrFollower: "NOT_LEADER_FOR_PARTITION"}
	for code, name := range codeNames {
		if code == None {
			continue
		}
		if n, ok := kerrName[code]; ok {
			name = n
		}
		e, ok := kerr.ErrorForCode(int16(code)).(*kerr.Error)
		if !ok || e.Message != name {
			t.Errorf("code %d: kerr has %v, we say %s", code, kerr.ErrorForCode(int16(code)), name)
		}
	}
}
