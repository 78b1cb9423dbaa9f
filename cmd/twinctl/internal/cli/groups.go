package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/errcode"
)

// groupAttempts bounds the tries of one group request. An answer the error
// table calls retriable (NOT_COORDINATOR: the coordinator moved;
// COORDINATOR_NOT_AVAILABLE: none is elected yet;
// COORDINATOR_LOAD_IN_PROGRESS: it is still reading __consumer_offsets), or
// an unreachable broker, is retried after finding the coordinator again and
// a short backoff (50, 100, 200, 400 ms), all within one --timeout.
const groupAttempts = 5

// brokerAddr is a broker's id and gRPC address.
type brokerAddr struct {
	id   int32
	addr string
}

// topicPart names one partition.
type topicPart struct {
	topic     string
	partition int32
}

func (tp topicPart) String() string { return fmt.Sprintf("%s-%d", tp.topic, tp.partition) }

func compareTopicPart(x, y topicPart) int {
	return cmp.Or(strings.Compare(x.topic, y.topic), cmp.Compare(x.partition, y.partition))
}

// partitionLeader is a partition's leader as Metadata answered it.
type partitionLeader struct {
	id    int32
	epoch int32
}

// groupsClient holds what one groups command learns of the cluster: its
// live brokers (ListBrokers on --bootstrap, a controller or a broker), each
// group's coordinator (FindCoordinator on a broker) and the leaders of the
// topics whose offsets it reads (Metadata on a broker).
type groupsClient struct {
	a         *app
	brokers   []brokerAddr          // unfenced, by id; nil until asked
	coords    map[string]brokerAddr // group → its coordinator, until it fails
	leaders   map[topicPart]partitionLeader
	counts    map[string]int   // topic → partitions, from Metadata
	addrs     map[int32]string // broker id → address, from Metadata
	topicErrs map[string]twinlogv1.ErrorCode
}

func (a *app) newGroupsClient() *groupsClient {
	return &groupsClient{a: a, coords: map[string]brokerAddr{}}
}

// retryErr marks an error that finding the coordinator again (or asking
// again) may cure.
type retryErr struct{ err error }

func (e *retryErr) Error() string { return e.err.Error() }
func (e *retryErr) Unwrap() error { return e.err }

func again(err error) error { return &retryErr{err} }

// opCtx bounds one group operation, its retries included, by --timeout.
func (a *app) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

// withRetries runs try until it returns an error not marked again, up to
// groupAttempts times, backing off in between while ctx allows.
func (a *app) withRetries(ctx context.Context, try func() error) error {
	var last error
	n := 0
	for n < groupAttempts {
		if n > 0 {
			if err := backoff(ctx, n-1); err != nil {
				if errors.Is(err, context.Canceled) {
					return err
				}
				// Out of time: report what the last attempt said.
				return fmt.Errorf("gave up after %d attempts, at --timeout %v: %w", n, a.timeout, last)
			}
		}
		n++
		err := try()
		var r *retryErr
		if !errors.As(err, &r) {
			return err
		}
		last = r.err
	}
	return fmt.Errorf("gave up after %d attempts: %w", n, last)
}

// transportErr words a failed RPC; an unreachable server is worth another
// attempt (the coordinator or leader may have moved).
func transportErr(err error, addr, what string) error {
	if status.Code(err) == codes.Unavailable {
		return again(rpcError(err, addr, what))
	}
	return rpcError(err, addr, what)
}

// groupMessages explain a group code where the server gave no message and
// the table's description does not fit an administrator's request.
var groupMessages = map[twinlogv1.ErrorCode]string{
	twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID:  "the group has active members; its offsets can be changed only while it has none",
	twinlogv1.ErrorCode_ERROR_CODE_NON_EMPTY_GROUP:    "the group has active members and cannot be deleted",
	twinlogv1.ErrorCode_ERROR_CODE_GROUP_ID_NOT_FOUND: "no such group",
}

// coordinatorHint is the next step once a coordinator kept moving or
// loading through every attempt (the table has no hint for those codes).
const coordinatorHint = "if this persists, check the leaders of __consumer_offsets with `twinctl partitions describe __consumer_offsets`"

// groupErr is a group's (non-NONE) code as an operator error, marked again
// when the table calls the code retriable.
func groupErr(c twinlogv1.ErrorCode, groupID, msg string) error {
	if c == twinlogv1.ErrorCode_ERROR_CODE_NONE {
		return nil
	}
	if msg == "" {
		msg = groupMessages[c]
	}
	hint := hintFor(c, "")
	if hint == "" && (c == twinlogv1.ErrorCode_ERROR_CODE_NOT_COORDINATOR || c == twinlogv1.ErrorCode_ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS) {
		hint = coordinatorHint
	}
	err := &ProtocolError{Code: c, Subject: "group " + groupID, Message: msg, Hint: hint}
	if errcode.Of(c).Retriable {
		return again(err)
	}
	return err
}

