package controller

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/errcode"
	"github.com/twinlog/twinlog/internal/configdef"
	"github.com/twinlog/twinlog/internal/rpcopt"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/mirror/offsetsync"
)

// A mirror's offset sync (issue 16; the rules are mirror/offsetsync's):
// every mirror.offset.sync.interval.ms the controller of the destination
// cluster lists the source's consumer groups (GroupService.ListGroups on
// every source broker), reads the committed offsets of those the filter
// takes from their source coordinators, and writes what Plan decides to
// the groups' coordinators here (an administrator's CommitOffsets, which
// a group with members refuses anyway). StopMirrorTopics runs one more sync
// before the topics become writable, after the catch-up wait when asked,
// so that a group resumes on the destination where it committed on the
// source. Each sync's outcome is kept for DescribeMirrors.

// defaultOffsetSyncInterval is mirror.offset.sync.interval.ms's default.
const defaultOffsetSyncInterval = 30 * time.Second

// finalOffsetSyncTimeout bounds the sync a stop runs before the topics
// become writable, after waiting for the catch-up (a planned failover);
// disasterOffsetSyncTimeout a stop without the wait, which is how a
// failover away from a lost source is made: the source's silence must not
// hold it up long.
const (
	finalOffsetSyncTimeout    = 10 * time.Second
	disasterOffsetSyncTimeout = 3 * time.Second
)

