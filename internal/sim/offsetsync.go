package sim

import (
	"context"
	"iter"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/coord"
	"github.com/twinlog/twinlog/broker/groupsvc"
	"github.com/twinlog/twinlog/broker/serve"
	"github.com/twinlog/twinlog/group"
	"github.com/twinlog/twinlog/internal/rpcopt"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/storage/epoch"
)

// A mirror's offset sync in the two-cluster simulator (issue 16; with
// Config.Groups): the destination's controller runs the shipped
// controller.SyncOffsets (controller/offsetsync.go, mirror/offsetsync's
// rules) as a coroutine (iter.Pull). Every call it makes through its
// connections (Deps.Dial: simConn) and every wait between a coordinator's
// attempts (Deps.Sleep) suspends it; the simulator carries the call over
// the cluster's or the cross-cluster network to the broker it addresses,
// whose authorizer admits it (as the controller's principal) and whose
// shipped handlers answer — broker/groupsvc over the broker's coordinator
// host, broker/serve's ListOffsets and OffsetForLeaderEpoch, the image's
// Metadata — and resumes the coroutine with the answer, or without one at
// the call's timeout. The destination syncs every offsetSyncEveryMs while
// it mirrors, and once more before each failover stops the topic (as
// StopMirrorTopics does; the catch-up wait before it is the world's).
//
// Consumers follow the writable cluster: the groups' members run on the
// source while it is mirrored, stop while a planned failover drains, and
// after a failover the destination's members (the same group ids) start
// afresh there: find the coordinator, join, fetch the synced offsets.
//
// The checks, beside each cluster's "never backwards" (groups.go), where a
// sync's commit is the group's new offset (a reset: from its
// acknowledgement, or from the first answer that shows it when the
// acknowledgement was lost):
//   - a commit the sync makes is never above what the source's members
//     ever sent for the partition (it invents no offset), nor above the HW
//     the destination's leader answered in that sync (issue 16: never
//     beyond what the destination partition holds);
//   - the sync's reads of the source (FetchOffsets) are never below the
//     source's acknowledged commits (the source's own check);
//   - when a sync ends, every group whose commit the destination
//     acknowledged holds there exactly what the source answered, clamped
//     to the destination's HW (checkSynced): after a failover's last sync,
//     a group resumes on the destination where it committed on the source;
//   - a commit of the sync's truncation pass (controller fixTruncated,
//     every commit after its first OffsetForLeaderEpoch) below the group's
//     acknowledged offset there is explained by a recorded truncation
//     (checkTruncationMove); it is counted (GroupReport.TruncationMoves)
//     and is a reset from then on;
//   - when a sync that started after the destination's latest truncation
//     point completes (offsetsSettled), no group without members there
//     holds a commit the pass had to move and whose record is gone
//     (checkLeftInTruncated: "committed offset left in truncated
//     history").

// offsetSyncEveryMs is mirror.offset.sync.interval.ms in the simulator;
// the sync timeouts are the periodic sync's, a planned failover's last
// sync's (catch-up waited for) and a disaster failover's (the source may
// be gone), scaled like the controller's (finalOffsetSyncTimeout,
// disasterOffsetSyncTimeout).
const (
	offsetSyncEveryMs     = 1000
	offsetSyncTimeoutMs   = 3000
	finalSyncTimeoutMs    = 5000
	disasterSyncTimeoutMs = 1500
)

// syncCall is one suspension of a sync: a call to addr, or a sleep.
type syncCall struct {
	addr, method string
	req          proto.Message
	sleep        time.Duration
	// resp and err are the answer the coroutine resumes with; at and le
	// the cluster that answered and, for a group's call, the leader epoch
	// of its coordinator there.
	resp proto.Message
	err  error
	at   *Sim
	le   int32
}

type syncRunKey struct{}

// syncRun is one SyncOffsets in progress on a controller incarnation.
type syncRun struct {
	c       *controller
	inc     int
	final   bool
	startMs int64
	ctx     context.Context
	cancel  context.CancelFunc
	yield   func(*syncCall) bool
	next    func() (*syncCall, bool)
	stop    func()
	status  *pb.MirrorOffsetSyncStatus
	done    func(*syncRun)
	// abandoned hears that the controller stopped during the run.
	abandoned func()
	// What the controller was answered, for the checks: the destination
	// leaders' HWs and consumer epoch ends (every one answered) by
	// partition of t; by group,
	// the source's offsets, the leader epoch of the destination
	// coordinator that answered its offsets, whether the destination
	// acknowledged the copy's commit in full.
	hw        map[int32]int64
	ends      map[int32]map[int64]bool
	srcOffset map[string]map[int32]int64
	destRead  map[string]int32
	commitOK  map[string]bool
	// fixing: the sync asked an OffsetForLeaderEpoch of the destination,
	// so its truncation pass runs (every later commit is the pass's);
	// moved are the pass's commits the destination acknowledged, by
	// group and partition; fixSent and fixAcked the groups the pass
	// committed to, and those whose commit it saw acknowledged in full.
	fixing            bool
	moved             map[string]map[int32]int64
	fixSent, fixAcked map[string]bool
	// destMembers is, by group, how many members the destination's last
	// DescribeGroups answer of the run showed (the truncation pass's view:
	// it leaves a group with members to them).
	destMembers map[string]int
	// curGroup is the group whose offsets the run last asked the
	// destination for; passEnds the destination leaders' answers to the
	// truncation pass's OffsetForLeaderEpoch, by that group and partition
	// (the pass asks for a group right after reading its offsets).
	curGroup string
	passEnds map[string]map[int32]int64
	// passRan: the run's truncation pass ran (it lists the destination's
	// groups; the copy lists the source's); passRead is what the pass
	// read of each group's offsets there (after the copy's commits),
	// passReadLE the leader epoch of the coordinator that answered, and
	// passReadN the cluster's group event count then (nextGroupEvent: the
	// sync commits that reached the destination since are later).
	passRan    bool
	passRead   map[string]map[int32]committed
	passReadLE map[string]int32
	passReadN  map[string]uint64
}

