package state

import (
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/mirror/plan"
	"github.com/twinlog/twinlog/storage"
)

// Topic is the internal topic holding LMLE and run records (SPEC §6.4).
const Topic = "__mirror_state"

// PartitionFor is the __mirror_state partition holding topic's keys:
// CRC-32C(topic) mod numPartitions (SPEC §6.4).
func PartitionFor(topic string, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return 0
	}
	return int32(crc32.Checksum([]byte(topic), crc32.MakeTable(crc32.Castagnoli)) % uint32(numPartitions))
}

// ErrNotReady: the topic cannot be read or written now (no such topic in
// the metadata, no leader, a read that did not reach the HW).
var ErrNotReady = errors.New("state: __mirror_state not readable")

// Log is the __mirror_state topic as one broker reads it. The broker
// hosts it over its own partitions and gRPC (broker/mirrorstate.go), the
// simulator over its network; the reading and answering around it are
// Store's. Writes are the host's (an acks=all append through the
// partition's leader of the batch Store.Record encodes), with the
// cancellation its writer needs.
type Log interface {
	// Partitions is the topic's partition count in the broker's metadata,
	// false when the cluster has no __mirror_state.
	Partitions() (int32, bool)
	// Leads reports whether this broker leads partition sp, usable.
	Leads(sp int32) bool
	// Read reads partition sp from offset from, below its leader's HW:
	// from the local replica when this broker leads sp (ReadLocal), else
	// with a consumer fetch from the leader (ReadRequest, ReadAnswer).
	// last is the epoch of the reader's last record below from (NoEpoch:
	// none or unknown), which the leader checks its log still holds. It
	// returns the records read (which the caller owns), the epoch of the
	// last one's batch and that HW. done may run on any goroutine, before
	// Read returns or after.
	Read(sp int32, from twinlog.Offset, last twinlog.Epoch, done func(recs []storage.Record, epoch twinlog.Epoch, hw twinlog.Offset, err error))
	// NowMs is the broker's clock (the records' timestamps).
	NowMs() int64
}

// Store is what one broker read of __mirror_state: a View per partition,
// brought up to the leader's HW before every answer that needs it. Safe
// for concurrent use; done callbacks run wherever the Log's do.
type Store struct {
	log Log
	// skipped reports a record no writer writes (Apply refused it).
	skipped func(sp int32, offset twinlog.Offset, err error)

	mu    sync.Mutex
	views map[int32]*View
}

// NewStore returns an empty Store over log; skipped reports unreadable
// records (nil: ignore them silently).
func NewStore(log Log, skipped func(sp int32, offset twinlog.Offset, err error)) *Store {
	if skipped == nil {
		skipped = func(int32, twinlog.Offset, error) {}
	}
	return &Store{log: log, skipped: skipped, views: map[int32]*View{}}
}

// PartitionOf returns the __mirror_state partition holding topic's keys
// and whether the cluster has the topic.
func (s *Store) PartitionOf(topic string) (int32, bool) {
	n, ok := s.log.Partitions()
	if !ok {
		return 0, false
	}
	return PartitionFor(topic, n), true
}

// Sync reads partition sp up to its leader's HW, in as many reads as it
// takes. Concurrent syncs of one partition each apply only what the view
// has not: a read from an offset the view has moved past is dropped.
func (s *Store) Sync(sp int32, done func(error)) {
	s.mu.Lock()
	v := s.views[sp]
	if v == nil {
		v = &View{}
		s.views[sp] = v
	}
	from, last := v.Next, v.Last
	if from == 0 {
		last = twinlog.NoEpoch
	}
	s.mu.Unlock()
	s.log.Read(sp, from, last, func(recs []storage.Record, epoch twinlog.Epoch, hw twinlog.Offset, err error) {
		if from > 0 && ((err == nil && hw < from) || errors.Is(err, errOutOfRange) || errors.Is(err, errDiverged)) {
			// The leader's log ends below what this view applied, or no
			// longer holds the last record it read: records it read are
			// gone (an unclean election of the partition, SPEC §6.4's
			// runbook), and others may have been written at their
			// offsets since. Read the partition again from its start, or
			// every later read fails (or the view keeps the lost records
			// and skips those written in their place).
			s.mu.Lock()
			if s.views[sp] == v && v.Next == from {
				s.views[sp] = &View{}
			}
			s.mu.Unlock()
			s.Sync(sp, done)
			return
		}
		if err != nil {
			done(err)
			return
		}
		s.mu.Lock()
		if s.views[sp] == v && v.Next == from {
			for _, r := range recs {
				if r.Offset < v.Next {
					continue
				}
				if err := v.Apply(r.Key, r.Value); err != nil {
					// Only brokers write the topic; a record none of
					// them writes changes nothing, loudly.
					s.skipped(sp, r.Offset, err)
				}
				v.Next = r.Offset + 1
				v.Last = epoch
			}
			if len(recs) == 0 && hw > v.Next {
				// Nothing readable in between (compacted away): the
				// epoch below the new Next is not known.
				v.Next, v.Last = hw, twinlog.NoEpoch
			}
		}
		next := v.Next
		s.mu.Unlock()
		if next >= hw {
			done(nil)
			return
		}
		s.Sync(sp, done)
	})
}

