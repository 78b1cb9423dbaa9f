package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

func stateName(s twinlogv1.MirrorState) string {
	return strings.TrimPrefix(s.String(), "MIRROR_STATE_")
}

func (a *app) mirrorsCommand() *cobra.Command {
	subs := []*cobra.Command{
		a.mirrorsCreate(), a.mirrorsDescribe(), a.mirrorsDelete(),
		a.mirrorsAction("pause", "Pause mirroring (MIRRORING → PAUSED; topics stay read-only)"),
		a.mirrorsAction("resume", "Resume paused topics from their LEO"),
		a.mirrorsStop(), a.mirrorsStart(),
	}
	for _, c := range subs {
		run := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error { return a.unknownMirrorHint(run(cmd, args)) }
	}
	return group("mirrors", "Manage cross-cluster mirrors on the destination controller (SPEC §6)", subs...)
}

// unknownMirrorHint gives every UNKNOWN_MIRROR in err the likely reason: a
// mirror is defined on its destination cluster's controller, and an
// operator who points --bootstrap at the source cluster finds none there.
func (a *app) unknownMirrorHint(err error) error {
	hint := fmt.Sprintf("mirrors live on their destination cluster's controller: if %s is the source cluster's, point --bootstrap at the destination's; `twinctl mirrors describe` lists the mirrors here", a.bootstrap)
	walkProtocolErrors(err, func(pe *ProtocolError) {
		if pe.Code == twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MIRROR {
			pe.Hint = hint
		}
	})
	return err
}

// sourceCheckTimeout bounds each --source probe: an address twinctl cannot
// reach is no reason to wait (the destination controller may reach it).
const sourceCheckTimeout = 2 * time.Second

// checkSource refuses a --source list of controllers only: a mirror reads
// from the source cluster's brokers (FetchService), and with no broker in
// the list every topic would stay refused. It is best effort: the list
// passes as soon as one address answers as a broker, or if one cannot be
// reached from here (the destination controller may well reach it).
func (a *app) checkSource(ctx context.Context, source []string) error {
	var controllers []string
	for _, addr := range source {
		cc, err := a.conn(addr)
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, min(a.timeout, sourceCheckTimeout))
		_, err = twinlogv1.NewFetchServiceClient(cc).ListOffsets(rctx, &twinlogv1.ListOffsetsRequest{})
		cancel()
		if status.Code(err) != codes.Unimplemented {
			return nil
		}
		controllers = append(controllers, addr)
	}
	if len(controllers) == 0 {
		return nil
	}
	msg := fmt.Sprintf("--source %s: not a broker (it does not serve FetchService; a controller?): a mirror reads from the source cluster's brokers, so pass their addresses", strings.Join(controllers, ","))
	if cc, err := a.conn(controllers[0]); err == nil {
		rctx, cancel := context.WithTimeout(ctx, min(a.timeout, sourceCheckTimeout))
		resp, lerr := twinlogv1.NewAdminServiceClient(cc).ListBrokers(rctx, &twinlogv1.ListBrokersRequest{})
		cancel()
		var bs []string
		if lerr == nil {
			for _, b := range resp.GetBrokers() {
				bs = append(bs, net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort()))))
			}
		}
		if len(bs) > 0 {
			msg += ", e.g. --source " + strings.Join(bs, ",") + " (the brokers " + controllers[0] + " lists)"
		}
	}
	return usagef("%s", msg)
}

func splitList(s []string) []string {
	var out []string
	for _, x := range s {
		for y := range strings.SplitSeq(x, ",") {
			if y = strings.TrimSpace(y); y != "" {
				out = append(out, y)
			}
		}
	}
	return out
}