// committed is a committed offset and its leader epoch.
type committed struct {
	offset int64
	epoch  int32
}

// startSync runs one offset sync on c unless one runs; done hears its end
// (not an abandoned one's).
func (c *controller) startSync(final bool, timeoutMs int64, done func(*syncRun)) bool {
	if c.sync != nil {
		return false
	}
	s := c.s
	run := &syncRun{c: c, inc: c.inc, final: final, startMs: s.now, done: done, hw: map[int32]int64{}, ends: map[int32]map[int64]bool{},
		srcOffset: map[string]map[int32]int64{}, destRead: map[string]int32{}, commitOK: map[string]bool{}, moved: map[string]map[int32]int64{},
		fixSent: map[string]bool{}, fixAcked: map[string]bool{}, destMembers: map[string]int{}, passEnds: map[string]map[int32]int64{},
		passRead: map[string]map[int32]committed{}, passReadLE: map[string]int32{}, passReadN: map[string]uint64{}}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), syncRunKey{}, run))
	run.ctx, run.cancel = ctx, cancel
	shell := c.shell
	run.next, run.stop = iter.Pull(func(yield func(*syncCall) bool) {
		run.yield = yield
		run.status = shell.SyncOffsets(run.ctx, mirrorName)
	})
	c.sync = run
	s.report.OffsetSyncs++
	s.tracef("ctl offset sync starts (final %t)", final)
	s.after(timeoutMs, cancel)
	run.resume()
	return true
}

func (run *syncRun) live() bool { return run.c.sync == run && run.c.inc == run.inc }

// resume runs the coroutine to its next suspension and sends it on.
func (run *syncRun) resume() {
	c := run.c
	s := c.s
	call, ok := run.next()
	if !ok {
		c.sync = nil
		st := run.status
		s.tracef("ctl offset sync done: %d groups, %d committed, %d clamped, %d active here, err %q",
			st.GetGroups(), st.GetOffsetsCommitted(), st.GetOffsetsClamped(), st.GetGroupsActiveOnDestination(), st.GetError())
		if st.GetError() == "" {
			s.report.OffsetSyncsComplete++
			s.w.syncedFrom[s] = run.startMs
		}
		s.w.checkSynced(run)
		if s.failed {
			return
		}
		if st.GetError() == "" {
			s.w.checkLeftInTruncated(run)
			if s.failed {
				return
			}
		}
		if run.done != nil {
			run.done(run)
		}
		return
	}
	again := func() {
		if run.live() {
			run.resume()
		}
	}
	if call.sleep > 0 {
		s.after(max(call.sleep.Milliseconds(), 1), again)
		return
	}
	s.w.controllerCall(run, call, again)
}

// abandon ends the run of a controller incarnation that stopped: its
// coroutine finishes at once (every call fails) and nobody hears of it.
func (run *syncRun) abandon() {
	run.cancel()
	run.done = nil
	run.stop()
	if run.abandoned != nil {
		run.abandoned()
	}
}

// simConn is a controller's connection to addr over the simulator's
// networks: a call suspends the sync that makes it.
type simConn struct{ addr string }

var _ rpcopt.Conn = simConn{}

func (simConn) Close() error { return nil }

func (simConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "the simulator carries unary calls only")
}

func (sc simConn) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	run, _ := ctx.Value(syncRunKey{}).(*syncRun)
	if run == nil {
		return status.Errorf(codes.Internal, "sim: %s outside an offset sync", method)
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	call := &syncCall{addr: sc.addr, method: method, req: args.(proto.Message)}
	if !run.yield(call) {
		return status.Error(codes.Canceled, "sim: the controller stopped")
	}
	if call.err != nil {
		return call.err
	}
	proto.Merge(reply.(proto.Message), call.resp)
	return nil
}

// syncSleep is the controller's Deps.Sleep: the sync waits on the
// simulator's clock.
func syncSleep(ctx context.Context, d time.Duration) bool {
	run, _ := ctx.Value(syncRunKey{}).(*syncRun)
	if run == nil || ctx.Err() != nil {
		return false
	}
	if !run.yield(&syncCall{sleep: d}) {
		return false
	}
	return ctx.Err() == nil
}

