package metastore

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// snapshotItemFields are the repeated fields of MetadataSnapshot that pages
// carry, in the order of the flattened item sequence (SnapshotCursor in
// controller.proto): brokers, topics, partitions, mirrors, ACL bindings,
// SCRAM credentials. They are read
// from the descriptor so that a renumbered field cannot drift from here.
var snapshotItemFields = func() [6]protowire.Number {
	fields := (&twinlogv1.MetadataSnapshot{}).ProtoReflect().Descriptor().Fields()
	var out [6]protowire.Number
	for i, name := range []protoreflect.Name{"brokers", "topics", "partitions", "mirrors", "acls", "scram_credentials"} {
		out[i] = fields.ByName(name).Number()
	}
	return out
}()

// itemKind returns num's index in snapshotItemFields, -1 for the other
// fields (offset, cluster id, cluster config, producer ids, unknown ones).
func itemKind(num protowire.Number) int {
	for k, n := range snapshotItemFields {
		if n == num {
			return k
		}
	}
	return -1
}

// SnapshotPage is a run of consecutive items of the stored snapshot.
type SnapshotPage struct {
	// Snapshot holds the page: Offset always, ClusterId, ClusterConfig and
	// ProducerIds only when Position is 0, and the items [Position, Next) in their
	// lists.
	Snapshot *twinlogv1.MetadataSnapshot
	// Position is the index of the page's first item in the snapshot's item
	// sequence; Next is one past its last.
	Position, Next int64
	// Items is how many items the whole snapshot holds.
	Items int64
}

// ReadSnapshotPage reads one page of the encoded MetadataSnapshot v, which
// its store keeps as the snapshot of offset. The store calls it on the
// stored bytes themselves, under whatever makes them stable (boltstore: one
// read transaction, memstore: its lock), so that the page belongs to the
// snapshot start was shown: a compaction that replaces the snapshot
// meanwhile is not mixed in.
//
// start receives the snapshot's offset and item count (brokers, topics,
// partitions, mirrors, ACL bindings and SCRAM credentials together) and returns the position to read from:
// in [0, items), or 0 for a snapshot without items. An error from start is
// returned as is. Items are then taken in sequence while fits(size) holds,
// size being the encoded size of SnapshotPage.Snapshot with that item
// included; the first item is taken whatever fits says, so every page
// progresses.
//
// A snapshot can hold millions of partitions: decoding all of it for every
// page would cost the whole snapshot per page. So v is scanned in place (no
// allocation per skipped item) and only the page's items are decoded.
// Bytes that do not decode, or a snapshot whose own offset is not offset,
// are an error wrapping ErrCorrupt.
func ReadSnapshotPage(v []byte, offset int64, start func(offset, items int64) (int64, error), fits func(size int) bool) (*SnapshotPage, error) {
	var counts [len(snapshotItemFields)]int64
	var header []byte
	var fieldErr error
	err := eachField(v, func(num protowire.Number, typ protowire.Type, field []byte) bool {
		switch k := itemKind(num); {
		case k < 0:
			header = append(header, field...)
		case typ != protowire.BytesType:
			fieldErr = fmt.Errorf("field %d of wire type %d, want a message", num, typ)
			return false
		default:
			counts[k]++
		}
		return true
	})
	if err == nil {
		err = fieldErr
	}
	if err != nil {
		return nil, fmt.Errorf("%w: decode snapshot: %v", ErrCorrupt, err)
	}
	hdr := &twinlogv1.MetadataSnapshot{}
	if err := proto.Unmarshal(header, hdr); err != nil {
		return nil, fmt.Errorf("%w: decode snapshot: %v", ErrCorrupt, err)
	}
	if hdr.GetOffset() != offset {
		return nil, fmt.Errorf("%w: snapshot carries offset %d, its key says %d", ErrCorrupt, hdr.GetOffset(), offset)
	}
	var items int64
	for _, n := range counts {
		items += n
	}
	pos, err := start(hdr.GetOffset(), items)
	if err != nil {
		return nil, err
	}
	if pos < 0 || (pos >= items && pos != 0) {
		return nil, fmt.Errorf("metastore: snapshot page position %d outside [0, %d)", pos, items)
	}
	page, err := readPage(v, hdr, counts, pos, fits)
	if err != nil {
		return nil, err
	}
	page.Items = items
	return page, nil
}