// renderMirrorTopicResults prints per-topic results and fails if any failed
// or if the answer leaves out a requested topic: a server that answers
// nothing for a topic has not done anything to it, and exit 0 would say it
// had. okWord "" prints no line for the topics that succeeded (mirrors
// create, where a partly failed request created nothing the operator asked
// for as a whole).
func (a *app) renderMirrorTopicResults(mirror string, requested []string, rs []*twinlogv1.MirrorTopicResult, okWord string) error {
	type row struct {
		Mirror  string `json:"mirror"`
		Topic   string `json:"topic"`
		Error   string `json:"error,omitempty"`
		Message string `json:"error_message,omitempty"`
	}
	rows := make([]row, 0, len(rs))
	var errs []error
	for _, r := range rs {
		rows = append(rows, row{mirror, r.GetTopic(), errString(r.GetError()), r.GetErrorMessage()})
		errs = append(errs, mirrorErr(r.GetError(), mirror, r.GetTopic(), r.GetErrorMessage()))
	}
	errs = append(errs, missingMirrorResults(mirror, requested, answeredTopics(rs)))
	p := a.printer()
	if p.json {
		if err := emitJSONLines(p, rows); err != nil {
			return err
		}
		return errors.Join(errs...)
	}
	if okWord != "" {
		for _, r := range rows {
			if r.Error == "" {
				fmt.Fprintf(p.w, "mirror %s topic %s: %s\n", mirror, r.Topic, okWord)
			}
		}
	}
	return errors.Join(errs...)
}

// missingMirrorResults names the requested topics the server gave no
// result for, or says that it answered nothing at all.
func missingMirrorResults(mirror string, requested []string, answered map[string]bool) error {
	if len(requested) > 0 && len(answered) == 0 {
		return fmt.Errorf("mirror %s: the controller answered no topic results; nothing is known to have changed (see `twinctl mirrors describe %s`)", mirror, mirror)
	}
	var missing []string
	for _, t := range requested {
		if !answered[t] {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("mirror %s: no result for topic(s) %s (see `twinctl mirrors describe %s`)", mirror, strings.Join(missing, ", "), mirror)
	}
	return nil
}

// answeredTopics is the set of topics that have a result.
func answeredTopics(rs []*twinlogv1.MirrorTopicResult) map[string]bool {
	m := make(map[string]bool, len(rs))
	for _, r := range rs {
		m[r.GetTopic()] = true
	}
	return m
}

// mirrorResultsFailed reports whether any per-topic result carries an error.
func mirrorResultsFailed(rs []*twinlogv1.MirrorTopicResult) bool {
	for _, r := range rs {
		if r.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
			return true
		}
	}
	return false
}

// mirrorTopicsOrAll returns topics if any are given, else every topic of
// the mirror as DescribeMirrors reports it, in first-seen order. The help of
// stop, pause, resume and start promises "all topics of the mirror when
// none given"; the controller acts only on the topics a request names (an
// empty list changes nothing and answers no results), so the CLI names them.
// An unknown mirror is UNKNOWN_MIRROR, and a mirror without topics is an
// error rather than a successful no-op.
func mirrorTopicsOrAll(ctx context.Context, client twinlogv1.MirrorServiceClient, addr, mirror string, topics []string) ([]string, error) {
	if len(topics) > 0 {
		return topics, nil
	}
	resp, err := client.DescribeMirrors(ctx, &twinlogv1.DescribeMirrorsRequest{Names: []string{mirror}})
	if err != nil {
		return nil, describeMirrorsError(err, addr, []string{mirror})
	}
	var found bool
	var all []string
	for _, m := range resp.GetMirrors() {
		if m.GetName() != mirror {
			continue
		}
		found = true
		for _, p := range m.GetPartitions() {
			if !slices.Contains(all, p.GetTopic()) {
				all = append(all, p.GetTopic())
			}
		}
	}
	if !found {
		return nil, protoErr(twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MIRROR, "mirror "+mirror, "", "")
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("mirror %s has no topics to act on: name them explicitly (see `twinctl mirrors describe %s`)", mirror, mirror)
	}
	return all, nil
}

// describeMirrorsError turns a DescribeMirrors failure into an operator
// message. The controller answers a request naming an unknown mirror with
// gRPC NotFound (not a body error code); that is UNKNOWN_MIRROR here, so
// every mirror command reports an unknown name alike.
func describeMirrorsError(err error, addr string, names []string) error {
	if st, ok := status.FromError(err); ok && st.Code() == codes.NotFound {
		msg := ""
		if len(names) != 1 {
			msg = st.Message() // says which of the names
		}
		return protoErr(twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MIRROR, "mirror "+strings.Join(names, ", "), msg, "")
	}
	return rpcError(err, addr, "describe mirrors")
}

func mirrorErr(c twinlogv1.ErrorCode, mirror, topic, msg string) error {
	subject := "mirror " + mirror
	if topic != "" {
		subject += " topic " + topic
	}
	return protoErr(c, subject, msg, topic)
}