// addressed is the cluster and broker addr names ("<cluster>:<9092+id>"),
// or the cluster alone when addr is its id (a mirror's bootstrap).
func (w *world) addressed(addr string) (*Sim, *simBroker) {
	for _, s := range []*Sim{w.a, w.b} {
		if addr == s.clusterID {
			return s, nil
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return nil, nil
	}
	for _, s := range []*Sim{w.a, w.b} {
		if host == s.clusterID && n-9092 >= 1 && n-9092 <= len(s.brokers) {
			return s, s.brokers[n-9093]
		}
	}
	return nil, nil
}

// controllerCall carries run's call from its controller to the broker it
// addresses and the answer back; resume runs once the answer or the
// call's timeout is there.
func (w *world) controllerCall(run *syncRun, call *syncCall, resume func()) {
	s := run.c.s
	reply := s.once(s.cfg.RPCTimeoutMs, func() {
		call.err = status.Error(codes.DeadlineExceeded, "sim: no answer")
		resume()
	})
	to, b := w.addressed(call.addr)
	if to != nil && b == nil {
		b = to.pickBrokerW(w)
	}
	if b == nil {
		return // nobody answers: the call times out
	}
	kind := "sync-" + call.method[strings.LastIndexByte(call.method, '/')+1:]
	back := func(resp proto.Message, err error) {
		deliver := func() {
			reply(func() {
				call.resp, call.err, call.at = resp, err, to
				if err == nil {
					w.delivered(run, call)
				}
				resume()
			})
		}
		if to == s {
			s.net.send(b.node(), controllerNode, kind+"-resp", deliver)
		} else {
			w.xsend(s, controllerNode, kind+"-resp", deliver)
		}
	}
	principal := s.controllerPrincipal()
	if call.method == pb.FetchService_OffsetForLeaderEpoch_FullMethodName && to == s {
		run.fixing = true
	}
	if r, ok := call.req.(*pb.FetchOffsetsRequest); ok && to == s {
		run.curGroup = r.GetGroupId()
	}
	if call.method == pb.GroupService_ListGroups_FullMethodName && to == s && !run.passRan {
		// The pass runs in this sync: its answers are the latest (a
		// pass that completes is not run again for the same points,
		// whatever the rest of its sync did).
		run.passRan = true
		w.lastPass[s] = run
	}
	serveIt := func() {
		if r, ok := call.req.(*pb.CommitOffsetsRequest); ok && to == s {
			if run.fixing {
				run.fixSent[r.GetGroupId()] = true
				w.checkTruncationMove(s, r)
				if s.failed {
					return
				}
			}
			s.resetArrives(b, r)
		}
		b.serveCall(principal, call.method, call.req, func(resp proto.Message, err error) {
			if err == nil {
				w.served(run, to, b, call, resp)
			}
			back(resp, err)
		})
	}
	if to == s {
		s.net.send(controllerNode, b.node(), kind, serveIt)
	} else {
		w.xsend(to, b.node(), kind, serveIt)
	}
}

// serveCall answers one call to b as its gRPC server would: the
// authorizer first, then the shipped handler.
func (b *simBroker) serveCall(principal, method string, req proto.Message, reply func(proto.Message, error)) {
	if err := b.admit(principal, method, req); err != nil {
		reply(nil, err)
		return
	}
	svc := b.groupService(principal)
	ctx := context.Background()
	switch method {
	case pb.FetchService_Metadata_FullMethodName:
		resp, err := b.image.Metadata(req.(*pb.MetadataRequest))
		if err == nil {
			resp.ClusterId = b.s.clusterID
		}
		reply(resp, err)
	case pb.FetchService_ListOffsets_FullMethodName:
		reply(serve.ListOffsets(req.(*pb.ListOffsetsRequest), b.target), nil)
	case pb.FetchService_OffsetForLeaderEpoch_FullMethodName:
		reply(serve.OffsetForLeaderEpoch(req.(*pb.OffsetForLeaderEpochRequest), b.target), nil)
	case pb.GroupService_FindCoordinator_FullMethodName:
		reply(svc.FindCoordinator(ctx, req.(*pb.FindCoordinatorRequest)))
	case pb.GroupService_ListGroups_FullMethodName:
		reply(svc.ListGroups(ctx, req.(*pb.ListGroupsRequest)))
	case pb.GroupService_DescribeGroups_FullMethodName:
		reply(svc.DescribeGroups(ctx, req.(*pb.DescribeGroupsRequest)))
	case pb.GroupService_FetchOffsets_FullMethodName:
		reply(svc.FetchOffsets(ctx, req.(*pb.FetchOffsetsRequest)))
	case pb.GroupService_CommitOffsets_FullMethodName:
		g := b.groups
		svc.StartCommitOffsets(req.(*pb.CommitOffsetsRequest), func(resp *pb.CommitOffsetsResponse, err error) {
			if g != nil && g.live() {
				reply(resp, err)
			}
		})
	default:
		b.s.fail("sim", "broker %d: no simulated handler for %s", b.id, method)
	}
}

// groupService is GroupService on b (broker/groups_grpc.go's), deciding
// what principal may see with b's authorizer.
func (b *simBroker) groupService(principal string) groupsvc.Service {
	var h *coord.Host
	if b.groups != nil && b.groups.live() {
		h = b.groups.host
	}
	return groupsvc.Service{Host: h,
		Broker: func(id int32) (string, int32, bool) {
			reg := b.image.Broker(id)
			return reg.GetHost(), reg.GetPort(), reg != nil
		},
		Allowed: func(_ context.Context, n authz.Need) bool { return b.authz.AllowedAs(principal, "", n) },
	}
}

// target is a partition of a Fetch, ListOffsets or OffsetForLeaderEpoch
// as b holds it (broker.fetchTargets, broker.offsetsTarget).
func (b *simBroker) target(tp twinlog.TopicPartition) serve.Target {
	p := b.parts[tp]
	if !b.up || !b.registered || p == nil {
		return serve.Target{Error: pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, LeaderID: -1}
	}
	return serve.Target{P: servedPart{p}}
}

// served is where the checks watch a sync's call answered, at the broker
// b (in cluster at) that answers it: the source's reads against its
// acknowledged commits, the destination's acknowledgements of the sync's
// commits against what the source sent and the HW the sync was answered.
func (w *world) served(run *syncRun, at *Sim, b *simBroker, call *syncCall, resp proto.Message) {
	dst := run.c.s
	src := w.other(dst)
	switch r := resp.(type) {
	case *pb.OffsetForLeaderEpochResponse:
		for _, p := range r.GetPartitions() {
			if p.GetTopic() == "t" && p.GetError() == pb.ErrorCode_ERROR_CODE_NONE && at == dst {
				// One answer per group asked (their commits' epochs
				// differ): every end answered for the partition.
				if run.ends[p.GetPartition()] == nil {
					run.ends[p.GetPartition()] = map[int64]bool{}
				}
				run.ends[p.GetPartition()][p.GetEndOffset()] = true
			}
		}
	case *pb.FetchOffsetsResponse:
		id := call.req.(*pb.FetchOffsetsRequest).GetGroupId()
		g := at.groupByID(id)
		if g == nil || b.groups == nil || r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			return
		}
		_, call.le = b.groups.coordinatorEpoch(id)
		if at != src {
			return
		}
		for _, o := range r.GetOffsets() {
			if o.GetTopic() == "t" && o.GetError() == pb.ErrorCode_ERROR_CODE_NONE {
				at.checkCommitted(g, o.GetPartition(), o.GetOffset(), g.acked, call.le, "the offset sync's FetchOffsets")
			}
		}
	case *pb.CommitOffsetsResponse:
		req := call.req.(*pb.CommitOffsetsRequest)
		dg, sg := at.groupByID(req.GetGroupId()), src.groupByID(req.GetGroupId())
		if at != dst || dg == nil || b.groups == nil {
			return // b stopped: its coordinators' parked requests are refused
		}
		cp, le := b.groups.coordinatorEpoch(dg.id)
		for _, o := range r.GetResults() {
			if o.GetTopic() != "t" || o.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
				continue
			}
			p, off := o.GetPartition(), o.GetOffset()
			w.rep.Checks["offset sync commit within source and destination HW"]++
			if run.ends[p][off] && run.fixing {
				// fixTruncated's move out of truncated history: checked when
				// it reached the coordinator (checkTruncationMove), a reset
				// for the reads that follow.
				dst.report.Groups.TruncationMoves++
				if a, ok := dg.acked[p]; ok && off < a.offset {
					dst.report.Groups.TruncationMovesBack++
				}
				if run.moved[dg.id] == nil {
					run.moved[dg.id] = map[int32]int64{}
				}
				run.moved[dg.id][p] = off
				if run.final {
					w.rep.Checks["offset sync truncation move in a failover's last sync"]++
				}
			} else {
				var sent int64
				ok := false
				if sg != nil {
					sent, ok = sg.sent[p]
				}
				hw, hwOK := run.hw[p]
				switch {
				case !ok || off > sent:
					dst.fail("offset sync invented an offset", "%s t-%d: the sync committed %d on %s; %s's members never sent more than %d (sent %t)",
						dg.id, p, off, dst.clusterID, src.clusterID, sent, ok)
					return
				case !hwOK || off > hw:
					dst.fail("offset sync beyond the destination's HW", "%s t-%d: the sync committed %d on %s; its leaders answered HW %d (answered %t)",
						dg.id, p, off, dst.clusterID, hw, hwOK)
					return
				}
			}
			epoch := int32(-1)
			for _, c := range req.GetOffsets() {
				if c.GetTopic() == "t" && c.GetPartition() == p {
					epoch = c.GetLeaderEpoch()
				}
			}
			dst.syncAck(dg, p, off, epoch, cp, le)
		}
	}
}

