package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// partitionView is the JSON shape of one partition (SPEC §5 fields).
type partitionView struct {
	Topic        string  `json:"topic"`
	Partition    int32   `json:"partition"`
	Error        string  `json:"error,omitempty"`
	Leader       int32   `json:"leader"`
	LeaderEpoch  int32   `json:"leader_epoch"`
	Replicas     []int32 `json:"replicas"`
	ISR          []int32 `json:"isr"`
	ELR          []int32 `json:"elr"`
	LastKnownELR []int32 `json:"last_known_elr"`
	Offline      []int32 `json:"offline_replicas"`
}

// topicView is the JSON shape of one topic (a line of `topics describe
// --json`).
type topicView struct {
	Name     string `json:"name"`
	TopicID  string `json:"topic_id"`
	Internal bool   `json:"internal"`
	// Mirror is the mirror the topic belongs to (read-only while it runs);
	// null when none.
	Mirror     *string         `json:"mirror"`
	Error      string          `json:"error,omitempty"`
	Partitions []partitionView `json:"partitions"`
}

// mirrorColumn is a topic's MIRROR cell: the mirror's name, "" (shown
// "-") when none.
func (t topicView) mirrorColumn() string {
	if t.Mirror == nil {
		return ""
	}
	return *t.Mirror
}

func errString(c twinlogv1.ErrorCode) string {
	if c == twinlogv1.ErrorCode_ERROR_CODE_NONE {
		return ""
	}
	return codeName(c)
}

func topicViews(ts []*twinlogv1.DescribeTopicPartitionsTopicResult) []topicView {
	out := make([]topicView, 0, len(ts))
	for _, t := range ts {
		tv := topicView{Name: t.GetName(), TopicID: t.GetTopicId(), Internal: t.GetIsInternal(), Error: errString(t.GetError()), Partitions: []partitionView{}}
		if m := t.GetMirrorName(); m != "" {
			tv.Mirror = &m
		}
		for _, p := range t.GetPartitions() {
			tv.Partitions = append(tv.Partitions, partitionView{
				Topic: t.GetName(), Partition: p.GetPartitionIndex(), Error: errString(p.GetError()),
				Leader: p.GetLeaderId(), LeaderEpoch: p.GetLeaderEpoch(),
				Replicas: ints(p.GetReplicas()), ISR: ints(p.GetIsr()), ELR: ints(p.GetEligibleLeaderReplicas()),
				LastKnownELR: ints(p.GetLastKnownElr()), Offline: ints(p.GetOfflineReplicas()),
			})
		}
		out = append(out, tv)
	}
	return out
}

// renderTopicList prints one line per topic.
func renderTopicList(p *printer, ts []topicView) error {
	if p.json {
		type row struct {
			Name       string  `json:"name"`
			TopicID    string  `json:"topic_id"`
			Partitions int     `json:"partitions"`
			Internal   bool    `json:"internal"`
			Mirror     *string `json:"mirror"`
		}
		rows := make([]row, 0, len(ts))
		for _, t := range ts {
			rows = append(rows, row{t.Name, t.TopicID, len(t.Partitions), t.Internal, t.Mirror})
		}
		return emitJSONLines(p, rows)
	}
	rows := make([][]string, 0, len(ts))
	for _, t := range ts {
		rows = append(rows, []string{t.Name, t.TopicID, strconv.Itoa(len(t.Partitions)), yesNo(t.Internal), t.mirrorColumn()})
	}
	return p.table([]string{"TOPIC", "TOPIC-ID", "PARTITIONS", "INTERNAL", "MIRROR"}, rows)
}

// renderTopics prints `topics describe`: one line per partition under a
// MIRROR column (the topic's mirror, "-" when none), topic errors
// included; with --json one topic per line, its partitions inside.
func renderTopics(p *printer, ts []topicView) error {
	if p.json {
		return emitJSONLines(p, ts)
	}
	var rows [][]string
	for _, t := range ts {
		if t.Error != "" {
			rows = append(rows, []string{t.Name, "", "", "", "", "", "", "", "", "", t.Error})
		}
		for _, pv := range t.Partitions {
			rows = append(rows, []string{
				t.Name, t.mirrorColumn(), strconv.Itoa(int(pv.Partition)), leaderString(pv.Leader), strconv.Itoa(int(pv.LeaderEpoch)),
				joinInts(pv.Replicas), joinInts(pv.ISR), joinInts(pv.ELR), joinInts(pv.LastKnownELR), joinInts(pv.Offline), pv.Error,
			})
		}
	}
	return p.table([]string{"TOPIC", "MIRROR", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "ELR", "LAST-KNOWN-ELR", "OFFLINE", "ERROR"}, rows)
}