// liveBrokers asks --bootstrap for the registered brokers and keeps the
// unfenced ones: only they lead partitions, so only they coordinate groups.
func (g *groupsClient) liveBrokers(ctx context.Context) ([]brokerAddr, error) {
	if g.brokers != nil {
		return g.brokers, nil
	}
	client, err := g.a.admin()
	if err != nil {
		return nil, err
	}
	rctx, cancel := g.a.rpcCtx(ctx)
	defer cancel()
	resp, err := client.ListBrokers(rctx, &twinlogv1.ListBrokersRequest{})
	if err != nil {
		return nil, rpcError(err, g.a.bootstrap, "list brokers")
	}
	var out []brokerAddr
	for _, b := range resp.GetBrokers() {
		if !b.GetFenced() {
			out = append(out, brokerAddr{b.GetBrokerId(), net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists no unfenced broker: check `twinctl brokers list`", g.a.bootstrap)
	}
	slices.SortFunc(out, func(x, y brokerAddr) int { return cmp.Compare(x.id, y.id) })
	g.brokers = out
	return out, nil
}

func (g *groupsClient) groupService(addr string) (twinlogv1.GroupServiceClient, error) {
	cc, err := g.a.conn(addr)
	if err != nil {
		return nil, err
	}
	return twinlogv1.NewGroupServiceClient(cc), nil
}

// coordinator finds groupID's coordinator, asking the live brokers in turn
// until one answers.
func (g *groupsClient) coordinator(ctx context.Context, groupID string) (brokerAddr, error) {
	if c, ok := g.coords[groupID]; ok {
		return c, nil
	}
	brokers, err := g.liveBrokers(ctx)
	if err != nil {
		return brokerAddr{}, err
	}
	var last error
	for _, b := range brokers {
		gs, err := g.groupService(b.addr)
		if err != nil {
			return brokerAddr{}, err
		}
		rctx, cancel := g.a.rpcCtx(ctx)
		resp, err := gs.FindCoordinator(rctx, &twinlogv1.FindCoordinatorRequest{GroupId: groupID})
		cancel()
		if err != nil {
			if err = transportErr(err, b.addr, "find coordinator"); errors.As(err, new(*retryErr)) {
				last = err // try the next broker
				continue
			}
			return brokerAddr{}, err
		}
		if err := groupErr(resp.GetError(), groupID, resp.GetErrorMessage()); err != nil {
			return brokerAddr{}, err
		}
		c := brokerAddr{resp.GetNodeId(), net.JoinHostPort(resp.GetHost(), strconv.Itoa(int(resp.GetPort())))}
		g.coords[groupID] = c
		return c, nil
	}
	return brokerAddr{}, last
}

// atCoordinator runs call against groupID's coordinator. An error call
// marks again makes it find the coordinator anew and retry (withRetries).
func (g *groupsClient) atCoordinator(ctx context.Context, groupID string, call func(ctx context.Context, gs twinlogv1.GroupServiceClient, coord brokerAddr) error) error {
	return g.a.withRetries(ctx, func() error {
		coord, err := g.coordinator(ctx, groupID)
		if err != nil {
			return err
		}
		gs, err := g.groupService(coord.addr)
		if err != nil {
			return err
		}
		rctx, cancel := g.a.rpcCtx(ctx)
		defer cancel()
		err = call(rctx, gs, coord)
		if errors.As(err, new(*retryErr)) {
			delete(g.coords, groupID)
		}
		return err
	})
}

// refreshLeaders asks a live broker for the topics' partitions and leaders.
func (g *groupsClient) refreshLeaders(ctx context.Context, topics []string) error {
	brokers, err := g.liveBrokers(ctx)
	if err != nil {
		return err
	}
	var last error
	for _, b := range brokers {
		cc, err := g.a.conn(b.addr)
		if err != nil {
			return err
		}
		rctx, cancel := g.a.rpcCtx(ctx)
		resp, err := twinlogv1.NewFetchServiceClient(cc).Metadata(rctx, &twinlogv1.MetadataRequest{Topics: topics})
		cancel()
		if err != nil {
			if err = transportErr(err, b.addr, "metadata"); errors.As(err, new(*retryErr)) {
				last = err
				continue
			}
			return err
		}
		g.leaders, g.counts, g.topicErrs = map[topicPart]partitionLeader{}, map[string]int{}, map[string]twinlogv1.ErrorCode{}
		g.addrs = map[int32]string{}
		for _, mb := range resp.GetBrokers() {
			g.addrs[mb.GetId()] = net.JoinHostPort(mb.GetHost(), strconv.Itoa(int(mb.GetPort())))
		}
		for _, t := range resp.GetTopics() {
			if t.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
				g.topicErrs[t.GetName()] = t.GetError()
				continue
			}
			g.counts[t.GetName()] = len(t.GetPartitions())
			for _, p := range t.GetPartitions() {
				g.leaders[topicPart{t.GetName(), p.GetIndex()}] = partitionLeader{p.GetLeaderId(), p.GetLeaderEpoch()}
			}
		}
		for _, t := range topics {
			if _, ok := g.counts[t]; !ok && g.topicErrs[t] == twinlogv1.ErrorCode_ERROR_CODE_NONE {
				g.topicErrs[t] = twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
			}
		}
		return nil
	}
	return last
}

// knows reports whether the last Metadata answer covered every topic.
func (g *groupsClient) knows(topics []string) bool {
	for _, t := range topics {
		if _, ok := g.counts[t]; !ok && g.topicErrs[t] == twinlogv1.ErrorCode_ERROR_CODE_NONE {
			return false
		}
	}
	return true
}

// topicError is the error Metadata answered for topic, nil if none.
func (g *groupsClient) topicError(topic string) error {
	return protoErr(g.topicErrs[topic], "topic "+topic, "", topic)
}

func topicsOf(tps []topicPart) []string {
	var out []string
	for _, tp := range tps {
		if !slices.Contains(out, tp.topic) {
			out = append(out, tp.topic)
		}
	}
	slices.Sort(out)
	return out
}

// listOffsets asks each partition's leader for its offset at spec (ts for
// OFFSET_SPEC_TIMESTAMP), one request per leader; partitions whose leader
// moved are retried after a Metadata refresh, as consume does. It answers
// the offsets it read and an error naming the partitions it could not.
func (g *groupsClient) listOffsets(ctx context.Context, tps []topicPart, spec twinlogv1.OffsetSpec, ts int64) (map[topicPart]int64, error) {
	out := map[topicPart]int64{}
	failed := map[topicPart]error{}
	last := map[topicPart]error{}
	pending := slices.Clone(tps)
	topics := topicsOf(tps)
	for attempt := 0; attempt < groupAttempts && len(pending) > 0; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt-1); err != nil {
				break
			}
		}
		if attempt > 0 || !g.knows(topics) {
			if err := g.refreshLeaders(ctx, topics); err != nil {
				if !errors.As(err, new(*retryErr)) {
					return out, err
				}
				for _, tp := range pending {
					last[tp] = err
				}
				continue
			}
		}
		var retry []topicPart
		byLeader := map[string][]topicPart{}
		for _, tp := range pending {
			if err := g.topicError(tp.topic); err != nil {
				failed[tp] = err
				continue
			}
			l, ok := g.leaders[tp]
			if !ok {
				failed[tp] = protoErr(twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "partition "+tp.String(), "", tp.topic)
				continue
			}
			addr, ok := g.addrs[l.id]
			if l.id < 0 || !ok {
				last[tp] = fmt.Errorf("partition %s: %w", tp, errNoLeader)
				retry = append(retry, tp)
				continue
			}
			byLeader[addr] = append(byLeader[addr], tp)
		}
		for _, addr := range slices.Sorted(maps.Keys(byLeader)) {
			list := byLeader[addr]
			req := &twinlogv1.ListOffsetsRequest{}
			for _, tp := range list {
				if n := len(req.Topics); n == 0 || req.Topics[n-1].GetName() != tp.topic {
					req.Topics = append(req.Topics, &twinlogv1.ListOffsetsTopic{Name: tp.topic})
				}
				t := req.Topics[len(req.Topics)-1]
				t.Partitions = append(t.Partitions, &twinlogv1.ListOffsetsPartition{Index: tp.partition, CurrentLeaderEpoch: g.leaders[tp].epoch, Spec: spec, Timestamp: ts})
			}
			cc, err := g.a.conn(addr)
			if err != nil {
				return out, err
			}
			rctx, cancel := g.a.rpcCtx(ctx)
			resp, err := twinlogv1.NewFetchServiceClient(cc).ListOffsets(rctx, req)
			cancel()
			if err != nil {
				err = transportErr(err, addr, "list offsets")
				for _, tp := range list {
					if errors.As(err, new(*retryErr)) {
						last[tp] = err
						retry = append(retry, tp)
					} else {
						failed[tp] = err
					}
				}
				continue
			}
			answered := map[topicPart]bool{}
			for _, t := range resp.GetTopics() {
				for _, p := range t.GetPartitions() {
					tp := topicPart{t.GetName(), p.GetIndex()}
					if !slices.Contains(list, tp) || answered[tp] {
						continue
					}
					answered[tp] = true
					switch code := p.GetError(); {
					case code == twinlogv1.ErrorCode_ERROR_CODE_NONE:
						out[tp] = p.GetOffset()
					case retriableRefresh(code):
						last[tp] = protoErr(code, "partition "+tp.String(), "", tp.topic)
						retry = append(retry, tp)
					default:
						failed[tp] = protoErr(code, "partition "+tp.String(), "", tp.topic)
					}
				}
			}
			for _, tp := range list {
				if !answered[tp] {
					failed[tp] = fmt.Errorf("list offsets: %s answered without partition %s; report this server bug", addr, tp)
				}
			}
		}
		pending = retry
	}
	for _, tp := range pending {
		failed[tp] = fmt.Errorf("gave up after %d attempts: %w", groupAttempts, last[tp])
	}
	var errs []error
	for _, tp := range slices.SortedFunc(maps.Keys(failed), compareTopicPart) {
		errs = append(errs, failed[tp])
	}
	return out, errors.Join(errs...)
}