// delivered records what the controller was answered (the sync decides on
// these answers only).
func (w *world) delivered(run *syncRun, call *syncCall) {
	dst := run.c.s
	switch r := call.resp.(type) {
	case *pb.ListOffsetsResponse:
		for _, t := range r.GetTopics() {
			for _, p := range t.GetPartitions() {
				if t.GetName() == "t" && p.GetError() == pb.ErrorCode_ERROR_CODE_NONE && call.at == dst {
					run.hw[p.GetIndex()] = max(run.hw[p.GetIndex()], p.GetOffset())
				}
			}
		}
	case *pb.FetchOffsetsResponse:
		id := call.req.(*pb.FetchOffsetsRequest).GetGroupId()
		if r.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			return
		}
		if call.at != dst {
			got := map[int32]int64{}
			for _, o := range r.GetOffsets() {
				if o.GetTopic() == "t" && o.GetError() == pb.ErrorCode_ERROR_CODE_NONE && o.GetOffset() >= 0 {
					got[o.GetPartition()] = o.GetOffset()
				}
			}
			run.srcOffset[id] = got
			return
		}
		run.destRead[id] = call.le
		if run.passRan {
			got := map[int32]committed{}
			for _, o := range r.GetOffsets() {
				if o.GetTopic() == "t" && o.GetError() == pb.ErrorCode_ERROR_CODE_NONE {
					got[o.GetPartition()] = committed{o.GetOffset(), o.GetLeaderEpoch()}
				}
			}
			run.passRead[id], run.passReadLE[id], run.passReadN[id] = got, call.le, dst.groupEvents
		}
	case *pb.OffsetForLeaderEpochResponse:
		if call.at != dst {
			return
		}
		for _, p := range r.GetPartitions() {
			if p.GetTopic() == "t" && p.GetError() == pb.ErrorCode_ERROR_CODE_NONE {
				if run.passEnds[run.curGroup] == nil {
					run.passEnds[run.curGroup] = map[int32]int64{}
				}
				run.passEnds[run.curGroup][p.GetPartition()] = p.GetEndOffset()
			}
		}
	case *pb.DescribeGroupsResponse:
		if call.at != dst {
			return
		}
		for _, g := range r.GetGroups() {
			if g.GetError() == pb.ErrorCode_ERROR_CODE_NONE {
				run.destMembers[g.GetGroupId()] = len(g.GetMembers())
			}
		}
	case *pb.CommitOffsetsResponse:
		id := call.req.(*pb.CommitOffsetsRequest).GetGroupId()
		ok := call.at == dst
		for _, o := range r.GetResults() {
			ok = ok && o.GetError() == pb.ErrorCode_ERROR_CODE_NONE
		}
		if run.fixing {
			run.fixAcked[id] = ok
		} else {
			run.commitOK[id] = ok
		}
	}
}

