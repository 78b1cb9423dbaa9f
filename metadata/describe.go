package metadata

import (
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

const (
	ecInvalid = twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST
	ecUnknown = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
	// ecTopicAuth: the caller may not describe the topic.
	ecTopicAuth = twinlogv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED
)

// DescribeTopicPartitions answers SPEC §5 from the image. serverLimit is the
// broker's max.request.partition.size.limit (≤ 0: the default 1000). Brokers
// call it on their own metadata copy (FromSnapshot + Apply).
func (img *Image) DescribeTopicPartitions(req *twinlogv1.DescribeTopicPartitionsRequest, serverLimit int) *twinlogv1.DescribeTopicPartitionsResponse {
	return img.DescribeTopicPartitionsFor(req, serverLimit, nil)
}

// DescribeTopicPartitionsFor is DescribeTopicPartitions for a caller who
// may describe only the topics describable accepts (nil: every topic), as
// SPEC §5 says: a listed topic the caller may not describe is a
// TOPIC_AUTHORIZATION_FAILED entry whether it exists or not (existence is
// not revealed), and when all topics are asked for the ones it may not
// describe are left out before paging, so the cursor and the limit see
// only the others.
func (img *Image) DescribeTopicPartitionsFor(req *twinlogv1.DescribeTopicPartitionsRequest, serverLimit int, describable func(topic string) bool) *twinlogv1.DescribeTopicPartitionsResponse {
	if describable == nil {
		describable = func(string) bool { return true }
	}
	if serverLimit <= 0 {
		serverLimit = defaultServerPartitionLimit
	}
	limit := max(min(serverLimit, int(req.GetResponsePartitionLimit())), 1)
	resp := &twinlogv1.DescribeTopicPartitionsResponse{}
	cur := req.GetCursor()
	if cur != nil && cur.GetPartitionIndex() < 0 {
		resp.Error, resp.ErrorMessage = ecInvalid, "cursor partition must be >= 0"
		return resp
	}

	// Selected topics: listed (merged) or all.
	type sel struct {
		all   bool
		parts []int32
	}
	wanted := map[string]*sel{}
	if len(req.GetTopics()) == 0 {
		for n := range img.topics {
			if describable(n) {
				wanted[n] = &sel{all: true}
			}
		}
	} else {
		for _, tt := range req.GetTopics() {
			w := wanted[tt.GetName()]
			if w == nil {
				w = &sel{}
				wanted[tt.GetName()] = w
			}
			if len(tt.GetPartitions()) == 0 {
				w.all = true
			}
			w.parts = append(w.parts, tt.GetPartitions()...)
		}
		if cur != nil && wanted[cur.GetTopicName()] == nil {
			resp.Error, resp.ErrorMessage = ecInvalid, "cursor topic is not in the request"
			return resp
		}
	}
	var names []string
	for n := range wanted {
		if cur == nil || n >= cur.GetTopicName() {
			names = append(names, n)
		}
	}
	slices.Sort(names) // Go string order is byte-wise.

	count := 0
	for _, name := range names {
		tr := img.topics[name]
		if count == limit {
			// The limit ran out exactly at the previous topic's end.
			resp.NextCursor = &twinlogv1.Cursor{TopicName: name, PartitionIndex: 0}
			break
		}
		if !describable(name) {
			resp.Topics = append(resp.Topics, &twinlogv1.DescribeTopicPartitionsTopicResult{Error: ecTopicAuth, Name: name})
			continue
		}
		if tr == nil {
			resp.Topics = append(resp.Topics, &twinlogv1.DescribeTopicPartitionsTopicResult{Error: ecUnknown, Name: name})
			continue
		}
		w := wanted[name]
		var parts []int32
		if w.all {
			for i := range tr.GetPartitionCount() {
				parts = append(parts, i)
			}
		} else {
			parts = slices.Clone(w.parts)
			slices.Sort(parts)
			parts = slices.Compact(parts)
		}
		if cur != nil && name == cur.GetTopicName() {
			parts = slices.DeleteFunc(parts, func(i int32) bool { return i < cur.GetPartitionIndex() })
		}
		res := &twinlogv1.DescribeTopicPartitionsTopicResult{Name: name, TopicId: tr.GetTopicId(), IsInternal: tr.GetInternal(), MirrorName: tr.GetMirrorName()}
		resp.Topics = append(resp.Topics, res)
		for _, i := range parts {
			if count == limit {
				resp.NextCursor = &twinlogv1.Cursor{TopicName: name, PartitionIndex: i}
				break
			}
			count++
			res.Partitions = append(res.Partitions, img.describePartition(name, i))
		}
		if resp.NextCursor != nil {
			break
		}
	}
	if resp.NextCursor != nil {
		resp.Error = twinlogv1.ErrorCode_ERROR_CODE_REQUEST_LIMIT_REACHED
	}
	return resp
}

func (img *Image) describePartition(topic string, i int32) *twinlogv1.DescribeTopicPartitionsPartition {
	p := img.Partition(topic, i)
	if p == nil {
		return &twinlogv1.DescribeTopicPartitionsPartition{Error: ecUnknown, PartitionIndex: i, LeaderId: noBroker}
	}
	out := &twinlogv1.DescribeTopicPartitionsPartition{
		PartitionIndex: i, LeaderId: p.GetLeader(), LeaderEpoch: p.GetLeaderEpoch(),
		Replicas: slices.Clone(p.GetReplicas()), Isr: slices.Clone(p.GetIsr()),
		EligibleLeaderReplicas: slices.Clone(p.GetElr()), LastKnownElr: slices.Clone(p.GetLastKnownElr()),
	}
	if !img.Alive(p.GetLeader()) {
		out.LeaderId = noBroker
	}
	for _, b := range p.GetReplicas() {
		br := img.brokers[b]
		if br == nil || br.GetFenced() || len(br.GetOfflineLogDirs()) > 0 {
			out.OfflineReplicas = append(out.OfflineReplicas, b)
		}
	}
	return out
}