func (a *app) groupsCommand() *cobra.Command {
	c := group("groups", "List, describe, reset the offsets of and delete consumer groups",
		a.groupsList(), a.groupsDescribe(), a.groupsResetOffsets(), a.groupsDelete())
	c.Long = `Consumer groups live on the brokers: each group has a coordinator, the
leader of its __consumer_offsets partition. These commands find the brokers
with ListBrokers on --bootstrap (a controller or a broker), then talk to the
brokers' GroupService. A coordinator that moved or is still loading
(NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) is
found again and asked again, a few times within --timeout.`
	return c
}

// listedGroupView is one line of `groups list`.
type listedGroupView struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Coordinator  int32  `json:"coordinator"`
}

func (a *app) groupsList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the consumer groups of every broker",
		Long: `Asks every unfenced broker for the groups it coordinates and lists them by
group id. PROTOCOL-TYPE is "consumer" for Kafka consumer groups and "-" for
groups that only commit offsets; COORDINATOR is the broker that coordinates
the group. A broker that does not answer fails the command after the list is
printed: its groups are missing from it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g := a.newGroupsClient()
			brokers, err := g.liveBrokers(cmd.Context())
			if err != nil {
				return err
			}
			var (
				views []listedGroupView
				errs  []error
				seen  = map[string]bool{}
			)
			for _, b := range brokers {
				var resp *twinlogv1.ListGroupsResponse
				ctx, cancel := a.opCtx(cmd.Context())
				err := a.withRetries(ctx, func() error {
					gs, err := g.groupService(b.addr)
					if err != nil {
						return err
					}
					rctx, cancel := a.rpcCtx(ctx)
					defer cancel()
					resp, err = gs.ListGroups(rctx, &twinlogv1.ListGroupsRequest{})
					if err != nil {
						return transportErr(err, b.addr, "list groups")
					}
					return brokerGroupsErr(resp.GetError(), b, resp.GetErrorMessage())
				})
				cancel()
				if err != nil {
					errs = append(errs, fmt.Errorf("%w; the list lacks broker %d's groups", err, b.id))
					continue
				}
				// A coordinator moving between the two answers may be
				// listed by both: keep one line.
				for _, lg := range resp.GetGroups() {
					if !seen[lg.GetGroupId()] {
						seen[lg.GetGroupId()] = true
						views = append(views, listedGroupView{lg.GetGroupId(), lg.GetState(), lg.GetProtocolType(), b.id})
					}
				}
			}
			slices.SortFunc(views, func(x, y listedGroupView) int { return strings.Compare(x.Group, y.Group) })
			if err := renderGroupList(a.printer(), views); err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
}

// brokerGroupsErr is a broker's ListGroups code as an error (again when
// retriable: a coordinator still loading).
func brokerGroupsErr(c twinlogv1.ErrorCode, b brokerAddr, msg string) error {
	if c == twinlogv1.ErrorCode_ERROR_CODE_NONE {
		return nil
	}
	err := &ProtocolError{Code: c, Subject: fmt.Sprintf("broker %d (%s)", b.id, b.addr), Message: msg, Hint: hintFor(c, "")}
	if errcode.Of(c).Retriable {
		return again(err)
	}
	return err
}

func renderGroupList(p *printer, views []listedGroupView) error {
	if p.json {
		enc := jsonLine{w: p.w}
		for _, v := range views {
			if err := enc.write(v); err != nil {
				return err
			}
		}
		return nil
	}
	rows := make([][]string, 0, len(views))
	for _, v := range views {
		rows = append(rows, []string{v.Group, v.State, v.ProtocolType, strconv.Itoa(int(v.Coordinator))})
	}
	return p.table([]string{"GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR"}, rows)
}

// groupState is what describe and reset-offsets learn at a coordinator.
type groupState struct {
	id          string
	coordinator brokerAddr
	desc        *twinlogv1.GroupDescription
	committed   map[topicPart]*twinlogv1.CommittedOffset // offset ≥ 0 only
}

// describeGroup asks groupID's coordinator for the group (DescribeGroups)
// and its committed offsets (FetchOffsets).
func (g *groupsClient) describeGroup(ctx context.Context, groupID string) (*groupState, error) {
	var st *groupState
	err := g.atCoordinator(ctx, groupID, func(ctx context.Context, gs twinlogv1.GroupServiceClient, coord brokerAddr) error {
		d, err := gs.DescribeGroups(ctx, &twinlogv1.DescribeGroupsRequest{GroupIds: []string{groupID}})
		if err != nil {
			return transportErr(err, coord.addr, "describe group")
		}
		var desc *twinlogv1.GroupDescription
		for _, x := range d.GetGroups() {
			if x.GetGroupId() == groupID {
				desc = x
			}
		}
		if desc == nil {
			return fmt.Errorf("describe group: %s answered without group %s; report this server bug", coord.addr, groupID)
		}
		if err := groupErr(desc.GetError(), groupID, desc.GetErrorMessage()); err != nil {
			return err
		}
		f, err := gs.FetchOffsets(ctx, &twinlogv1.FetchOffsetsRequest{GroupId: groupID})
		if err != nil {
			return transportErr(err, coord.addr, "fetch offsets")
		}
		if err := groupErr(f.GetError(), groupID, f.GetErrorMessage()); err != nil {
			return err
		}
		st = &groupState{id: groupID, coordinator: coord, desc: desc, committed: map[topicPart]*twinlogv1.CommittedOffset{}}
		for _, o := range f.GetOffsets() {
			if o.GetOffset() >= 0 || o.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
				st.committed[topicPart{o.GetTopic(), o.GetPartition()}] = o
			}
		}
		return nil
	})
	return st, err
}

// exists: a coordinator answers a group it does not hold as Dead, without
// members or offsets (as Kafka does).
func (s *groupState) exists() bool {
	return s.desc.GetState() != "Dead" || len(s.desc.GetMembers()) > 0 || len(s.committed) > 0
}

func notFound(groupID string) error {
	return groupErr(twinlogv1.ErrorCode_ERROR_CODE_GROUP_ID_NOT_FOUND, groupID, "")
}

// groupPartitionView is one line of `groups describe`: a partition with a
// committed offset or assigned to a member. A group with neither gets one
// line without topic and partition.
type groupPartitionView struct {
	Group         string `json:"group"`
	State         string `json:"state"`
	Members       int    `json:"members"`
	Assignor      string `json:"assignor,omitempty"`
	Coordinator   int32  `json:"coordinator"`
	Topic         string `json:"topic,omitempty"`
	Partition     *int32 `json:"partition,omitempty"`
	CurrentOffset *int64 `json:"current_offset,omitempty"`
	LogEndOffset  *int64 `json:"log_end_offset,omitempty"`
	Lag           *int64 `json:"lag,omitempty"`
	ConsumerID    string `json:"consumer_id,omitempty"`
	Host          string `json:"host,omitempty"`
	ClientID      string `json:"client_id,omitempty"`
	Error         string `json:"error,omitempty"`
}

func optInt(p *int64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatInt(*p, 10)
}

// describeRows turns a group's state and its partitions' log ends into
// lines, by topic and partition.
func describeRows(st *groupState, ends map[topicPart]int64) []groupPartitionView {
	base := groupPartitionView{Group: st.id, State: st.desc.GetState(), Members: len(st.desc.GetMembers()),
		Assignor: st.desc.GetProtocol(), Coordinator: st.coordinator.id}
	owner := map[topicPart]*twinlogv1.GroupMemberDescription{}
	for _, m := range st.desc.GetMembers() {
		for _, a := range m.GetAssignment() {
			for _, p := range a.GetPartitions() {
				owner[topicPart{a.GetTopic(), p}] = m
			}
		}
	}
	tps := slices.Collect(maps.Keys(st.committed))
	for tp := range owner {
		if _, ok := st.committed[tp]; !ok {
			tps = append(tps, tp)
		}
	}
	slices.SortFunc(tps, compareTopicPart)
	if len(tps) == 0 {
		return []groupPartitionView{base}
	}
	rows := make([]groupPartitionView, 0, len(tps))
	for _, tp := range tps {
		v := base
		v.Topic, v.Partition = tp.topic, &tp.partition
		if o := st.committed[tp]; o != nil {
			v.Error = errString(o.GetError())
			if o.GetOffset() >= 0 {
				v.CurrentOffset = new(o.GetOffset())
			}
		}
		if end, ok := ends[tp]; ok {
			v.LogEndOffset = new(end)
			if v.CurrentOffset != nil {
				v.Lag = new(end - *v.CurrentOffset)
			}
		}
		if m := owner[tp]; m != nil {
			v.ConsumerID, v.Host, v.ClientID = m.GetMemberId(), m.GetClientHost(), m.GetClientId()
		}
		rows = append(rows, v)
	}
	return rows
}

func renderGroupDescriptions(p *printer, groups [][]groupPartitionView) error {
	if p.json {
		enc := jsonLine{w: p.w}
		for _, rows := range groups {
			for _, v := range rows {
				if err := enc.write(v); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for i, rows := range groups {
		if i > 0 {
			fmt.Fprintln(p.w)
		}
		h := rows[0]
		members := "members"
		if h.Members == 1 {
			members = "member"
		}
		assignor := ""
		if h.Assignor != "" {
			assignor = ", assignor " + h.Assignor
		}
		fmt.Fprintf(p.w, "group %s: %s, %d %s%s, coordinator %d\n", h.Group, h.State, h.Members, members, assignor, h.Coordinator)
		if h.Partition == nil {
			fmt.Fprintln(p.w, "no committed offsets and no assigned partitions")
			continue
		}
		table := make([][]string, 0, len(rows))
		for _, v := range rows {
			cur := optInt(v.CurrentOffset)
			if v.Error != "" {
				cur = v.Error
			}
			table = append(table, []string{v.Group, v.Topic, strconv.Itoa(int(*v.Partition)), cur, optInt(v.LogEndOffset), optInt(v.Lag), v.ConsumerID, v.Host, v.ClientID})
		}
		if err := p.table([]string{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"}, table); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) groupsDescribe() *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP...",
		Short: "Show a group's state, members, committed offsets and lag",
		Long: `For each group: its state, members, assignor and coordinator, then one line