// offsetSyncLoop syncs each mirror's offsets once per interval until ctx
// ends: a mirror is first synced within offsetSyncPoll of its creation (or
// of the controller's start), not an interval later, so a new mirror's
// groups and its metrics do not wait for the interval.
func (c *Controller) offsetSyncLoop(ctx context.Context) {
	last := map[string]time.Time{} // when each mirror's latest sync started
	for {
		c.mu.RLock()
		interval := time.Duration(metadata.ConfigInt(c.state.ClusterConfig(metadata.KeyMirrorOffsetSyncIntervalMs),
			defaultOffsetSyncInterval.Milliseconds())) * time.Millisecond
		mirrors := c.state.MirrorNames()
		c.mu.RUnlock()
		for name := range last {
			if !slices.Contains(mirrors, name) {
				delete(last, name)
			}
		}
		for _, m := range mirrors {
			if at, ok := last[m]; ok && time.Since(at) < interval {
				continue
			}
			last[m] = time.Now()
			rctx, cancel := context.WithTimeout(ctx, max(interval, c.cfg.RecoveryRPCTimeout))
			c.SyncOffsets(rctx, m)
			cancel()
		}
		t := time.NewTimer(min(interval, offsetSyncPoll))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// offsetSyncPoll is how often offsetSyncLoop looks for mirrors due.
const offsetSyncPoll = time.Second

// syncFacts is what a sync needs of this cluster's image.
type syncFacts struct {
	bootstrap []string
	sourceID  string
	filter    offsetsync.Filter
	mirrored  map[string]bool
	// brokers are the unfenced brokers' addresses (FindCoordinator).
	brokers []string
	// leaders are the mirrored partitions by leader address (their HWs).
	leaders map[string][]leaderQuery
	// truncations are the mirrored partitions' truncation points (a
	// failback's truncation to the LMLE among them): only offsets of these
	// partitions can point into truncated history.
	truncations map[twinlog.TopicPartition][]*twinlogv1.TruncationPoint
	// sleep is the controller's wait between a coordinator's attempts.
	sleep func(ctx context.Context, d time.Duration) bool
	err   string
}

// syncImageFacts reads the image for mirror's sync.
func (c *Controller) syncImageFacts(mirror string) syncFacts {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m := c.state.Mirror(mirror)
	if m == nil {
		return syncFacts{err: "unknown mirror"}
	}
	f := syncFacts{bootstrap: m.GetSourceBootstrap(), sourceID: m.GetSourceClusterId(), mirrored: map[string]bool{},
		leaders: map[string][]leaderQuery{}, truncations: map[twinlog.TopicPartition][]*twinlogv1.TruncationPoint{}, sleep: c.sleep}
	var err error
	if f.filter.Include, err = configdef.CompileRegexp(c.state.ClusterConfig(metadata.KeyMirrorOffsetSyncInclude)); err != nil {
		return syncFacts{err: fmt.Sprintf("%s: %v", metadata.KeyMirrorOffsetSyncInclude, err)}
	}
	if f.filter.Exclude, err = configdef.CompileRegexp(c.state.ClusterConfig(metadata.KeyMirrorOffsetSyncExclude)); err != nil {
		return syncFacts{err: fmt.Sprintf("%s: %v", metadata.KeyMirrorOffsetSyncExclude, err)}
	}
	for _, mt := range m.GetTopics() {
		switch mt.GetDesiredState() {
		case twinlogv1.MirrorState_MIRROR_STATE_MIRRORING, twinlogv1.MirrorState_MIRROR_STATE_PAUSED:
		default:
			continue // a stopped topic's offsets are the destination's own
		}
		name := mt.GetTopic()
		tr := c.state.Topic(name)
		if tr == nil || tr.GetMirrorName() != mirror {
			continue
		}
		f.mirrored[name] = true
		for p := range tr.GetPartitionCount() {
			pr := c.state.Partition(name, p)
			if tps := pr.GetTruncationPoints(); len(tps) > 0 {
				f.truncations[twinlog.TopicPartition{Topic: name, Partition: p}] = tps
			}
			br := c.state.Broker(pr.GetLeader())
			if pr == nil || pr.GetLeader() < 0 || br == nil || br.GetFenced() {
				continue // HW unknown: the partition is left this time
			}
			addr := net.JoinHostPort(br.GetHost(), strconv.Itoa(int(br.GetPort())))
			f.leaders[addr] = append(f.leaders[addr], leaderQuery{name: name, index: p, epoch: pr.GetLeaderEpoch()})
		}
	}
	for _, br := range c.state.Brokers() {
		if !br.GetFenced() {
			f.brokers = append(f.brokers, net.JoinHostPort(br.GetHost(), strconv.Itoa(int(br.GetPort()))))
		}
	}
	return f
}

// SyncOffsets runs one offset sync of mirror and records its outcome: the
// periodic loop's, a stop's, and the simulator's (through Deps.Dial and
// Deps.Sleep, on its network and clock).
func (c *Controller) SyncOffsets(ctx context.Context, mirror string) *twinlogv1.MirrorOffsetSyncStatus {
	conns := rpcopt.NewPool(c.dial)
	defer conns.Close()
	st := c.runOffsetSync(ctx, conns, mirror)
	st.SyncedAtMs = c.now().UnixMilli()
	c.mu.Lock()
	// Kept for mirrors that exist only (a stop naming no mirror must not
	// grow the map); a deleted mirror's entry goes with it.
	for name := range c.offsetSync {
		if c.state.Mirror(name) == nil {
			delete(c.offsetSync, name)
		}
	}
	for name := range c.truncFixed {
		if c.state.Mirror(name) == nil {
			delete(c.truncFixed, name)
		}
	}
	exists := c.state.Mirror(mirror) != nil
	if exists {
		c.offsetSync[mirror] = st
	}
	c.mu.Unlock()
	if o, ok := c.obs.(OffsetSyncObserver); ok && exists {
		o.ObserveOffsetSync(mirror, OffsetSyncStats{At: time.UnixMilli(st.GetSyncedAtMs()), Groups: int(st.GetGroups()),
			OffsetsCommitted: int(st.GetOffsetsCommitted()), OffsetsClamped: int(st.GetOffsetsClamped()),
			GroupsActiveOnDestination: int(st.GetGroupsActiveOnDestination()), Failed: st.GetError() != ""})
	}
	if st.GetError() != "" {
		c.log.Info("mirror offset sync incomplete", "mirror", mirror, "groups", st.GetGroups(), "committed", st.GetOffsetsCommitted(), "err", st.GetError())
	} else if st.GetOffsetsCommitted() > 0 {
		c.log.Info("mirror offsets synced", "mirror", mirror, "groups", st.GetGroups(), "committed", st.GetOffsetsCommitted(),
			"clamped", st.GetOffsetsClamped(), "active_on_destination", st.GetGroupsActiveOnDestination())
	}
	return st
}

func (c *Controller) runOffsetSync(ctx context.Context, conns *rpcopt.Pool, mirror string) *twinlogv1.MirrorOffsetSyncStatus {
	st := &twinlogv1.MirrorOffsetSyncStatus{}
	note := func(format string, args ...any) {
		if st.Error == "" {
			st.Error = fmt.Sprintf(format, args...)
		}
	}
	f := c.syncImageFacts(mirror)
	if f.err != "" {
		note("%s", f.err)
		return st
	}
	if len(f.mirrored) == 0 {
		return st // nothing is mirrored any more
	}
	c.syncFromSource(ctx, conns, f, st, note)
	c.fixTruncated(ctx, conns, mirror, f, st, note)
	return st
}

// syncFromSource copies the source groups' offsets the filter takes
// (offsetsync.Plan).
func (c *Controller) syncFromSource(ctx context.Context, conns *rpcopt.Pool, f syncFacts, st *twinlogv1.MirrorOffsetSyncStatus, note func(string, ...any)) {
	if f.filter.Include == nil {
		return
	}
	srcBrokers, err := c.sourceBrokers(ctx, conns, f.bootstrap, f.sourceID)
	if err != nil {
		note("%v", err)
		return
	}
	var groups []string
	for _, id := range listGroups(ctx, conns, srcBrokers, "at source", note) {
		if f.filter.Takes(id) {
			groups = append(groups, id)
		}
	}
	if len(groups) == 0 {
		return
	}
	hws := map[twinlog.TopicPartition]int64{}
	answers := map[string][]hwAnswer{}
	for _, addr := range slices.Sorted(maps.Keys(f.leaders)) { // one order: the simulator replays it
		answers[addr] = askHW(ctx, conns, addr, f.leaders[addr])
	}
	for addr, qs := range f.leaders {
		for i, q := range qs {
			if a := answers[addr][i]; a.Err == "" {
				hws[twinlog.TopicPartition{Topic: q.name, Partition: q.index}] = a.HW
			}
		}
	}
	for _, id := range groups {
		if ctx.Err() != nil {
			note("%v", ctx.Err())
			break
		}
		st.Groups++
		g := offsetsync.Group{ID: id}
		src, err := groupCall(ctx, conns, f.sleep, srcBrokers, id, func(gc twinlogv1.GroupServiceClient) (*twinlogv1.FetchOffsetsResponse, error) {
			return gc.FetchOffsets(ctx, &twinlogv1.FetchOffsetsRequest{GroupId: id})
		})
		if err == nil && src.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
			err = fmt.Errorf("%v %s", src.GetError(), src.GetErrorMessage())
		}
		if err != nil {
			note("group %s at the source: %v", id, err)
			continue
		}
		g.Source = committedOffsets(src.GetOffsets(), f.mirrored)
		if len(g.Source) == 0 {
			continue // nothing of the mirror's topics
		}
		if err := destGroup(ctx, conns, f, &g); err != nil {
			note("group %s here: %v", id, err)
			continue
		}
		commits, skip := offsetsync.Plan(g, f.filter, f.mirrored, hws)
		if skip == offsetsync.ActiveOnDestination {
			st.GroupsActiveOnDestination++
			continue
		}
		if len(commits) == 0 {
			continue
		}
		commitPlan(ctx, conns, f, id, commits, st, note)
	}
}

// destGroup reads group g.ID here: its members and its offsets of the
// mirrored topics.
func destGroup(ctx context.Context, conns *rpcopt.Pool, f syncFacts, g *offsetsync.Group) error {
	id := g.ID
	desc, err := groupCall(ctx, conns, f.sleep, f.brokers, id, func(gc twinlogv1.GroupServiceClient) (*twinlogv1.DescribeGroupsResponse, error) {
		return gc.DescribeGroups(ctx, &twinlogv1.DescribeGroupsRequest{GroupIds: []string{id}})
	})
	if err != nil {
		return err
	}
	// An unknown group is described Dead, without members.
	switch ds := desc.GetGroups(); {
	case len(ds) != 1:
		return fmt.Errorf("DescribeGroups answered %d groups", len(ds))
	case ds[0].GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE:
		return fmt.Errorf("%v %s", ds[0].GetError(), ds[0].GetErrorMessage())
	default:
		g.DestMembers = len(ds[0].GetMembers())
	}
	dst, err := groupCall(ctx, conns, f.sleep, f.brokers, id, func(gc twinlogv1.GroupServiceClient) (*twinlogv1.FetchOffsetsResponse, error) {
		return gc.FetchOffsets(ctx, &twinlogv1.FetchOffsetsRequest{GroupId: id})
	})
	if err == nil && dst.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
		err = fmt.Errorf("%v %s", dst.GetError(), dst.GetErrorMessage())
	}
	if err != nil {
		return err
	}
	g.Dest = committedOffsets(dst.GetOffsets(), f.mirrored)
	return nil
}