// syncAck records a commit of the offset sync that dst's coordinator
// acknowledged: the group's offset from then on, even below the members'
// (a reset, as an administrator's).
func (s *Sim) syncAck(g *simGroup, p int32, off int64, epoch, cp, le int32) {
	s.report.Groups.SyncAcks++
	g.acked[p] = commitAck{offset: off, epoch: epoch, seq: s.hist.Seq(), n: s.nextGroupEvent(), cp: cp, le: le, m: s.offsetsMinISR()}
	s.tracef("%s t-%d: the offset sync's commit of %d acknowledged", g.id, p, off)
}

// truncPoint is a truncation point a BumpLeaderEpoch installed on a
// partition of a cluster (recordTruncationPoint): LE le cut the log at
// offset, at history position seq.
type truncPoint struct {
	le     int32
	offset int64
	seq    uint64
}

// checkTruncationMove checks the commits of the offset sync's truncation
// pass (controller fixTruncated) reaching d's coordinators: one below the
// group's acknowledged offset a must be explained by a recorded
// truncation, either
//   - a truncation point of the partition recorded on d that cut the log
//     below a (the commit pointed past the cut) and not below the move:
//     the pass moves to the cut even a commit whose record is there again
//     (replica.ConsumerEndOffsetFor cannot tell the records of the commit's
//     epoch from those the cut removed: a re-read, never a skip), or
//   - d's leader no longer holds the record a names (offset a-1 in a's
//     leader epoch), and a truncation point recorded on d below a, or a
//     truncation recorded on either cluster (a truncation point or an
//     unclean election; both number their epochs alike) that installed a
//     leader epoch above a's, accounts for it (a commit made before the
//     cut, or copied from the other cluster's history).
//
// Without either the pass moved a group back over records the log still
// holds, or for no truncation at all. The pass may have read, instead of
// a, a commit the offset sync sent after it whose acknowledgement was lost
// (g.resets, as resetExplains): a move explained from one of those is
// explained too (seed 14000136: the copy of a source commit into the
// source's replaced history, moved to the log's start).
func (w *world) checkTruncationMove(d *Sim, r *pb.CommitOffsetsRequest) {
	g := d.groupByID(r.GetGroupId())
	if g == nil {
		return
	}
	for _, o := range r.GetOffsets() {
		if o.GetTopic() != "t" {
			continue
		}
		p, off := o.GetPartition(), o.GetOffset()
		a, ok := g.acked[p]
		if !ok || off >= a.offset {
			continue
		}
		tp := twinlog.TopicPartition{Topic: "t", Partition: p}
		key := tp.String()
		from := a
		why := w.truncationExplains(d, tp, a, off)
		for _, rs := range g.resets[p] {
			if why != "" {
				break
			}
			if rs.n > a.n && off < rs.offset {
				if why = w.truncationExplains(d, tp, rs, off); why != "" {
					from, why = rs, why+" (an unacknowledged sync commit)"
				}
			}
		}
		if why == "" {
			var epochs []epoch.Entry
			if lp := d.leaderPart(tp); lp != nil {
				epochs = lp.r.EpochEntries()
			}
			d.fail("offset sync moved an offset back without a truncation", "%s t-%d: the truncation pass commits %d (LE %d) on %s; %d (LE %d) was acknowledged and no truncation explains it (truncation points there %v; the leader's epochs %v)",
				g.id, p, off, o.GetLeaderEpoch(), d.clusterID, a.offset, a.epoch, w.truncPoints[d][key], epochs)
			return
		}
		w.rep.Checks["offset sync truncation move: "+why]++
		d.tracef("%s t-%d: the truncation pass moves %d (LE %d) back to %d (LE %d): %s", g.id, p, from.offset, from.epoch, off, o.GetLeaderEpoch(), why)
	}
}

