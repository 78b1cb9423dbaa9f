package broker

import (
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// MirrorObserver receives mirror metrics (SPEC §7). A Deps.Observer that
// also implements it gets them; metrics.Mirror is the Prometheus one. Calls
// may come from many goroutines.
type MirrorObserver interface {
	// ObserveMirrorPartition reports a led mirror partition's status (lag in
	// records and seconds, state) whenever the runner publishes it.
	ObserveMirrorPartition(st *pb.MirrorPartitionStatus)
	// ForgetMirrorPartition: the partition's runner stopped on this broker.
	ForgetMirrorPartition(topic string, partition int32)
	// ObserveMirrorState counts a state transition of a mirror partition.
	ObserveMirrorState(mirror, topic string, partition int32, from, to pb.MirrorState)
	// ObserveMirrorTruncation counts a leader-side mirror truncation and the
	// records it removed; reason is lmle, divergence or out_of_range.
	ObserveMirrorTruncation(topic string, partition int32, reason string, records int64)
	// ObserveMirrorBytes counts bytes appended by the mirror fetcher.
	ObserveMirrorBytes(topic string, partition int32, n int)
	// ObserveMirrorFetchError counts a failed mirror fetch by error code.
	ObserveMirrorFetchError(topic string, partition int32, code string)
	// ObserveMirrorTaints reports replicas newly tainted on a partition.
	ObserveMirrorTaints(topic string, partition int32, n int)
}

type nopMirrorObserver struct{}

func (nopMirrorObserver) ObserveMirrorPartition(*pb.MirrorPartitionStatus)                         {}
func (nopMirrorObserver) ForgetMirrorPartition(string, int32)                                      {}
func (nopMirrorObserver) ObserveMirrorState(string, string, int32, pb.MirrorState, pb.MirrorState) {}
func (nopMirrorObserver) ObserveMirrorTruncation(string, int32, string, int64)                     {}
func (nopMirrorObserver) ObserveMirrorBytes(string, int32, int)                                    {}
func (nopMirrorObserver) ObserveMirrorFetchError(string, int32, string)                            {}
func (nopMirrorObserver) ObserveMirrorTaints(string, int32, int)                                   {}