// commitPlan writes commits to group id here and counts them in st.
func commitPlan(ctx context.Context, conns *rpcopt.Pool, f syncFacts, id string, commits []offsetsync.Commit, st *twinlogv1.MirrorOffsetSyncStatus, note func(string, ...any)) {
	if len(commits) == 0 {
		return
	}
	req := &twinlogv1.CommitOffsetsRequest{GroupId: id}
	for _, cm := range commits {
		req.Offsets = append(req.Offsets, &twinlogv1.CommittedOffset{Topic: cm.Partition.Topic, Partition: cm.Partition.Partition,
			Offset: cm.To.Offset, LeaderEpoch: cm.To.LeaderEpoch, Metadata: cm.To.Metadata})
		if cm.Clamped {
			st.OffsetsClamped++
		}
	}
	resp, err := groupCall(ctx, conns, f.sleep, f.brokers, id, func(gc twinlogv1.GroupServiceClient) (*twinlogv1.CommitOffsetsResponse, error) {
		return gc.CommitOffsets(ctx, req)
	})
	if err != nil {
		note("commit group %s here: %v", id, err)
		return
	}
	for _, r := range resp.GetResults() {
		switch r.GetError() {
		case twinlogv1.ErrorCode_ERROR_CODE_NONE:
			st.OffsetsCommitted++
		case twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID:
			// Members joined since DescribeGroups: theirs now.
		default:
			note("commit group %s %s-%d here: %v", id, r.GetTopic(), r.GetPartition(), r.GetError())
		}
	}
}