// truncationExplains is why a recorded truncation explains the pass's
// move of commit a of tp on d back to off (checkTruncationMove), "" when
// none does.
func (w *world) truncationExplains(d *Sim, tp twinlog.TopicPartition, a commitAck, off int64) string {
	key := tp.String()
	for _, pt := range w.truncPoints[d][key] {
		if off <= pt.offset && pt.offset < a.offset {
			if pt.seq > a.seq {
				return "truncated after the commit"
			}
			return "truncated before the commit"
		}
	}
	// The leader's log, even before it runs in the controller's newest
	// LE (a bump with a truncation point in flight, seed 14101415): it
	// answers the pass from its log as it is.
	lp := d.leadingPart(tp)
	if last := twinlog.Offset(a.offset - 1); a.epoch >= 0 && lp != nil &&
		(last >= lp.r.LogEndOffset() || lp.log.Epochs().EpochForOffset(last) != twinlog.Epoch(a.epoch)) {
		switch {
		case slices.ContainsFunc(w.truncPoints[d][key], func(pt truncPoint) bool { return pt.offset < a.offset }):
			return "record cut by a truncation point"
		case d.hist.TruncatedAbove(key, a.epoch) || w.other(d).hist.TruncatedAbove(key, a.epoch):
			return "record of another history"
		}
	}
	return ""
}

// resetArrives records a commit of the offset sync reaching broker b's
// coordinators: what a coordinator may hold from now on (sent), even if
// its acknowledgement never comes (an append whose outcome is unknown may
// be in the log).
func (s *Sim) resetArrives(b *simBroker, r *pb.CommitOffsetsRequest) {
	g := s.groupByID(r.GetGroupId())
	if g == nil {
		return
	}
	cp, le := int32(-1), int32(-1)
	if b.groups != nil {
		cp, le = b.groups.coordinatorEpoch(g.id)
	}
	for _, o := range r.GetOffsets() {
		if o.GetTopic() != "t" {
			continue
		}
		p := o.GetPartition()
		g.sent[p] = max(g.sent[p], o.GetOffset())
		g.resets[p] = append(g.resets[p], commitAck{offset: o.GetOffset(), epoch: o.GetLeaderEpoch(), seq: s.hist.Seq(), n: s.nextGroupEvent(), cp: cp, le: le, m: 1})
	}
}

// resetExplains: an answer off below acknowledged commit a is a reset the
// offset sync sent after a (its acknowledgement lost); the group's offset
// is that reset's from then on.
func (s *Sim) resetExplains(g *simGroup, p int32, off int64, a commitAck) bool {
	for _, r := range g.resets[p] {
		if r.n > a.n && r.offset == off {
			if cur, ok := g.acked[p]; !ok || cur.n < r.n {
				g.acked[p] = r
			}
			return true
		}
	}
	return false
}

// nextGroupEvent numbers the cluster's commit acknowledgements and the
// sync's resets in the order they happen.
func (s *Sim) nextGroupEvent() uint64 {
	s.groupEvents++
	return s.groupEvents
}

func (s *Sim) groupByID(id string) *simGroup {
	for _, g := range s.groups {
		if g.id == id {
			return g
		}
	}
	return nil
}

// ---- the world's side ----

// consumersOn is the cluster the groups' members use now: the source while
// it is mirrored, none while a planned failover drains, the destination
// once it took over.
func (w *world) consumersOn() *Sim {
	switch w.phase {
	case phaseMirroring:
		return w.src
	case phaseFailedOver:
		return w.dst
	}
	return nil
}

// stepGroups starts the members of the cluster that became the consumers'
// afresh, and runs the destination's periodic offset sync.
func (w *world) stepGroups() {
	if w.cfg.Groups <= 0 {
		return
	}
	if on := w.consumersOn(); on != w.groupsOn {
		w.groupsOn = on
		if on != nil {
			on.tracef("consumers move to %s", on.clusterID)
			for _, g := range on.groups {
				for _, m := range g.members {
					m.memberID, m.assigned, m.state, m.stable = "", nil, memberFind, false
					m.forgetPositions()
				}
			}
		}
	}
	if w.phase == phaseMirroring && w.pending == nil && w.now() >= w.nextSync && w.dst.ctl.image.Mirror(mirrorName) != nil {
		if w.dst.ctl.startSync(false, offsetSyncTimeoutMs, nil) {
			w.nextSync = w.now() + offsetSyncEveryMs
		}
	}
}