// Load reads the records of partition part of topic (id topicID) after
// syncing its __mirror_state partition: the run record in mirror and the
// LMLE record, nil when absent (both nil when the cluster has no
// __mirror_state). The records are the caller's.
func (s *Store) Load(topic, mirror, topicID string, part int32, done func(*pb.MirrorRunRecord, *pb.MirrorLmleRecord, error)) {
	sp, ok := s.PartitionOf(topic)
	if !ok {
		done(nil, nil, nil)
		return
	}
	s.Sync(sp, func(err error) {
		if err != nil {
			done(nil, nil, err)
			return
		}
		run, lmle := s.records(sp, mirror, topicID, part)
		done(run, lmle, nil)
	})
}

// records clones a partition's records out of sp's view.
func (s *Store) records(sp int32, mirror, topicID string, part int32) (*pb.MirrorRunRecord, *pb.MirrorLmleRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.views[sp]
	var run *pb.MirrorRunRecord
	var lmle *pb.MirrorLmleRecord
	if r, ok := v.Run.Get(plan.RunKey{Mirror: mirror, TopicID: topicID, Partition: part}); ok {
		run = proto.Clone(r).(*pb.MirrorRunRecord)
	}
	if l, ok := v.Lmle.Get(plan.LmleKey{TopicID: topicID, Partition: part}); ok {
		lmle = proto.Clone(l).(*pb.MirrorLmleRecord)
	}
	return run, lmle
}

// Entry is the key and value of a mirrored partition's write: its run
// record in mirror when run is set, else its LMLE record.
func Entry(mirror, topicID string, part int32, run *pb.MirrorRunRecord, lmle *pb.MirrorLmleRecord) ([]byte, proto.Message) {
	if run != nil {
		return RunKey(plan.RunKey{Mirror: mirror, TopicID: topicID, Partition: part}), run
	}
	return LmleKey(plan.LmleKey{TopicID: topicID, Partition: part}), lmle
}

// Record encodes one record under key for topic's __mirror_state
// partition (a nil value is a tombstone): the partition, and the batch the
// broker appends with acks=all through its leader.
func (s *Store) Record(topic string, key []byte, value proto.Message) (int32, []byte, error) {
	sp, ok := s.PartitionOf(topic)
	if !ok {
		return 0, nil, fmt.Errorf("%w: no %s topic", ErrNotReady, Topic)
	}
	var val []byte
	if value != nil {
		var err error
		if val, err = proto.Marshal(value); err != nil {
			return 0, nil, err
		}
	}
	batch, err := storage.EncodeBatch([]storage.Record{{Timestamp: s.log.NowMs(), Key: key, Value: val}}, storage.BatchOptions{})
	return sp, batch, err
}

// SourceViewOf is what a source's GetLastMirroredEpochs answer takes from
// its metadata image about topic (plan.SourceView without the
// __mirror_state parts, which Answer fills), and the mirror the topic is
// in ("" none). An image that holds no metadata yet, or is older than the
// requester's latest Metadata answer from this cluster (minOffset), gives
// no view (metadata.Image.Reached): its "no such topic" would fail the
// asking run.
func SourceViewOf(img *metadata.Image, topic string, minOffset int64) (plan.SourceView, string, error) {
	var v plan.SourceView
	if err := img.Reached(minOffset); err != nil {
		return v, "", err
	}
	t := img.Topic(topic)
	if t == nil {
		return v, "", nil
	}
	v.LocalTopicID, v.PartitionCount = t.GetTopicId(), t.GetPartitionCount()
	mirror := t.GetMirrorName()
	if mirror == "" {
		return v, "", nil
	}
	v.InMirror = true
	if m := img.Mirror(mirror); m != nil {
		for _, mt := range m.GetTopics() {
			if mt.GetTopic() == topic {
				v.DesiredState = mt.GetDesiredState()
			}
		}
	}
	return v, mirror, nil
}

// Answer answers the other cluster's GetLastMirroredEpochs (SPEC §6.4)
// with plan.AnswerLastMirroredEpoch, view and mirror being
// SourceViewOf(req's topic) in this broker's image: only the leader of
// the topic's __mirror_state partition answers, and only once it has read
// it up to its HW; a topic or partition this cluster does not have, or has
// under another topic id, is an error, never −1.
func (s *Store) Answer(req *pb.GetLastMirroredEpochsRequest, view plan.SourceView, mirror string, done func(*pb.GetLastMirroredEpochsResponse)) {
	sp, has := s.PartitionOf(req.GetTopic())
	view.HasStateTopic = has
	answer := func() {
		resp := &pb.GetLastMirroredEpochsResponse{}
		for _, part := range req.GetPartitions() {
			v := view
			v.Partition = part
			if v.HasStateTopic && v.CaughtUp {
				run, lmle := s.records(sp, mirror, v.LocalTopicID, part)
				v.Record, v.RunState = lmle, run.GetState()
			}
			lmle, code := plan.AnswerLastMirroredEpoch(req.GetRequesterClusterId(), req.GetTopicId(), v)
			resp.Partitions = append(resp.Partitions, &pb.LastMirroredEpoch{Partition: part, Error: code, Lmle: int32(lmle)})
		}
		done(resp)
	}
	if !view.HasStateTopic {
		answer()
		return
	}
	view.StateLeader = s.log.Leads(sp)
	if !view.StateLeader {
		answer()
		return
	}
	s.Sync(sp, func(err error) {
		view.CaughtUp = err == nil
		answer()
	})
}