// fixTruncated moves this cluster's committed offsets out of truncated
// history (offsetsync.Truncated, with the leaders' own consumer answer to
// OffsetForLeaderEpoch): every group here, whether or not the source has
// it, once a mirrored partition has a truncation point. One pass that
// completes — no error, and no group whose members hold it in truncated
// history — covers the truncation points it saw: the next sync passes
// again only when they changed (a later failback). After it, offsets come
// from consumers, which check their position against the leader
// themselves (KIP-320), or from the source, clamped to the HW: none points
// into the history the truncation removed.
func (c *Controller) fixTruncated(ctx context.Context, conns *rpcopt.Pool, mirror string, f syncFacts, st *twinlogv1.MirrorOffsetSyncStatus, note func(string, ...any)) {
	if len(f.truncations) == 0 {
		return
	}
	seen := truncationsKey(f.truncations)
	c.mu.RLock()
	done := c.truncFixed[mirror] == seen
	c.mu.RUnlock()
	if done {
		return
	}
	failed := false // the pass is not complete
	record := note
	note = func(format string, args ...any) {
		failed = true
		record(format, args...)
	}
	groups := listGroups(ctx, conns, f.brokers, "here", note)
	for _, id := range groups {
		if ctx.Err() != nil {
			note("%v", ctx.Err())
			return
		}
		g := offsetsync.Group{ID: id}
		if err := destGroup(ctx, conns, f, &g); err != nil {
			note("group %s here: %v", id, err)
			continue
		}
		ends := f.epochEnds(ctx, conns, g)
		if missing := unanswered(f, g, ends); len(missing) > 0 {
			// Its leader unknown when the sync began, or its answer failed
			// (a newer LE fenced it): the pass is not complete, the next
			// sync passes again.
			note("group %s here: no end offset for %s", id, strings.Join(missing, ", "))
		}
		if g.DestMembers > 0 {
			// Left to its members; should they leave without committing
			// past the truncation, a later pass moves the group.
			idle := g
			idle.DestMembers = 0
			failed = failed || len(offsetsync.Truncated(idle, ends)) > 0
			continue
		}
		commitPlan(ctx, conns, f, id, offsetsync.Truncated(g, ends), st, note)
	}
	if !failed {
		c.mu.Lock()
		c.truncFixed[mirror] = seen
		c.mu.Unlock()
	}
}