per partition that has a committed offset or is assigned to a member.
LOG-END-OFFSET is the partition's high watermark (what consumers can read,
from its leader's ListOffsets) and LAG is LOG-END-OFFSET - CURRENT-OFFSET.
CONSUMER-ID, HOST and CLIENT-ID are the member the partition is assigned to,
"-" if none. A topic that no longer exists shows "-" as its log end.
--json prints one object per partition line.`,
		Example: "  twinctl --bootstrap 127.0.0.1:9091 groups describe orders-app",
		Args:    minArgs(1, "at least one group id (`twinctl groups list` lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			g := a.newGroupsClient()
			var (
				out  [][]groupPartitionView
				errs []error
			)
			for _, id := range args {
				ctx, cancel := a.opCtx(cmd.Context())
				st, err := g.describeGroup(ctx, id)
				cancel()
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if !st.exists() {
					errs = append(errs, notFound(id))
					continue
				}
				// The log ends of the partitions shown (deleted topics
				// have none: "-").
				var tps []topicPart
				for _, r := range describeRows(st, nil) {
					if r.Partition != nil {
						tps = append(tps, topicPart{r.Topic, *r.Partition})
					}
				}
				var ends map[topicPart]int64
				if len(tps) > 0 {
					ctx, cancel := a.opCtx(cmd.Context())
					ends, err = g.listOffsets(ctx, tps, twinlogv1.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK, 0)
					cancel()
					errs = append(errs, withoutUnknownTopics(err))
				}
				out = append(out, describeRows(st, ends))
			}
			if err := renderGroupDescriptions(a.printer(), out); err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
}

// withoutUnknownTopics drops the unknown-topic errors from err: a group's
// offsets outlive a deleted topic, and describe shows them without a log
// end rather than failing.
func withoutUnknownTopics(err error) error {
	if err == nil {
		return nil
	}
	var kept []error
	for _, e := range flattenJoined(err) {
		var pe *ProtocolError
		if errors.As(e, &pe) && pe.Code == twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION && strings.HasPrefix(pe.Subject, "topic ") {
			continue
		}
		kept = append(kept, e)
	}
	return errors.Join(kept...)
}

func flattenJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// resetView is one partition of a reset-offsets plan or result.
type resetView struct {
	Group          string `json:"group"`
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	PreviousOffset *int64 `json:"previous_offset"`
	NewOffset      int64  `json:"new_offset"`
	DryRun         bool   `json:"dry_run"`
	Error          string `json:"error,omitempty"`
}

func renderResets(p *printer, rows []resetView) error {
	if p.json {
		enc := jsonLine{w: p.w}
		for _, r := range rows {
			if err := enc.write(r); err != nil {
				return err
			}
		}
		return nil
	}
	table := make([][]string, 0, len(rows))
	for _, r := range rows {
		result := "reset"
		switch {
		case r.Error != "":
			result = "not reset: " + r.Error
		case r.DryRun:
			result = "dry run"
		}
		table = append(table, []string{r.Group, r.Topic, strconv.Itoa(int(r.Partition)), optInt(r.PreviousOffset), strconv.FormatInt(r.NewOffset, 10), result})
	}
	return p.table([]string{"GROUP", "TOPIC", "PARTITION", "PREVIOUS-OFFSET", "NEW-OFFSET", "RESULT"}, table)
}

// resetTarget is the one --to-* flag of reset-offsets.
type resetTarget struct {
	spec   twinlogv1.OffsetSpec // EARLIEST, HIGH_WATERMARK or TIMESTAMP; UNSPECIFIED for --to-offset
	offset int64
	ts     int64 // ms, for TIMESTAMP
}

func (a *app) groupsResetOffsets() *cobra.Command {
	var (
		topics               []string
		allTopics, dryRun    bool
		toEarliest, toLatest bool
		toOffset             int64
		toDatetime           string
	)
	c := &cobra.Command{
		Use:   "reset-offsets GROUP (--topic T[:P,P...]... | --all-topics) (--to-earliest | --to-latest | --to-offset N | --to-datetime TIME) [--dry-run]",
		Short: "Set a group's committed offsets (the group must have no active members)",
		Long: `Commits new offsets for a group at its coordinator, as Kafka's