// offsetsSettled: with groups, the destination completed an offset sync
// that started after its latest truncation point, so its truncation pass
// has seen every point (healing waits for it: the pass's moves are
// checked, and the run's final state includes them).
func (w *world) offsetsSettled() bool {
	if w.cfg.Groups <= 0 {
		return true
	}
	at, ok := w.truncatedAt[w.dst]
	return !ok || w.syncedFrom[w.dst] > at
}

// pendingFailover is a failover waiting for its last offset sync.
type pendingFailover struct{ planned bool }

// beginFailover runs the destination's last offset sync, then the
// failover (StopMirrorTopics' order); without groups, the failover at once.
func (w *world) beginFailover(planned bool) {
	if w.cfg.Groups <= 0 {
		w.failover(planned)
		return
	}
	if w.pending != nil {
		return
	}
	d := w.dst
	timeout := int64(disasterSyncTimeoutMs)
	if planned {
		timeout = finalSyncTimeoutMs
	}
	pf := &pendingFailover{planned: planned}
	w.pending = pf // before the start: a sync may end within it
	if !d.ctl.startSync(true, timeout, func(*syncRun) { w.finishFailover(pf) }) {
		w.pending = nil // a periodic sync still runs: the next step tries again
		return
	}
	if run := d.ctl.sync; run != nil && w.pending == pf {
		// A controller that stops fails the stop: the operator asks again.
		run.abandoned = func() {
			if w.pending == pf {
				w.pending = nil
			}
		}
	}
}

func (w *world) finishFailover(pf *pendingFailover) {
	if w.pending != pf {
		return // healing dropped it
	}
	w.pending = nil
	w.failover(pf.planned)
}

// checkSynced: when a sync ends, each group whose commit the destination
// acknowledged in full holds there what the source answered, clamped to
// the destination's HW, on every partition the sync knew the HW of (those
// it did not commit were equal already): after a failover's last sync, a
// group resumes where it committed. Where the sync's truncation pass then
// moved the group (its commit acknowledged; checkTruncationMove explained
// it), the group holds the pass's offset instead: the pass runs after the
// copy from the source and may move the copied offset itself (a consumer
// re-reads from the truncation point, replica.ConsumerEndOffsetFor); a
// group whose pass commit was not seen acknowledged is left. A
// destination read from a coordinator in an older leader epoch than the
// one leading now (deposed: the partitions it called equal may not be),
// or a loss a recorded truncation or lossy shutdowns explain, is counted,
// not failed.
func (w *world) checkSynced(run *syncRun) {
	d := run.c.s
	for _, id := range slices.Sorted(maps.Keys(run.srcOffset)) {
		readLE, read := run.destRead[id]
		if !run.commitOK[id] || !read {
			continue
		}
		if run.fixSent[id] && !run.fixAcked[id] {
			// The pass's commit may or may not be there.
			w.rep.Checks["group resume check: truncation pass outcome unknown"]++
			continue
		}
		g := d.groupByID(id)
		if g == nil {
			continue
		}
		_, r, le := d.committedNow(id)
		if r == nil {
			continue
		}
		if readLE < le {
			w.rep.Checks["group resume check: stale destination read"]++
			continue
		}
		got := map[int32]int64{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if t.Name == "t" {
					got[p.Partition] = p.Offset
				}
			}
		}
		for _, p := range slices.Sorted(maps.Keys(run.srcOffset[id])) {
			hw, ok := run.hw[p]
			if !ok {
				continue
			}
			want := min(run.srcOffset[id][p], hw)
			if mv, ok := run.moved[id][p]; ok {
				want = mv
				w.rep.Checks["group resumes at the truncation pass's move"]++
			}
			w.rep.Checks["group resumes where it committed"]++
			if got[p] == want {
				continue
			}
			if a, ok := g.acked[p]; ok && d.excused(a) {
				w.rep.Checks["group resume check: excused loss"]++
				continue
			}
			d.fail("group does not resume where it committed", "%s t-%d: after the offset sync (final %t), %s holds %d; %s answered %d, %s's HW was %d",
				id, p, run.final, d.clusterID, got[p], w.other(d).clusterID, run.srcOffset[id][p], d.clusterID, hw)
			return
		}
	}
}