// unanswered are the truncated partitions g committed to with a leader
// epoch that ends has no answer for, sorted: the pass cannot place them.
func unanswered(f syncFacts, g offsetsync.Group, ends map[twinlog.TopicPartition]offsetsync.EpochEnd) []string {
	var out []string
	for tp, o := range g.Dest {
		if _, ok := ends[tp]; !ok && o.LeaderEpoch >= 0 && len(f.truncations[tp]) > 0 {
			out = append(out, tp.String())
		}
	}
	slices.Sort(out)
	return out
}

// truncationsKey names a set of truncation points (fixTruncated's pass
// covers one).
func truncationsKey(tps map[twinlog.TopicPartition][]*twinlogv1.TruncationPoint) string {
	var b strings.Builder
	for _, tp := range slices.SortedFunc(maps.Keys(tps), func(x, y twinlog.TopicPartition) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	}) {
		fmt.Fprintf(&b, "%s-%d", tp.Topic, tp.Partition)
		for _, p := range tps[tp] {
			fmt.Fprintf(&b, " %d@%d", p.GetLeaderEpoch(), p.GetOffset())
		}
		b.WriteByte(';')
	}
	return b.String()
}

// epochEnds asks the leaders of the truncated partitions g committed to
// for the end of each commit's epoch, as a consumer checking its position.
func (f syncFacts) epochEnds(ctx context.Context, conns *rpcopt.Pool, g offsetsync.Group) map[twinlog.TopicPartition]offsetsync.EpochEnd {
	byAddr := map[string][]leaderQuery{}
	for addr, qs := range f.leaders {
		for _, q := range qs {
			tp := twinlog.TopicPartition{Topic: q.name, Partition: q.index}
			o, ok := g.Dest[tp]
			if !ok || o.LeaderEpoch < 0 || len(f.truncations[tp]) == 0 {
				continue
			}
			q.ask = o.LeaderEpoch
			byAddr[addr] = append(byAddr[addr], q)
		}
	}
	out := map[twinlog.TopicPartition]offsetsync.EpochEnd{}
	for _, addr := range slices.Sorted(maps.Keys(byAddr)) {
		qs := byAddr[addr]
		for i, a := range askEndAs(ctx, conns, addr, qs, true) {
			if a.Err == "" {
				out[twinlog.TopicPartition{Topic: qs[i].name, Partition: qs[i].index}] = offsetsync.EpochEnd{Epoch: a.Epoch, EndOffset: a.EndOffset}
			}
		}
	}
	return out
}

// listGroups are the groups every broker of brokers lists, sorted, once
// each; a broker that does not answer is noted (where names the cluster).
func listGroups(ctx context.Context, conns *rpcopt.Pool, brokers []string, where string, note func(string, ...any)) []string {
	seen := map[string]bool{}
	for _, addr := range brokers {
		resp, err := groupClient(conns, addr, func(gc twinlogv1.GroupServiceClient) (*twinlogv1.ListGroupsResponse, error) {
			return gc.ListGroups(ctx, &twinlogv1.ListGroupsRequest{})
		})
		if err != nil {
			note("ListGroups %s %s: %v", where, addr, err)
			continue
		}
		for _, g := range resp.GetGroups() {
			seen[g.GetGroupId()] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// committedOffsets are the offsets of the mirrored topics.
func committedOffsets(os []*twinlogv1.CommittedOffset, mirrored map[string]bool) map[twinlog.TopicPartition]offsetsync.Offset {
	out := map[twinlog.TopicPartition]offsetsync.Offset{}
	for _, o := range os {
		if mirrored[o.GetTopic()] && o.GetError() == twinlogv1.ErrorCode_ERROR_CODE_NONE && o.GetOffset() >= 0 {
			out[twinlog.TopicPartition{Topic: o.GetTopic(), Partition: o.GetPartition()}] =
				offsetsync.Offset{Offset: o.GetOffset(), LeaderEpoch: o.GetLeaderEpoch(), Metadata: o.GetMetadata()}
		}
	}
	return out
}

// sourceBrokers are the source cluster's broker addresses, from the first
// bootstrap address whose Metadata answers as the mirror's source.
func (c *Controller) sourceBrokers(ctx context.Context, conns *rpcopt.Pool, bootstrap []string, sourceID string) ([]string, error) {
	md, why := sourceMetadata(ctx, conns, bootstrap, sourceID, &twinlogv1.MetadataRequest{NoTopics: true})
	if md == nil {
		return nil, fmt.Errorf("source: %s", why)
	}
	var out []string
	for _, b := range md.GetBrokers() {
		out = append(out, net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort()))))
	}
	slices.Sort(out)
	return out, nil
}