func (a *app) mirrorsCreate() *cobra.Command {
	var source []string
	var dryRun bool
	c := &cobra.Command{
		Use:     "create NAME --source HOST:PORT[,...] TOPIC...",
		Short:   "Create a mirror pulling TOPICs from the source cluster",
		Example: "  twinctl --bootstrap 127.0.0.1:9100 mirrors create a-to-b --source 127.0.0.1:9091,127.0.0.1:9092 orders",
		Args:    minArgs(2, "a mirror name and at least one topic"),
		RunE: func(cmd *cobra.Command, args []string) error {
			src := splitList(source)
			if len(src) == 0 {
				return usagef("--source is required: the source cluster's broker addresses")
			}
			if err := a.checkSource(cmd.Context(), src); err != nil {
				return err
			}
			client, err := a.mirrorClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			if dryRun {
				vs, err := previewTruncation(ctx, client, args[0], src, args[1:])
				if err != nil {
					return rpcError(err, a.bootstrap, "preview mirror truncation")
				}
				return a.renderTruncationPreview(vs)
			}
			a.noteTruncation(cmd.Context(), client, args[0], src, args[1:])
			ctx, cancel = a.rpcCtx(cmd.Context()) // the create's own deadline, whatever the preview took
			defer cancel()
			resp, err := client.CreateMirror(ctx, &twinlogv1.CreateMirrorRequest{Name: args[0], SourceBootstrap: src, Topics: args[1:]})
			if err != nil {
				return rpcError(err, a.bootstrap, "create mirror")
			}
			if err := mirrorErr(resp.GetError(), args[0], "", resp.GetErrorMessage()); err != nil {
				return err
			}
			// A create with any failed topic is reported as failed as a
			// whole: no "created" line, a non-zero exit.
			if mirrorResultsFailed(resp.GetTopics()) {
				err := a.renderMirrorTopicResults(args[0], args[1:], resp.GetTopics(), "")
				return fmt.Errorf("%w\nmirror %s was not created as asked: check `twinctl mirrors describe %s` for what exists", err, args[0], args[0])
			}
			return a.renderMirrorTopicResults(args[0], args[1:], resp.GetTopics(), "created")
		},
	}
	c.Flags().StringSliceVar(&source, "source", nil, "source cluster bootstrap addresses (comma-separated or repeated)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "show per partition what the start would truncate here (a failback's LMLE cut) and create nothing")
	return c
}

func (a *app) mirrorsDelete() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a mirror whose topics are all STOPPED",
		Args:  exactArgs(1, "one mirror name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := a.mirrorClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			resp, err := client.DeleteMirror(ctx, &twinlogv1.DeleteMirrorRequest{Name: args[0]})
			if err != nil {
				return rpcError(err, a.bootstrap, "delete mirror")
			}
			if err := mirrorErr(resp.GetError(), args[0], "", resp.GetErrorMessage()); err != nil {
				if resp.GetError() == twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST {
					return fmt.Errorf("%w: stop all its topics first with `twinctl mirrors stop %s`", err, args[0])
				}
				return err
			}
			if a.json {
				return a.printer().emitJSON(map[string]any{"mirror": args[0], "deleted": true})
			}
			fmt.Fprintf(a.opts.Stdout, "deleted mirror %s\n", args[0])
			return nil
		},
	}
}

// mirrorsAction builds pause and resume, which share one request shape.
func (a *app) mirrorsAction(verb, short string) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " NAME [TOPIC...]",
		Short: short + "; all topics of the mirror when none given",
		Args:  minArgs(1, "a mirror name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := a.mirrorClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			topics, err := mirrorTopicsOrAll(ctx, client, a.bootstrap, args[0], args[1:])
			if err != nil {
				return err
			}
			var rs []*twinlogv1.MirrorTopicResult
			if verb == "pause" {
				resp, err := client.PauseMirrorTopics(ctx, &twinlogv1.PauseMirrorTopicsRequest{Mirror: args[0], Topics: topics})
				if err != nil {
					return rpcError(err, a.bootstrap, "pause mirror")
				}
				rs = resp.GetTopics()
			} else {
				resp, err := client.ResumeMirrorTopics(ctx, &twinlogv1.ResumeMirrorTopicsRequest{Mirror: args[0], Topics: topics})
				if err != nil {
					return rpcError(err, a.bootstrap, "resume mirror")
				}
				rs = resp.GetTopics()
			}
			return a.renderMirrorTopicResults(args[0], topics, rs, verb+"d")
		},
	}
}