// checkLeftInTruncated: once a complete sync started after the
// destination's latest truncation point (offsetsSettled), the latest
// truncation pass (controller fixTruncated, w.lastPass: it ran in that
// sync or, for the same points, in an earlier one) has seen every point,
// so no group without members there still holds a commit the pass read
// and had to move. A commit (offset o > 0, leader epoch e ≥ 0) of
// partition p must be moved when a truncation point recorded there in a
// later LE than e cut the log below o (replica.ConsumerEndOffsetFor
// answers at most that point for e, and offsetsync.Truncated moves every
// offset above its answer, with or without an epoch); it is left in
// truncated history, a violation, when besides the record it names is
// gone: the leader's log holds no record at o-1, or one of another epoch,
// or another record than the one the committing member read (a record of
// the other cluster's history with the same epoch number; known for the
// members' commits, commitAck.value). A commit whose record is there
// again may be moved (the pass cannot tell: a re-read) or left.
//
// Only commits the pass read and the group still holds, not written
// again since by a later sync's copy (g.resets), are checked: the pass's
// own moves and the copy's later commits (source offsets clamped to the
// HW, whatever their epochs) are not the pass's to move. Skipped, and
// counted: a pass older than the latest point, a group the pass saw with
// members or that has members now (left to them), a pass that read the
// group from a deposed coordinator, a partition without a leader, and a
// commit the coordinator's partition may have lost since (excused). A
// pass that completed without an answer for the partition is a known bug
// of the controller (offset-sync-pass-completes-unanswered).
func (w *world) checkLeftInTruncated(run *syncRun) {
	d := run.c.s
	at, ok := w.truncatedAt[d]
	if !ok || run.startMs <= at {
		return
	}
	pass := w.lastPass[d]
	if pass == nil {
		return // no pass read anything
	}
	if pass.startMs <= at {
		w.rep.Checks["truncated history check: pass before the latest point"]++
		return
	}
	for _, g := range d.groups {
		read, ok := pass.passRead[g.id]
		if !ok {
			continue
		}
		b, r, le := d.committedNow(g.id)
		if r == nil {
			continue
		}
		desc, err := b.groups.host.DescribeGroups(context.Background(), []string{g.id})
		if err != nil || len(desc) != 1 || desc[0].ErrorCode != group.None {
			continue
		}
		if pass.destMembers[g.id] > 0 || len(desc[0].Members) > 0 {
			w.rep.Checks["truncated history check: group with members"]++
			continue
		}
		if pass.passReadLE[g.id] < le {
			w.rep.Checks["truncated history check: stale destination read"]++
			continue
		}
		for _, t := range r.Topics {
			if t.Name != "t" {
				continue
			}
			for _, fp := range t.Partitions {
				if fp.ErrorCode != group.None || read[fp.Partition] != (committed{fp.Offset, fp.LeaderEpoch}) {
					continue // not what the pass read: written since
				}
				if slices.ContainsFunc(g.resets[fp.Partition], func(r commitAck) bool {
					return r.n > pass.passReadN[g.id] && r.offset == fp.Offset && r.epoch == fp.LeaderEpoch
				}) {
					// A later sync's copy wrote the source's offset again.
					w.rep.Checks["truncated history check: copied again since the pass"]++
					continue
				}
				w.checkCommitLeft(d, pass, g, fp.Partition, fp.Offset, fp.LeaderEpoch)
				if d.failed {
					return
				}
			}
		}
	}
}

// checkCommitLeft is checkLeftInTruncated's rule for one commit (o, e)
// that group g holds on d's partition t-p and pass read and left.
func (w *world) checkCommitLeft(d *Sim, pass *syncRun, g *simGroup, p int32, o int64, e int32) {
	if o <= 0 || e < 0 {
		return
	}
	w.rep.Checks["committed offset not left in truncated history"]++
	tp := twinlog.TopicPartition{Topic: "t", Partition: p}
	key := tp.String()
	var cut *truncPoint
	for i, pt := range w.truncPoints[d][key] {
		if pt.le > e && pt.offset < o {
			cut = &w.truncPoints[d][key][i]
			break
		}
	}
	if cut == nil {
		return
	}
	lp := d.leaderPart(tp)
	if lp == nil {
		w.rep.Checks["truncated history check: no leader"]++
		return
	}
	named := ""
	if a, ok := g.acked[p]; ok && a.offset == o && a.epoch == e {
		named = a.value
	}
	rec, held := lp.shadow.at(o - 1)
	if held && rec.epoch == e && (named == "" || rec.value == named) {
		// The record is there again (the mirror copied it anew): the pass
		// may leave it.
		w.rep.Checks["committed offset in truncated history: record there again"]++
		return
	}
	if a, ok := g.acked[p]; ok && (a.offset != o || a.epoch != e) && d.excused(a) {
		w.rep.Checks["truncated history check: excused loss"]++
		return
	}
	if _, ok := pass.passEnds[g.id][p]; !ok {
		// The pass had no answer for the partition (its leader unknown
		// when the sync started, or its OffsetForLeaderEpoch failed:
		// fenced by a newer LE, no answer) and still completed, so the
		// commit is never moved (controller fixTruncated counted such a
		// pass complete until it noted the partitions it could not place,
		// TestOffsetSyncPassNeedsEveryAnswer).
		d.fail("truncation pass completed without an answer", "%s t-%d: %s holds %d (LE %d) in truncated history (cut by %+v); the truncation pass of the sync started at %d had no answer for the partition and completed",
			g.id, p, d.clusterID, o, e, *cut, pass.startMs)
		return
	}
	d.fail("committed offset left in truncated history", "%s t-%d: after a complete offset sync (started at %d, latest truncation point at %d), %s holds %d (LE %d) for the group, without members; truncation point %+v cut the log below it and the leader (broker %d, LE %d, log [%d, %d), epochs %v) holds %+v at %d (held %t), the commit named %q; the truncation pass (sync started at %d) read it, was answered ends %v for the group and left it",
		g.id, p, w.syncedFrom[d], w.truncatedAt[d], d.clusterID, o, e, *cut, lp.b.id, lp.r.LeaderEpoch(), lp.shadow.start, lp.shadow.leo(), lp.r.EpochEntries(), rec, o-1, held, named, pass.startMs, pass.passEnds[g.id])
}