kafka-consumer-groups.sh --reset-offsets does. The partitions are those of
each --topic (all of them, or the listed ones), or with --all-topics every
partition the group has a committed offset for. The new offsets are:
  --to-earliest      the log start offset
  --to-latest        the high watermark (the end of what consumers can read)
  --to-offset N      N, moved into [log start, high watermark] with a warning
  --to-datetime T    the first offset with a timestamp at or after T (RFC 3339,
                     e.g. 2025-06-01T12:00:00Z); the high watermark if none
It applies the change unless --dry-run is given (twinctl's commands change
things when run, as topics create does; --dry-run only prints the plan, like
--validate-only). The coordinator refuses the commit while the group has
members (UNKNOWN_MEMBER_ID): stop its consumers first. A reset of a group
that does not exist yet creates it.`,
		Example: `  twinctl groups reset-offsets orders-app --topic orders --to-earliest --dry-run
  twinctl groups reset-offsets orders-app --topic orders:0,1 --to-offset 1200
  twinctl groups reset-offsets orders-app --all-topics --to-datetime 2025-06-01T12:00:00Z`,
		Args: exactArgs(1, "one group id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			groupID := args[0]
			sels, err := parseSelectors(topics)
			if err != nil {
				return err
			}
			if (len(sels) > 0) == allTopics {
				return usagef("name the partitions with --topic T[:P,P...] or pass --all-topics (not both)")
			}
			var target resetTarget
			n := 0
			if toEarliest {
				n++
				target.spec = twinlogv1.OffsetSpec_OFFSET_SPEC_EARLIEST
			}
			if toLatest {
				n++
				target.spec = twinlogv1.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK
			}
			if cmd.Flags().Changed("to-offset") {
				n++
				if toOffset < 0 {
					return usagef("--to-offset must be ≥ 0, got %d", toOffset)
				}
				target.offset = toOffset
			}
			if toDatetime != "" {
				n++
				at, err := time.Parse(time.RFC3339, toDatetime)
				if err != nil {
					return usagef("bad --to-datetime %q: want RFC 3339, e.g. 2025-06-01T12:00:00Z", toDatetime)
				}
				target.spec, target.ts = twinlogv1.OffsetSpec_OFFSET_SPEC_TIMESTAMP, at.UnixMilli()
			}
			if n != 1 {
				return usagef("pass exactly one of --to-earliest, --to-latest, --to-offset N, --to-datetime TIME")
			}
			return a.resetOffsets(cmd.Context(), groupID, normalizeSelectors(sels), target, dryRun)
		},
	}
	f := c.Flags()
	f.StringArrayVar(&topics, "topic", nil, "topic, or topic:P,P for some partitions (repeatable)")
	f.BoolVar(&allTopics, "all-topics", false, "every partition the group has a committed offset for")
	f.BoolVar(&toEarliest, "to-earliest", false, "reset to the log start offset")
	f.BoolVar(&toLatest, "to-latest", false, "reset to the high watermark")
	f.Int64Var(&toOffset, "to-offset", 0, "reset to this offset")
	f.StringVar(&toDatetime, "to-datetime", "", "reset to the first offset at or after this time (RFC 3339)")
	f.BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	return c
}

func (a *app) resetOffsets(parent context.Context, groupID string, sels []TopicSelector, target resetTarget, dryRun bool) error {
	g := a.newGroupsClient()
	ctx, cancel := a.opCtx(parent)
	st, err := g.describeGroup(ctx, groupID)
	cancel()
	if err != nil {
		return err
	}
	var tps []topicPart
	if len(sels) == 0 { // --all-topics
		tps = slices.SortedFunc(maps.Keys(st.committed), compareTopicPart)
		if len(tps) == 0 {
			return fmt.Errorf("group %s has no committed offsets: name the partitions with --topic", groupID)
		}
	} else {
		ctx, cancel := a.opCtx(parent)
		err := a.withRetries(ctx, func() error { return g.refreshLeaders(ctx, topicNames(sels)) })
		cancel()
		if err != nil {
			return err
		}
		var errs []error
		for _, s := range sels {
			if err := g.topicError(s.Topic); err != nil {
				errs = append(errs, err)
				continue
			}
			if len(s.Partitions) == 0 {
				for p := range int32(g.counts[s.Topic]) {
					tps = append(tps, topicPart{s.Topic, p})
				}
			}
			for _, p := range s.Partitions {
				if int(p) >= g.counts[s.Topic] {
					errs = append(errs, protoErr(twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("partition %s-%d", s.Topic, p),
						fmt.Sprintf("topic %s has %d partitions", s.Topic, g.counts[s.Topic]), s.Topic))
				}
				tps = append(tps, topicPart{s.Topic, p})
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	next, err := a.resetPlan(parent, g, tps, target)
	if err != nil {
		return err
	}
	rows := make([]resetView, 0, len(tps))
	for _, tp := range tps {
		r := resetView{Group: groupID, Topic: tp.topic, Partition: tp.partition, NewOffset: next[tp], DryRun: dryRun}
		if o := st.committed[tp]; o != nil && o.GetOffset() >= 0 {
			r.PreviousOffset = new(o.GetOffset())
		}
		rows = append(rows, r)
	}
	if dryRun {
		if n := len(st.desc.GetMembers()); n > 0 {
			fmt.Fprintf(a.opts.Stderr, "twinctl: warning: group %s has %d active members (%s): the coordinator will refuse this reset until its consumers stop\n", groupID, n, st.desc.GetState())
		}
		return renderResets(a.printer(), rows)
	}
	req := &twinlogv1.CommitOffsetsRequest{GroupId: groupID}
	for _, tp := range tps {
		req.Offsets = append(req.Offsets, &twinlogv1.CommittedOffset{Topic: tp.topic, Partition: tp.partition, Offset: next[tp], LeaderEpoch: -1})
	}
	var results map[topicPart]*twinlogv1.CommittedOffset
	ctx, cancel = a.opCtx(parent)
	err = g.atCoordinator(ctx, groupID, func(ctx context.Context, gs twinlogv1.GroupServiceClient, coord brokerAddr) error {
		results = nil // only the last attempt's answer counts
		resp, err := gs.CommitOffsets(ctx, req)
		if err != nil {
			return transportErr(err, coord.addr, "commit offsets")
		}
		results = map[topicPart]*twinlogv1.CommittedOffset{}
		for _, r := range resp.GetResults() {
			results[topicPart{r.GetTopic(), r.GetPartition()}] = r
		}
		// One commit: a retriable code on any partition (the coordinator
		// moved or is loading) sends the whole commit again.
		for _, tp := range tps {
			if r := results[tp]; r != nil && errcode.Of(r.GetError()).Retriable {
				return groupErr(r.GetError(), groupID, "")
			}
		}
		return nil
	})
	cancel()
	if err != nil && results == nil {
		return err
	}
	var errs []error
	if err != nil {
		errs = append(errs, err) // gave up on a retriable code: the rows say which
	}
	byCode := map[twinlogv1.ErrorCode][]string{}
	for i, tp := range tps {
		r := results[tp]
		switch {
		case r == nil:
			rows[i].Error = "NO_ANSWER"
			errs = append(errs, fmt.Errorf("partition %s: the coordinator answered nothing for it; check with `twinctl groups describe %s`", tp, groupID))
		case r.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE:
			rows[i].Error = codeName(r.GetError())
			byCode[r.GetError()] = append(byCode[r.GetError()], tp.String())
		}
	}
	// One error per code, not per partition: a group with members fails
	// every partition with UNKNOWN_MEMBER_ID.
	for _, c := range slices.Sorted(maps.Keys(byCode)) {
		if err != nil && errcode.Of(c).Retriable {
			continue // said by the gave-up error
		}
		perr := groupErr(c, groupID, "")
		var pe *ProtocolError
		if errors.As(perr, &pe) && len(byCode[c]) < len(tps) {
			pe.Subject = fmt.Sprintf("group %s partitions %s", groupID, strings.Join(byCode[c], ", "))
		}
		errs = append(errs, perr)
	}
	if err := renderResets(a.printer(), rows); err != nil {
		return err
	}
	return errors.Join(errs...)
}

func topicNames(sels []TopicSelector) []string {
	out := make([]string, 0, len(sels))
	for _, s := range sels {
		out = append(out, s.Topic)
	}
	return out
}

// resetPlan computes each partition's new offset for target.
func (a *app) resetPlan(parent context.Context, g *groupsClient, tps []topicPart, target resetTarget) (map[topicPart]int64, error) {
	lookup := func(spec twinlogv1.OffsetSpec, ts int64) (map[topicPart]int64, error) {
		ctx, cancel := a.opCtx(parent)
		defer cancel()
		return g.listOffsets(ctx, tps, spec, ts)
	}
	switch target.spec {
	case twinlogv1.OffsetSpec_OFFSET_SPEC_EARLIEST, twinlogv1.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK:
		return lookup(target.spec, 0)
	}
	// --to-offset and --to-datetime need the high watermark too: the
	// former to stay below it, the latter when no record is that new.
	hws, err := lookup(twinlogv1.OffsetSpec_OFFSET_SPEC_HIGH_WATERMARK, 0)
	if err != nil {
		return nil, err
	}
	if target.spec == twinlogv1.OffsetSpec_OFFSET_SPEC_TIMESTAMP {
		at, err := lookup(twinlogv1.OffsetSpec_OFFSET_SPEC_TIMESTAMP, target.ts)
		if err != nil {
			return nil, err
		}
		for tp, o := range at {
			if o < 0 {
				at[tp] = hws[tp] // no record at or after the time
			}
		}
		return at, nil
	}
	starts, err := lookup(twinlogv1.OffsetSpec_OFFSET_SPEC_EARLIEST, 0)
	if err != nil {
		return nil, err
	}
	out := map[topicPart]int64{}
	for _, tp := range tps {
		o := target.offset
		switch {
		case o > hws[tp]:
			fmt.Fprintf(a.opts.Stderr, "twinctl: warning: partition %s: offset %d is past the high watermark %d; resetting to %d\n", tp, o, hws[tp], hws[tp])
			o = hws[tp]
		case o < starts[tp]:
			fmt.Fprintf(a.opts.Stderr, "twinctl: warning: partition %s: offset %d is below the log start %d; resetting to %d\n", tp, o, starts[tp], starts[tp])
			o = starts[tp]
		}
		out[tp] = o
	}
	return out, nil
}

func (a *app) groupsDelete() *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete groups that have no active members, with their committed offsets",
		Long: `Deletes each group at its coordinator (DeleteGroups). A group with active
