package assign

import (
	"fmt"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
)

// OpenedLog is the log of a hosted partition, as OpenLog found or made it.
type OpenedLog struct {
	Dir *storage.LogDir
	Log *storage.Log
	// AlignedEpoch is the aligned_epoch of partition.metadata (SPEC §2.1,
	// §6.6): the one found, or storage.NoAlignedEpoch for a new log.
	AlignedEpoch twinlog.Epoch
	// Replaced: a dir of the partition held another topic id (FoundTopicID,
	// "" when it had no partition.metadata) and was deleted (SPEC §2.1);
	// Log is a new, empty one.
	Replaced     bool
	FoundTopicID string
}

// MetadataError is an unreadable partition.metadata: it says nothing about
// whose records the dir holds, so OpenLog keeps them (SPEC §2.1 deletes a
// dir only for another topic id) and leaves the partition unopened.
type MetadataError struct {
	TP  twinlog.TopicPartition
	Err error
}

func (e *MetadataError) Error() string {
	return fmt.Sprintf("read partition.metadata of %s-%d: %v", e.TP.Topic, e.TP.Partition, e.Err)
}

func (e *MetadataError) Unwrap() error { return e.Err }

// OpenLog finds the log of tp, for topic id topicID, in dirs (at least
// one). A log whose partition.metadata holds topicID is kept with its
// aligned epoch. One holding another topic id, or none, is deleted (SPEC
// §2.1) and, as when there is no log, a new one is created in the dir with
// the fewest logs (the first of them), with partition.metadata naming
// topicID and storage.NoAlignedEpoch. An unreadable partition.metadata is
// a *MetadataError and the dir is left as it is; a failed delete of a dir
// holding another topic id is an error naming both ids.
//
// The caller checks for an offline log of tp first (storage.LogDir.Offline):
// it must not get an empty log in another dir either.
func OpenLog(dirs []*storage.LogDir, tp twinlog.TopicPartition, topicID string) (OpenedLog, error) {
	out := OpenedLog{AlignedEpoch: storage.NoAlignedEpoch}
	for _, d := range dirs {
		if l, ok := d.Get(tp); ok {
			out.Dir, out.Log = d, l
			break
		}
	}
	if out.Log != nil {
		md, ok, err := out.Log.ReadPartitionMetadata()
		if err != nil {
			return OpenedLog{}, &MetadataError{TP: tp, Err: err}
		}
		if ok && md.TopicID == topicID {
			out.AlignedEpoch = md.AlignedEpoch
			return out, nil
		}
		if err := out.Dir.Delete(tp); err != nil {
			return OpenedLog{}, fmt.Errorf("delete dir of %s-%d holding topic id %q (want %q): %w", tp.Topic, tp.Partition, md.TopicID, topicID, err)
		}
		out.Replaced, out.FoundTopicID = true, md.TopicID
	}
	out.Dir = dirs[0]
	for _, d := range dirs[1:] {
		if len(d.Logs()) < len(out.Dir.Logs()) {
			out.Dir = d
		}
	}
	l, err := out.Dir.GetOrCreate(tp)
	if err != nil {
		return OpenedLog{}, err
	}
	if err := l.WritePartitionMetadata(storage.PartitionMetadata{TopicID: topicID, AlignedEpoch: storage.NoAlignedEpoch}); err != nil {
		return OpenedLog{}, err
	}
	out.Log = l
	return out, nil
}

// LogState is the replica's starting view of log l, whose partition.metadata
// holds aligned (replica.New).
func LogState(l *storage.Log, aligned twinlog.Epoch) replica.LogState {
	return replica.LogState{
		LogStartOffset: l.LogStartOffset(),
		LogEndOffset:   l.LogEndOffset(),
		HighWatermark:  l.HighWatermark(),
		Epochs:         l.Epochs().Entries(),
		AlignedEpoch:   aligned,
	}
}