// partitionLine is one line of `partitions describe --json`: the
// partition and its leader's log offsets, null where unknown (no leader,
// the leader unreachable or not answering as leader).
type partitionLine struct {
	partitionView
	LogStartOffset *int64 `json:"log_start_offset"`
	HighWatermark  *int64 `json:"high_watermark"`
	LogEndOffset   *int64 `json:"log_end_offset"`
}

// topicErrorLine is a `partitions describe --json` line for a topic that
// failed as a whole (unknown, not authorized).
type topicErrorLine struct {
	Topic string `json:"topic"`
	Error string `json:"error"`
}

func offsetCell(o *int64) string {
	if o == nil {
		return ""
	}
	return strconv.FormatInt(*o, 10)
}

// renderPartitions prints `partitions describe`: one line per partition
// with its log start offset, high watermark and log end offset (LS, HW,
// LEO: "-" when unknown), topic errors included.
func renderPartitions(p *printer, ts []topicView, offs map[topicPart]logOffsets) error {
	if p.json {
		enc := jsonLine{w: p.w}
		for _, t := range ts {
			if t.Error != "" {
				if err := enc.write(topicErrorLine{t.Name, t.Error}); err != nil {
					return err
				}
			}
			for _, pv := range t.Partitions {
				o := offs[topicPart{t.Name, pv.Partition}]
				if err := enc.write(partitionLine{pv, o.start, o.hw, o.end}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var rows [][]string
	for _, t := range ts {
		if t.Error != "" {
			rows = append(rows, []string{t.Name, "", "", "", "", "", "", "", "", "", "", "", t.Error})
		}
		for _, pv := range t.Partitions {
			o := offs[topicPart{t.Name, pv.Partition}]
			rows = append(rows, []string{
				t.Name, strconv.Itoa(int(pv.Partition)), leaderString(pv.Leader), strconv.Itoa(int(pv.LeaderEpoch)),
				joinInts(pv.Replicas), joinInts(pv.ISR), joinInts(pv.ELR), joinInts(pv.LastKnownELR), joinInts(pv.Offline),
				offsetCell(o.start), offsetCell(o.hw), offsetCell(o.end), pv.Error,
			})
		}
	}
	return p.table([]string{"TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "ELR", "LAST-KNOWN-ELR", "OFFLINE", "LS", "HW", "LEO", "ERROR"}, rows)
}

// describe runs the pager with deadlines and, on a terminal, a progress bar
// once more than one request is needed.
func (a *app) describe(ctx context.Context, sels []TopicSelector, limit int32) ([]*twinlogv1.DescribeTopicPartitionsTopicResult, error) {
	client, err := a.admin()
	if err != nil {
		return nil, err
	}
	var bar *progressbar.ProgressBar
	pager := &Pager{
		Client: client,
		Limit:  limit,
		Call: func(ctx context.Context, f func(context.Context) error) error {
			ctx, cancel := a.rpcCtx(ctx)
			defer cancel()
			return rpcError(f(ctx), a.bootstrap, "describe partitions")
		},
	}
	if a.stderrIsTerminal() {
		pager.OnPage = func(partitions, _ int) {
			if bar == nil {
				bar = progressbar.NewOptions(-1,
					progressbar.OptionSetWriter(a.opts.Stderr),
					progressbar.OptionSetDescription("describing partitions"),
					progressbar.OptionShowCount(),
					progressbar.OptionClearOnFinish())
			}
			_ = bar.Set(partitions)
		}
	}
	ts, err := pager.Describe(ctx, sels)
	if bar != nil {
		_ = bar.Finish()
	}
	return ts, err
}

// topicErrors turns per-topic UNKNOWN_TOPIC_OR_PARTITION and friends into one error.
func topicErrors(ts []topicView) error {
	var errs []error
	for _, t := range ts {
		if t.Error != "" {
			c := twinlogv1.ErrorCode(twinlogv1.ErrorCode_value["ERROR_CODE_"+t.Error])
			errs = append(errs, protoErr(c, "topic "+t.Name, "", t.Name))
		}
		for _, p := range t.Partitions {
			if p.Error != "" {
				c := twinlogv1.ErrorCode(twinlogv1.ErrorCode_value["ERROR_CODE_"+p.Error])
				errs = append(errs, protoErr(c, fmt.Sprintf("partition %s-%d", t.Name, p.Partition), "", t.Name))
			}
		}
	}
	return errors.Join(errs...)
}

func (a *app) topicsCommand() *cobra.Command {
	return group("topics", "Create, list, describe and delete topics",
		a.topicsCreate(), a.topicsList(), a.topicsDescribe(), a.topicsDelete())
}

func (a *app) topicsCreate() *cobra.Command {
	var (
		partitions int32
		rf         int32
		configs    []string
		assignment string
		validate   bool
	)
	c := &cobra.Command{
		Use:   "create TOPIC",
		Short: "Create a topic",
		Example: `  twinctl topics create orders --partitions 6 --replication-factor 3 --config min.insync.replicas=2
  twinctl topics create pinned --replica-assignment "1,2,3;2,3,1"`,
		Args: exactArgs(1, "one topic name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := parseKV(configs, "--config")
			if err != nil {
				return err
			}
			t := &twinlogv1.CreatableTopic{Name: args[0], NumPartitions: partitions, ReplicationFactor: rf, Configs: cfg}
			if assignment != "" {
				for i, part := range strings.Split(assignment, ";") {
					reps, err := parseInt32List(part)
					if err != nil || len(reps) == 0 {
						return usagef("bad --replica-assignment partition %d %q: want broker ids like 1,2,3 separated by ;", i, part)
					}
					t.Assignments = append(t.Assignments, &twinlogv1.ReplicaAssignment{Replicas: reps})
				}
				if !cmd.Flags().Changed("partitions") {
					t.NumPartitions = int32(len(t.Assignments))
				}
				if !cmd.Flags().Changed("replication-factor") {
					t.ReplicationFactor = int32(len(t.Assignments[0].Replicas))
				}
			}
			if t.NumPartitions < 1 {
				return usagef("--partitions must be ≥ 1, got %d", t.NumPartitions)
			}
			if t.ReplicationFactor < 1 {
				return usagef("--replication-factor must be ≥ 1, got %d", t.ReplicationFactor)
			}
			client, err := a.admin()
			if err != nil {
				return err
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			resp, err := client.CreateTopics(ctx, &twinlogv1.CreateTopicsRequest{Topics: []*twinlogv1.CreatableTopic{t}, ValidateOnly: validate})
			if err != nil {
				return rpcError(err, a.bootstrap, "create topic")
			}
			verb := "created"
			if validate {
				verb = "would create" // validate_only changes nothing
			}
			return a.renderTopicResults(resp.GetTopics(), verb)
		},
	}
	f := c.Flags()
	f.Int32Var(&partitions, "partitions", 1, "number of partitions")
	f.Int32Var(&rf, "replication-factor", 3, "replicas per partition")
	f.StringArrayVar(&configs, "config", nil, "topic config KEY=VALUE (repeatable)")
	f.StringVar(&assignment, "replica-assignment", "", "explicit replicas per partition: \"1,2,3;2,3,1\"")
	f.BoolVar(&validate, "validate-only", false, "check the request without creating the topic")
	return c
}

// renderTopicResults prints CreateTopics/DeleteTopics results and fails if
// any topic failed.
func (a *app) renderTopicResults(rs []*twinlogv1.TopicResult, verb string) error {
	type row struct {
		Name    string `json:"name"`
		TopicID string `json:"topic_id,omitempty"`
		Error   string `json:"error,omitempty"`
		Message string `json:"error_message,omitempty"`
	}
	var errs []error
	rows := make([]row, 0, len(rs))
	for _, r := range rs {
		rows = append(rows, row{r.GetName(), r.GetTopicId(), errString(r.GetError()), r.GetErrorMessage()})
		errs = append(errs, protoErr(r.GetError(), "topic "+r.GetName(), r.GetErrorMessage(), r.GetName()))
	}
	p := a.printer()
	if p.json {
		if err := emitJSONLines(p, rows); err != nil {
			return err
		}
	} else {
		for _, r := range rows {
			if r.Error == "" {
				id := ""
				if r.TopicID != "" {
					id = " (id " + r.TopicID + ")"
				}
				fmt.Fprintf(p.w, "%s topic %s%s\n", verb, r.Name, id)
			}
		}
	}
	return errors.Join(errs...)
}

func (a *app) topicsList() *cobra.Command {
	var internal bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List topics",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := a.describe(cmd.Context(), nil, 0)
			if err != nil {
				return err
			}
			views := topicViews(ts)
			if !internal {
				views = withoutInternal(views)
			}
			return renderTopicList(a.printer(), views)
		},
	}
	c.Flags().BoolVar(&internal, "internal", false, "include internal topics such as __mirror_state")
	return c
}

func (a *app) topicsDescribe() *cobra.Command {
	var (
		internal bool
		limit    int32
	)
	c := &cobra.Command{
		Use:   "describe [TOPIC...]",
		Short: "Show partitions, leaders, ISR, ELR and the mirror of topics (all topics when none given)",
		Long: `Describes the named topics, or every topic when none is given (internal
topics only with --internal), following DescribeTopicPartitions pages. MIRROR
names the mirror a topic belongs to: its partitions take records only from
the mirror until it is stopped. Log offsets per partition: twinctl partitions describe.`,
		Example: `  twinctl topics describe
  twinctl topics describe orders payments --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usagef("--page-limit must be ≥ 0, got %d", limit)
			}
			sels := make([]TopicSelector, len(args))
			for i, t := range args {
				sels[i] = TopicSelector{Topic: t}
			}
			ts, err := a.describe(cmd.Context(), sels, limit)
			if err != nil {
				return err
			}
			views := topicViews(ts)
			if len(args) == 0 && !internal {
				views = withoutInternal(views)
			}
			if err := renderTopics(a.printer(), views); err != nil {
				return err
			}
			return topicErrors(views)
		},
	}
	c.Flags().BoolVar(&internal, "internal", false, "with no topic named, include internal topics such as __mirror_state")
	c.Flags().Int32Var(&limit, "page-limit", 0, "partitions per response page (0: server's max.request.partition.size.limit)")
	return c
}

// withoutInternal drops the internal topics (__mirror_state,
// __consumer_offsets) from a listing of every topic.
func withoutInternal(views []topicView) []topicView {
	kept := views[:0]
	for _, v := range views {
		if !v.Internal {
			kept = append(kept, v)
		}
	}
	return kept
}

func (a *app) topicsDelete() *cobra.Command {
	return &cobra.Command{
		Use:   "delete TOPIC...",
		Short: "Delete topics",
		Args:  minArgs(1, "at least one topic name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := a.admin()
			if err != nil {
				return err
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			resp, err := client.DeleteTopics(ctx, &twinlogv1.DeleteTopicsRequest{Names: args})
			if err != nil {
				return rpcError(err, a.bootstrap, "delete topics")
			}
			return a.renderTopicResults(resp.GetTopics(), "deleted")
		},
	}
}

func (a *app) partitionsCommand() *cobra.Command {
	var limit int32
	describe := &cobra.Command{
		Use:   "describe [TOPIC[:P,P...]...]",
		Short: "Describe partitions and their log offsets (all topics when none given), following DescribeTopicPartitions pages",
		Long: `Describes partitions (all topics when none given), following
DescribeTopicPartitions pages, with each leader's log start offset (LS),
high watermark (HW: consumers read below it) and log end offset (LEO), asked
of the leaders (ListOffsets). "-" (null with --json) where the leader is
unknown, unreachable or no longer leads the partition.`,
		Example: `  twinctl partitions describe
  twinctl partitions describe orders:0,3 payments --page-limit 500`,
		RunE: func(cmd *cobra.Command, args []string) error {
			sels, err := parseSelectors(args)
			if err != nil {
				return err
			}
			if limit < 0 {
				return usagef("--page-limit must be ≥ 0, got %d", limit)
			}
			ts, err := a.describe(cmd.Context(), sels, limit)
			if err != nil {
				return err
			}
			views := topicViews(ts)
			offs := a.logOffsets(cmd.Context(), views)
			if err := renderPartitions(a.printer(), views, offs); err != nil {
				return err
			}
			return topicErrors(views)
		},
	}
	describe.Flags().Int32Var(&limit, "page-limit", 0, "partitions per response page (0: server's max.request.partition.size.limit)")
	return group("partitions", "Inspect partitions", describe)
}

func parseKV(items []string, flag string) (map[string]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(items))
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		if !ok || k == "" {
			return nil, usagef("bad %s %q: want KEY=VALUE", flag, it)
		}
		m[k] = v
	}
	return m, nil
}

func parseInt32List(s string) ([]int32, error) {
	var out []int32
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, err
		}
		out = append(out, int32(n))
	}
	return out, nil
}