members is refused (NON_EMPTY_GROUP): stop its consumers first. Prints one
line per group; fails if any group was not deleted.`,
		Args: minArgs(1, "at least one group id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			g := a.newGroupsClient()
			type row struct {
				Group   string `json:"group"`
				Deleted bool   `json:"deleted"`
				Error   string `json:"error,omitempty"`
				Message string `json:"error_message,omitempty"`
			}
			var (
				rows []row
				errs []error
			)
			for _, id := range args {
				var res *twinlogv1.GroupResult
				ctx, cancel := a.opCtx(cmd.Context())
				err := g.atCoordinator(ctx, id, func(ctx context.Context, gs twinlogv1.GroupServiceClient, coord brokerAddr) error {
					res = nil // only the last attempt's answer counts
					resp, err := gs.DeleteGroups(ctx, &twinlogv1.DeleteGroupsRequest{GroupIds: []string{id}})
					if err != nil {
						return transportErr(err, coord.addr, "delete group")
					}
					for _, r := range resp.GetResults() {
						if r.GetGroupId() == id {
							res = r
						}
					}
					if res == nil {
						return fmt.Errorf("delete group: %s answered without group %s; check with `twinctl groups list`", coord.addr, id)
					}
					return groupErr(res.GetError(), id, res.GetErrorMessage())
				})
				cancel()
				r := row{Group: id, Deleted: err == nil}
				if err != nil {
					errs = append(errs, err)
					r.Error = "FAILED"
					if res != nil {
						r.Error, r.Message = codeName(res.GetError()), res.GetErrorMessage()
					}
				}
				rows = append(rows, r)
			}
			p := a.printer()
			if p.json {
				enc := jsonLine{w: p.w}
				for _, r := range rows {
					if err := enc.write(r); err != nil {
						return err
					}
				}
				return errors.Join(errs...)
			}
			table := make([][]string, 0, len(rows))
			for _, r := range rows {
				result := "deleted"
				if !r.Deleted {
					result = "not deleted: " + r.Error
				}
				table = append(table, []string{r.Group, result})
			}
			if err := p.table([]string{"GROUP", "RESULT"}, table); err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
}