// readPage decodes the items of the encoded snapshot v from position pos
// on while they fit (see ReadSnapshotPage). counts are v's items per kind.
func readPage(v []byte, hdr *twinlogv1.MetadataSnapshot, counts [len(snapshotItemFields)]int64, pos int64, fits func(int) bool) (*SnapshotPage, error) {
	snap := &twinlogv1.MetadataSnapshot{Offset: hdr.GetOffset()}
	if pos == 0 {
		snap.ClusterId, snap.ClusterConfig, snap.ProducerIds = hdr.GetClusterId(), hdr.GetClusterConfig(), hdr.GetProducerIds()
	}
	size, next, full := proto.Size(snap), pos, false
	var base int64 // position of kind k's first item
	for k, n := range counts {
		if full {
			break
		}
		if next >= base+n {
			base += n
			continue
		}
		skip, idx := next-base, int64(0)
		var decodeErr error
		err := eachField(v, func(num protowire.Number, typ protowire.Type, field []byte) bool {
			if itemKind(num) != k || typ != protowire.BytesType {
				return true
			}
			i := idx
			idx++
			if i < skip {
				return true
			}
			value, _ := protowire.ConsumeBytes(field[protowire.SizeTag(num):])
			m, err := decodeItem(k, value)
			if err != nil {
				decodeErr = fmt.Errorf("%w: decode snapshot item %d: %v", ErrCorrupt, base+i, err)
				return false
			}
			fieldSize := protowire.SizeTag(num) + protowire.SizeBytes(proto.Size(m))
			if next > pos && !fits(size+fieldSize) {
				full = true
				return false
			}
			appendItem(snap, m)
			size += fieldSize
			next++
			return true
		})
		if err == nil {
			err = decodeErr
		}
		if err != nil {
			return nil, err
		}
		base += n
	}
	return &SnapshotPage{Snapshot: snap, Position: pos, Next: next}, nil
}

// eachField calls fn with every top-level field of the encoded message b
// (number, wire type, the field's bytes tag included) until fn returns
// false.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, field []byte) bool) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return protowire.ParseError(m)
		}
		if !fn(num, typ, b[:n+m]) {
			return nil
		}
		b = b[n+m:]
	}
	return nil
}

// decodeItem decodes one item of kind k (an index of snapshotItemFields).
// Unmarshal copies bytes and strings out of value: boltstore's value is only
// valid inside its read transaction.
func decodeItem(k int, value []byte) (proto.Message, error) {
	var m proto.Message
	switch k {
	case 0:
		m = &twinlogv1.BrokerRecord{}
	case 1:
		m = &twinlogv1.TopicRecord{}
	case 2:
		m = &twinlogv1.PartitionRecord{}
	case 3:
		m = &twinlogv1.MirrorRecord{}
	case 4:
		m = &twinlogv1.AclBinding{}
	default:
		m = &twinlogv1.UserScramCredentialRecord{}
	}
	if err := proto.Unmarshal(value, m); err != nil {
		return nil, err
	}
	return m, nil
}

func appendItem(snap *twinlogv1.MetadataSnapshot, m proto.Message) {
	switch r := m.(type) {
	case *twinlogv1.BrokerRecord:
		snap.Brokers = append(snap.Brokers, r)
	case *twinlogv1.TopicRecord:
		snap.Topics = append(snap.Topics, r)
	case *twinlogv1.PartitionRecord:
		snap.Partitions = append(snap.Partitions, r)
	case *twinlogv1.MirrorRecord:
		snap.Mirrors = append(snap.Mirrors, r)
	case *twinlogv1.AclBinding:
		snap.Acls = append(snap.Acls, r)
	case *twinlogv1.UserScramCredentialRecord:
		snap.ScramCredentials = append(snap.ScramCredentials, r)
	}
}
