package plan

import (
	"google.golang.org/protobuf/proto"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

func cloneRun(r *twinlogv1.MirrorRunRecord) *twinlogv1.MirrorRunRecord {
	return proto.Clone(r).(*twinlogv1.MirrorRunRecord)
}

func cloneLmle(r *twinlogv1.MirrorLmleRecord) *twinlogv1.MirrorLmleRecord {
	if r == nil {
		return nil
	}
	return proto.Clone(r).(*twinlogv1.MirrorLmleRecord)
}

func taintsFromProto(ts []*twinlogv1.ReplicaTaint) []Taint {
	out := make([]Taint, 0, len(ts))
	for _, t := range ts {
		out = append(out, Taint{Replica: twinlog.BrokerID(t.GetReplica()), Epoch: twinlog.Epoch(t.GetEpoch()), Offset: twinlog.Offset(t.GetOffset())})
	}
	return out
}

func taintsToProto(ts []Taint) []*twinlogv1.ReplicaTaint {
	out := make([]*twinlogv1.ReplicaTaint, 0, len(ts))
	for _, t := range ts {
		out = append(out, &twinlogv1.ReplicaTaint{Replica: int32(t.Replica), Epoch: int32(t.Epoch), Offset: int64(t.Offset)})
	}
	return out
}

func brokersToInt32(bs []twinlog.BrokerID) []int32 {
	out := make([]int32, 0, len(bs))
	for _, b := range bs {
		out = append(out, int32(b))
	}
	return out
}