func (a *app) mirrorsStop() *cobra.Command {
	var (
		wait, noWait                bool
		waitTimeout, stoppedTimeout time.Duration
	)
	c := &cobra.Command{
		Use:   "stop NAME [TOPIC...]",
		Short: "Stop mirroring and make the topics writable here (failover, SPEC §6.7); all topics of the mirror when none given",
		Long: `Stop records the last mirrored leader epoch and makes the topics writable on
this cluster. With --wait-for-catch-up it first waits for lag 0 and fails with
REQUEST_TIMED_OUT (changing nothing) if that takes longer than --wait-timeout.
Stop works from FAILED too, for disaster recovery when the source is gone.`,
		Args: minArgs(1, "a mirror name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !noWait && stoppedTimeout <= 0 {
				return usagef("--stopped-timeout must be positive (got %v); use --no-wait not to wait", stoppedTimeout)
			}
			client, err := a.mirrorClient()
			if err != nil {
				return err
			}
			// The server may wait up to waitTimeout for catch-up, so the RPC
			// deadline covers that plus the usual --timeout.
			ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout+waitTimeout)
			defer cancel()
			topics, err := mirrorTopicsOrAll(ctx, client, a.bootstrap, args[0], args[1:])
			if err != nil {
				return err
			}
			req := &twinlogv1.StopMirrorTopicsRequest{Mirror: args[0], Topics: topics, WaitForCatchUp: wait}
			if wait {
				req.TimeoutMs = int32(waitTimeout / time.Millisecond)
			}
			resp, err := client.StopMirrorTopics(ctx, req)
			if err != nil {
				return rpcError(err, a.bootstrap, "stop mirror")
			}
			if mirrorResultsFailed(resp.GetTopics()) || missingMirrorResults(args[0], topics, answeredTopics(resp.GetTopics())) != nil {
				// Some topics failed: the others' stop is recorded but
				// not yet applied; do not call them writable.
				return a.renderMirrorTopicResults(args[0], topics, resp.GetTopics(), "stop recorded (partitions turn writable shortly)")
			}
			// The controller records the desired state; each partition's
			// leader then bumps its epoch, records the LMLE and only then
			// accepts produce (SPEC §6.7). Report "writable" when it is.
			if noWait {
				return a.renderMirrorTopicResults(args[0], topics, resp.GetTopics(), "stop recorded (partitions turn writable shortly)")
			}
			wctx, wcancel := context.WithTimeout(cmd.Context(), stoppedTimeout)
			defer wcancel()
			if err := waitStopped(wctx, client, args[0], topics); err != nil {
				return fmt.Errorf("mirror %s: stop recorded, but %w (see `twinctl mirrors describe %s`)", args[0], err, args[0])
			}
			return a.renderMirrorTopicResults(args[0], topics, resp.GetTopics(), "stopped (writable)")
		},
	}
	c.Flags().BoolVar(&wait, "wait-for-catch-up", false, "wait until the mirror has no lag before stopping")
	c.Flags().DurationVar(&waitTimeout, "wait-timeout", 30*time.Second, "how long the server may wait for catch-up")
	c.Flags().BoolVar(&noWait, "no-wait", false, "return once the stop is recorded, before the partitions are writable")
	c.Flags().DurationVar(&stoppedTimeout, "stopped-timeout", 30*time.Second, "how long to wait for every partition to be STOPPED (writable)")
	return c
}

