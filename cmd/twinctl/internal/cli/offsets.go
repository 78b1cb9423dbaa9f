package cli

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// logOffsets is a partition's log start offset, high watermark and log end
// offset as its leader answered them; nil where it did not.
type logOffsets struct {
	start, hw, end *int64
}

// logOffsetSpecs are asked in this order, so that the figures read later
// are never behind the earlier ones (LS ≤ HW ≤ LEO while the log grows).
var logOffsetSpecs = []twinlogv1.OffsetSpec{
	twinlogv1.OffsetSpec_OFFSET_SPEC_EARLIEST,
	twinlogv1.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK,
	twinlogv1.OffsetSpec_OFFSET_SPEC_LATEST,
}

// logOffsets asks each partition's leader (ListOffsets: EARLIEST is the
// log start, HIGH_WATERMARK the high watermark, LATEST the log end) for the
// partitions of ts, all leaders at once. It is best effort, for a describe:
// a partition without a leader, whose leader cannot be reached or answers
// an error (say NOT_LEADER_OR_FOLLOWER after a move) has no figures, shown
// "-"; a note on stderr says why when a leader failed as a whole.
func (a *app) logOffsets(ctx context.Context, ts []topicView) map[topicPart]logOffsets {
	out := map[topicPart]logOffsets{}
	byLeader := map[int32][]topicPart{}
	for _, t := range ts {
		for _, p := range t.Partitions {
			if p.Error == "" && p.Leader >= 0 {
				byLeader[p.Leader] = append(byLeader[p.Leader], topicPart{t.Name, p.Partition})
			}
		}
	}
	if len(byLeader) == 0 {
		return out
	}
	addrs, err := a.brokerAddrs(ctx)
	if err != nil {
		a.note("log offsets unknown (LS, HW, LEO shown as -): %v", err)
		return out
	}
	type leaderCall struct {
		id    int32
		addr  string
		tps   []topicPart
		stub  twinlogv1.FetchServiceClient
		got   map[topicPart]logOffsets
		noted error
	}
	var calls []*leaderCall
	for _, id := range slices.Sorted(maps.Keys(byLeader)) {
		addr, ok := addrs[id]
		if !ok {
			continue // not registered any more: unknown
		}
		cc, err := a.conn(addr)
		if err != nil {
			continue
		}
		calls = append(calls, &leaderCall{id: id, addr: addr, tps: byLeader[id], stub: twinlogv1.NewFetchServiceClient(cc), got: map[topicPart]logOffsets{}})
	}
	// One goroutine per leader: an unreachable one costs one --timeout,
	// not one per leader. Each writes only its own leaderCall.
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			for _, spec := range logOffsetSpecs {
				req := &twinlogv1.ListOffsetsRequest{}
				for _, tp := range c.tps {
					if n := len(req.Topics); n == 0 || req.Topics[n-1].GetName() != tp.topic {
						req.Topics = append(req.Topics, &twinlogv1.ListOffsetsTopic{Name: tp.topic})
					}
					t := req.Topics[len(req.Topics)-1]
					// -1: whatever the leader's epoch; a replica that no
					// longer leads answers NOT_LEADER_OR_FOLLOWER.
					t.Partitions = append(t.Partitions, &twinlogv1.ListOffsetsPartition{Index: tp.partition, CurrentLeaderEpoch: -1, Spec: spec})
				}
				rctx, cancel := a.rpcCtx(ctx)
				resp, err := c.stub.ListOffsets(rctx, req)
				cancel()
				if err != nil {
					c.noted = rpcError(err, c.addr, fmt.Sprintf("list offsets at broker %d", c.id))
					return
				}
				for _, t := range resp.GetTopics() {
					for _, p := range t.GetPartitions() {
						if p.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE || p.GetOffset() < 0 {
							continue
						}
						tp := topicPart{t.GetName(), p.GetIndex()}
						o := c.got[tp]
						v := p.GetOffset()
						switch spec {
						case twinlogv1.OffsetSpec_OFFSET_SPEC_EARLIEST:
							o.start = &v
						case twinlogv1.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK:
							o.hw = &v
						case twinlogv1.OffsetSpec_OFFSET_SPEC_LATEST:
							o.end = &v
						}
						c.got[tp] = o
					}
				}
			}
		})
	}
	wg.Wait()
	for _, c := range calls {
		if c.noted != nil {
			a.note("log offsets of broker %d's partitions unknown: %v", c.id, c.noted)
		}
		for tp, o := range c.got {
			if slices.Contains(c.tps, tp) {
				out[tp] = o
			}
		}
	}
	return out
}

// brokerAddrs maps the registered brokers' ids to their gRPC addresses
// (ListBrokers on --bootstrap, a controller or a broker).
func (a *app) brokerAddrs(ctx context.Context) (map[int32]string, error) {
	client, err := a.admin()
	if err != nil {
		return nil, err
	}
	rctx, cancel := a.rpcCtx(ctx)
	defer cancel()
	resp, err := client.ListBrokers(rctx, &twinlogv1.ListBrokersRequest{})
	if err != nil {
		return nil, rpcError(err, a.bootstrap, "list brokers")
	}
	out := map[int32]string{}
	for _, b := range resp.GetBrokers() {
		out[b.GetBrokerId()] = net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
	}
	return out, nil
}

// note prints a warning that does not fail the command.
func (a *app) note(format string, args ...any) {
	fmt.Fprintf(a.opts.Stderr, "twinctl: note: "+format+"\n", args...)
}