// groupClient makes one GroupService call to addr.
func groupClient[R any](conns *rpcopt.Pool, addr string, call func(twinlogv1.GroupServiceClient) (R, error)) (R, error) {
	conn, err := conns.Get(addr)
	if err != nil {
		var zero R
		return zero, err
	}
	r, err := call(twinlogv1.NewGroupServiceClient(conn))
	if err != nil {
		var zero R
		return zero, fmt.Errorf("%s", status.Convert(err).Message())
	}
	return r, nil
}

// answerCode is the group-level code of a GroupService answer.
func answerCode(r any) twinlogv1.ErrorCode {
	switch r := r.(type) {
	case *twinlogv1.FetchOffsetsResponse:
		return r.GetError()
	case *twinlogv1.DescribeGroupsResponse:
		if len(r.GetGroups()) == 1 {
			return r.GetGroups()[0].GetError()
		}
	case *twinlogv1.CommitOffsetsResponse:
		for _, o := range r.GetResults() {
			if o.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
				return o.GetError() // a coordinator's refusal is the same for every partition
			}
		}
	}
	return twinlogv1.ErrorCode_ERROR_CODE_NONE
}

// groupCall makes one call to group id's coordinator, found through
// FindCoordinator at the first of brokers that answers it. While the
// coordinator is being created, loaded or moved (a retriable answer to
// FindCoordinator or to the call: a cluster's first FindCoordinator
// creates __consumer_offsets) it asks again every coordinatorRetry (sleep)
// until ctx ends; then the last answer is returned.
func groupCall[R any](ctx context.Context, conns *rpcopt.Pool, sleep func(context.Context, time.Duration) bool, brokers []string, id string, call func(twinlogv1.GroupServiceClient) (R, error)) (R, error) {
	for {
		r, retry, err := groupCallOnce(ctx, conns, brokers, id, call)
		if !retry || !sleep(ctx, coordinatorRetry) {
			return r, err
		}
	}
}

// groupCallOnce is one attempt of groupCall; retry says whether the
// answer (or the refusal to find a coordinator) is worth another.
func groupCallOnce[R any](ctx context.Context, conns *rpcopt.Pool, brokers []string, id string, call func(twinlogv1.GroupServiceClient) (R, error)) (r R, retry bool, err error) {
	err = fmt.Errorf("no broker")
	for _, addr := range brokers {
		fc, ferr := groupClient(conns, addr, func(gc twinlogv1.GroupServiceClient) (*twinlogv1.FindCoordinatorResponse, error) {
			return gc.FindCoordinator(ctx, &twinlogv1.FindCoordinatorRequest{GroupId: id})
		})
		switch {
		case ferr != nil:
			err = fmt.Errorf("FindCoordinator at %s: %v", addr, ferr)
			continue
		case fc.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE:
			err = fmt.Errorf("FindCoordinator at %s: %v %s", addr, fc.GetError(), fc.GetErrorMessage())
			retry = retry || errcode.Of(fc.GetError()).Retriable
			continue
		}
		r, err = groupClient(conns, net.JoinHostPort(fc.GetHost(), strconv.Itoa(int(fc.GetPort()))), call)
		return r, err == nil && errcode.Of(answerCode(r)).Retriable, err
	}
	return r, retry, err
}

// coordinatorRetry is how often groupCall asks again for a coordinator
// being created or loaded.
const coordinatorRetry = 100 * time.Millisecond

// sleep waits d or until ctx ends; it reports whether ctx is still live
// (Deps.Sleep's default).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