func (a *app) mirrorsStart() *cobra.Command {
	var source []string
	var dryRun bool
	c := &cobra.Command{
		Use:   "start NAME [TOPIC...] [--source HOST:PORT,...]",
		Short: "Start (or restart) mirroring; --source re-points it, e.g. to fail back",
		Long: `Start mirroring from new, STOPPED or FAILED. To fail back after a failover,
run start on the old source cluster's controller with --source set to the
cluster that took over: the topics are truncated to the last mirrored leader
epoch and then follow (SPEC §6.6). Before it starts, it prints per partition
the records that truncation removes (those this cluster wrote after its last
failover); --dry-run prints the whole preview and starts nothing.`,
		Example: "  twinctl --bootstrap 127.0.0.1:9090 mirrors start b-to-a orders --source 127.0.0.1:9101",
		Args:    minArgs(1, "a mirror name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.checkSource(cmd.Context(), splitList(source)); err != nil {
				return err
			}
			client, err := a.mirrorClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			topics, err := mirrorTopicsOrAll(ctx, client, a.bootstrap, args[0], args[1:])
			if err != nil {
				return err
			}
			if dryRun {
				vs, err := previewTruncation(ctx, client, args[0], splitList(source), topics)
				if err != nil {
					return rpcError(err, a.bootstrap, "preview mirror truncation")
				}
				return a.renderTruncationPreview(vs)
			}
			a.noteTruncation(cmd.Context(), client, args[0], splitList(source), topics)
			ctx, cancel = a.rpcCtx(cmd.Context()) // the start's own deadline, whatever the preview took
			defer cancel()
			resp, err := client.StartMirrorTopics(ctx, &twinlogv1.StartMirrorTopicsRequest{Mirror: args[0], Topics: topics, SourceBootstrap: splitList(source)})
			if err != nil {
				return rpcError(err, a.bootstrap, "start mirror")
			}
			return a.renderMirrorTopicResults(args[0], topics, resp.GetTopics(), "started")
		},
	}
	c.Flags().StringSliceVar(&source, "source", nil, "new source bootstrap addresses (reverse direction / fail back)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "show per partition what the start would truncate here (the LMLE cut) and start nothing")
	return c
}

type mirrorPartitionView struct {
	Topic          string      `json:"topic"`
	Partition      int32       `json:"partition"`
	State          string      `json:"state"`
	DesiredState   string      `json:"desired_state"`
	Leader         int32       `json:"leader"`
	LeaderEpoch    int32       `json:"leader_epoch"`
	LMLE           int32       `json:"lmle"`
	SourceHW       int64       `json:"source_high_watermark"`
	SourceLEO      int64       `json:"source_log_end_offset"`
	HW             int64       `json:"high_watermark"`
	LEO            int64       `json:"log_end_offset"`
	LagRecords     int64       `json:"lag_records"`
	LagSeconds     float64     `json:"lag_seconds"`
	SkippedReplica []int32     `json:"skipped_replicas"`
	Taints         []taintView `json:"taints"`
	LastError      string      `json:"last_error,omitempty"`
	RetryCount     int32       `json:"retry_count"`
	// SourceFetchAge is how long before ReportedAt the last fetch response
	// from the source arrived (-1: none yet); ReportedAt is when the
	// leader computed these figures ("" when the server does not say).
	SourceFetchAge float64 `json:"source_fetch_age_seconds"`
	ReportedAt     string  `json:"reported_at,omitempty"`
	reportedAtMs   int64
}

type taintView struct {
	Replica int32 `json:"replica"`
	Epoch   int32 `json:"epoch"`
	Offset  int64 `json:"offset"`
}

type mirrorView struct {
	Name            string                `json:"name"`
	SourceBootstrap []string              `json:"source_bootstrap"`
	SourceClusterID string                `json:"source_cluster_id"`
	Partitions      []mirrorPartitionView `json:"partitions"`
	// OffsetSync is the last sync of the source's group offsets (nil
	// before the first).
	OffsetSync *offsetSyncView `json:"offset_sync"`
	// ACLSync is the last ACL sync of the mirror links (nil while
	// mirror.acl.sync.enable is off).
	ACLSync *aclSyncView `json:"acl_sync"`
}

type aclSyncView struct {
	SyncedAt        string `json:"synced_at"`
	SourceBindings  int32  `json:"source_bindings"`
	Created         int32  `json:"created"`
	Removed         int32  `json:"removed"`
	RemovalsSkipped bool   `json:"removals_skipped"`
	Error           string `json:"error"`
	syncedAtMs      int64
}

type offsetSyncView struct {
	SyncedAt                  string `json:"synced_at"`
	Groups                    int32  `json:"groups"`
	OffsetsCommitted          int32  `json:"offsets_committed"`
	OffsetsClamped            int32  `json:"offsets_clamped"`
	GroupsActiveOnDestination int32  `json:"groups_active_on_destination"`
	Error                     string `json:"error"`
	syncedAtMs                int64
}

