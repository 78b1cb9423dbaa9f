package metadata

import (
	"errors"
	"fmt"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// ErrNotLoaded: the image holds no metadata yet (a broker that has just
// started, or is reloading, before its first snapshot from the
// controller). Its answers would say that no topic exists.
var ErrNotLoaded = errors.New("metadata: no cluster metadata loaded yet")

// ErrBehind: the image is older than metadata the asker has already seen
// from another broker of the cluster.
var ErrBehind = errors.New("metadata: behind the asker's")

// Loaded is ErrNotLoaded until the image holds the cluster's metadata:
// what a broker answers about topics from it before that is not so.
func (img *Image) Loaded() error { return img.Reached(0) }

// Reached is Loaded, then ErrBehind while the image is older than offset
// min (metadata an asker had from another broker of the cluster).
func (img *Image) Reached(min int64) error {
	switch {
	case img.Offset() <= 0:
		return ErrNotLoaded
	case img.Offset() < min:
		return fmt.Errorf("%w: at offset %d, the asker has seen %d", ErrBehind, img.Offset(), min)
	}
	return nil
}

// Metadata answers a Metadata request (SPEC §4.6) from the image: the
// unfenced brokers and, unless NoTopics, the listed topics (all when none
// are listed) with each partition's leader (−1 when the leader is not
// alive), leader epoch, replicas and ISR. The caller adds what the image
// does not hold (the cluster id it answers under, the producer id space)
// and filters what the caller may not describe. Brokers answer with it,
// and the simulator's brokers answer a mirror's source client with it.
//
// An image that holds nothing yet does not answer (ErrNotLoaded): "no such
// topic" from a broker that has not loaded the metadata would be taken as
// the truth (a mirror's source client fails its run on an unknown source
// topic), so the caller must ask another broker, as Kafka's clients do of
// a broker that does not accept connections before its metadata catch-up.
func (img *Image) Metadata(req *twinlogv1.MetadataRequest) (*twinlogv1.MetadataResponse, error) {
	if err := img.Loaded(); err != nil {
		return nil, err
	}
	resp := &twinlogv1.MetadataResponse{MetadataOffset: img.Offset()}
	for _, br := range img.Brokers() {
		if !br.GetFenced() {
			resp.Brokers = append(resp.Brokers, &twinlogv1.MetadataBroker{Id: br.GetBrokerId(), Host: br.GetHost(), Port: br.GetPort(),
				KafkaHost: br.GetKafkaHost(), KafkaPort: br.GetKafkaPort()})
		}
	}
	if req.GetNoTopics() {
		return resp, nil
	}
	names := req.GetTopics()
	if len(names) == 0 {
		names = img.TopicNames()
	}
	for _, name := range names {
		t := img.Topic(name)
		mt := &twinlogv1.MetadataTopic{Name: name}
		resp.Topics = append(resp.Topics, mt)
		if t == nil {
			mt.Error = ecUnknown
			continue
		}
		mt.TopicId, mt.IsInternal, mt.MirrorName = t.GetTopicId(), t.GetInternal(), t.GetMirrorName()
		mt.MirrorState = img.MirrorTopicState(name)
		for i := int32(0); i < t.GetPartitionCount(); i++ {
			pr := img.Partition(name, i)
			if pr == nil {
				mt.Partitions = append(mt.Partitions, &twinlogv1.MetadataPartition{Index: i, Error: ecUnknown, LeaderId: -1})
				continue
			}
			leader := pr.GetLeader()
			if leader >= 0 && !img.Alive(leader) {
				leader = -1
			}
			mt.Partitions = append(mt.Partitions, &twinlogv1.MetadataPartition{
				Index: i, LeaderId: leader, LeaderEpoch: pr.GetLeaderEpoch(),
				Replicas: append([]int32(nil), pr.GetReplicas()...), Isr: append([]int32(nil), pr.GetIsr()...),
			})
		}
	}
	return resp, nil
}