func mirrorViews(ms []*twinlogv1.MirrorDescription) []mirrorView {
	out := make([]mirrorView, 0, len(ms))
	for _, m := range ms {
		mv := mirrorView{Name: m.GetName(), SourceBootstrap: strs(m.GetSourceBootstrap()), SourceClusterID: m.GetSourceClusterId(), Partitions: []mirrorPartitionView{}}
		if st := m.GetOffsetSync(); st != nil {
			mv.OffsetSync = &offsetSyncView{
				SyncedAt: time.UnixMilli(st.GetSyncedAtMs()).UTC().Format(time.RFC3339Nano), Groups: st.GetGroups(),
				OffsetsCommitted: st.GetOffsetsCommitted(), OffsetsClamped: st.GetOffsetsClamped(),
				GroupsActiveOnDestination: st.GetGroupsActiveOnDestination(), Error: st.GetError(), syncedAtMs: st.GetSyncedAtMs(),
			}
		}
		if st := m.GetAclSync(); st != nil {
			mv.ACLSync = &aclSyncView{
				SyncedAt: time.UnixMilli(st.GetSyncedAtMs()).UTC().Format(time.RFC3339Nano), SourceBindings: st.GetSourceBindings(),
				Created: st.GetCreated(), Removed: st.GetRemoved(), RemovalsSkipped: st.GetRemovalsSkipped(), Error: st.GetError(), syncedAtMs: st.GetSyncedAtMs(),
			}
		}
		for _, p := range m.GetPartitions() {
			pv := mirrorPartitionView{
				Topic: p.GetTopic(), Partition: p.GetPartition(), State: stateName(p.GetState()), DesiredState: stateName(p.GetDesiredState()),
				Leader: p.GetLeaderId(), LeaderEpoch: p.GetLeaderEpoch(), LMLE: p.GetLmle(),
				SourceHW: p.GetSourceHighWatermark(), SourceLEO: p.GetSourceLogEndOffset(), HW: p.GetHighWatermark(), LEO: p.GetLogEndOffset(),
				LagRecords: p.GetLagRecords(), LagSeconds: p.GetLagSeconds(), SkippedReplica: ints(p.GetSkippedReplicas()),
				Taints: []taintView{}, LastError: p.GetLastError(), RetryCount: p.GetRetryCount(),
				SourceFetchAge: p.GetSourceFetchAgeSeconds(), reportedAtMs: p.GetReportedAtMs(),
			}
			if ms := p.GetReportedAtMs(); ms > 0 {
				pv.ReportedAt = time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
			}
			for _, t := range p.GetTaints() {
				pv.Taints = append(pv.Taints, taintView{t.GetReplica(), t.GetEpoch(), t.GetOffset()})
			}
			mv.Partitions = append(mv.Partitions, pv)
		}
		out = append(out, mv)
	}
	return out
}

func renderMirrors(p *printer, ms []mirrorView, now time.Time) error {
	if p.json {
		return emitJSONLines(p, ms) // one mirror per line
	}
	for i, m := range ms {
		if i > 0 {
			fmt.Fprintln(p.w)
		}
		src := m.SourceClusterID
		if src == "" {
			src = "?"
		}
		fmt.Fprintf(p.w, "mirror %s from cluster %s (%s)\n", m.Name, src, strings.Join(m.SourceBootstrap, ","))
		rows := make([][]string, 0, len(m.Partitions))
		for _, pv := range m.Partitions {
			var taints []string
			for _, t := range pv.Taints {
				taints = append(taints, fmt.Sprintf("%d@(%d,%d)", t.Replica, t.Epoch, t.Offset))
			}
			errCol := pv.LastError
			if pv.RetryCount > 0 {
				errCol = fmt.Sprintf("%s (retry %d)", errCol, pv.RetryCount)
			}
			// "-" for what is not known: the source's offsets before a
			// fetch of this run, the lag outside MIRRORING, the fetch age
			// from a server that does not report it.
			src, lag, lagS, fetched := "-", "-", "-", "-"
			if pv.SourceHW >= 0 {
				src = fmt.Sprintf("%d/%d", pv.SourceHW, pv.SourceLEO)
			}
			if pv.State == "MIRRORING" && pv.SourceHW >= 0 {
				lag, lagS = strconv.FormatInt(pv.LagRecords, 10), strconv.FormatFloat(pv.LagSeconds, 'f', 1, 64)
			}
			if pv.reportedAtMs > 0 && pv.SourceFetchAge >= 0 {
				// The figures were reported a while ago: the fetch is that
				// much older now.
				age := pv.SourceFetchAge + float64(max(0, now.UnixMilli()-pv.reportedAtMs))/1000
				fetched = strconv.FormatFloat(age, 'f', 1, 64) + "s ago"
			}
			rows = append(rows, []string{
				pv.Topic, strconv.Itoa(int(pv.Partition)), pv.State, pv.DesiredState, leaderString(pv.Leader),
				strconv.Itoa(int(pv.LMLE)), src, fmt.Sprintf("%d/%d", pv.HW, pv.LEO),
				lag, lagS, fetched, joinInts(pv.SkippedReplica), strings.Join(taints, ","), errCol,
			})
		}
		if err := p.table([]string{"TOPIC", "PARTITION", "STATE", "DESIRED", "LEADER", "LMLE", "SRC-HW/LEO", "HW/LEO", "LAG", "LAG-S", "FETCHED", "SKIPPED", "TAINTS", "LAST-ERROR"}, rows); err != nil {
			return err
		}
		if st := m.OffsetSync; st != nil {
			age := float64(max(0, now.UnixMilli()-st.syncedAtMs)) / 1000
			fmt.Fprintf(p.w, "offset sync %ss ago: %d groups, %d offsets committed (%d clamped to the high watermark), %d groups active here left alone",
				strconv.FormatFloat(age, 'f', 1, 64), st.Groups, st.OffsetsCommitted, st.OffsetsClamped, st.GroupsActiveOnDestination)
			if st.Error != "" {
				fmt.Fprintf(p.w, "; error: %s", st.Error)
			}
			fmt.Fprintln(p.w)
		}
		if st := m.ACLSync; st != nil {
			age := float64(max(0, now.UnixMilli()-st.syncedAtMs)) / 1000
			fmt.Fprintf(p.w, "ACL sync %ss ago: %d bindings read from the source; %d created, %d removed here (all links)",
				strconv.FormatFloat(age, 'f', 1, 64), st.SourceBindings, st.Created, st.Removed)
			if st.RemovalsSkipped {
				fmt.Fprint(p.w, "; removals skipped: a source did not answer")
			}
			if st.Error != "" {
				fmt.Fprintf(p.w, "; error: %s", st.Error)
			}
			fmt.Fprintln(p.w)
		}
	}
	return nil
}

func (a *app) mirrorsDescribe() *cobra.Command {
	return &cobra.Command{
		Use:   "describe [NAME...]",
		Short: "Show mirror partition states, LMLE, lag, taints and errors (SPEC §6.11)",
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := a.mirrorClient()
			if err != nil {
				return err
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			resp, err := client.DescribeMirrors(ctx, &twinlogv1.DescribeMirrorsRequest{Names: args})
			if err != nil {
				return describeMirrorsError(err, a.bootstrap, args)
			}
			views := mirrorViews(resp.GetMirrors())
			if err := renderMirrors(a.printer(), views, a.opts.Now()); err != nil {
				return err
			}
			if len(args) > 0 && len(views) < len(args) {
				found := map[string]bool{}
				for _, v := range views {
					found[v.Name] = true
				}
				for _, n := range args {
					if !found[n] {
						return protoErr(twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_MIRROR, "mirror "+n, "", "")
					}
				}
			}
			return nil
		},
	}
}

// waitStopped polls DescribeMirrors until every partition of topics (all
// of the mirror's when empty) reports STOPPED, or ctx ends; the error then
// names the partitions that are not.
func waitStopped(ctx context.Context, client twinlogv1.MirrorServiceClient, mirror string, topics []string) error {
	want := map[string]bool{}
	for _, t := range topics {
		want[t] = true
	}
	var pending []string // as of the last answered poll
	for {
		resp, err := client.DescribeMirrors(ctx, &twinlogv1.DescribeMirrorsRequest{Names: []string{mirror}})
		if err == nil {
			pending = pending[:0]
			for _, m := range resp.GetMirrors() {
				for _, p := range m.GetPartitions() {
					if (len(want) == 0 || want[p.GetTopic()]) && p.GetState() != twinlogv1.MirrorState_MIRROR_STATE_STOPPED {
						pending = append(pending, fmt.Sprintf("%s-%d %s", p.GetTopic(), p.GetPartition(),
							strings.TrimPrefix(p.GetState().String(), "MIRROR_STATE_")))
					}
				}
			}
			if len(pending) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			// The deadline may end a poll in flight: report the last
			// answered one, and the describe error only if none answered.
			if pending == nil {
				return fmt.Errorf("describe mirror: %w", err)
			}
			return fmt.Errorf("not every partition is STOPPED yet: %s", strings.Join(pending, ", "))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
