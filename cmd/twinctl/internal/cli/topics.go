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

// topicView is the JSON shape of one topic.
type topicView struct {
	Name       string          `json:"name"`
	TopicID    string          `json:"topic_id"`
	Internal   bool            `json:"internal"`
	Error      string          `json:"error,omitempty"`
	Partitions []partitionView `json:"partitions"`
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
			Name       string `json:"name"`
			TopicID    string `json:"topic_id"`
			Partitions int    `json:"partitions"`
			Internal   bool   `json:"internal"`
		}
		rows := make([]row, 0, len(ts))
		for _, t := range ts {
			rows = append(rows, row{t.Name, t.TopicID, len(t.Partitions), t.Internal})
		}
		return p.emitJSON(rows)
	}
	rows := make([][]string, 0, len(ts))
	for _, t := range ts {
		rows = append(rows, []string{t.Name, t.TopicID, strconv.Itoa(len(t.Partitions)), yesNo(t.Internal)})
	}
	return p.table([]string{"TOPIC", "TOPIC-ID", "PARTITIONS", "INTERNAL"}, rows)
}

// renderPartitions prints one line per partition, topic errors included.
func renderPartitions(p *printer, ts []topicView) error {
	if p.json {
		return p.emitJSON(ts)
	}
	var rows [][]string
	for _, t := range ts {
		if t.Error != "" {
			rows = append(rows, []string{t.Name, "", "", "", "", "", "", "", "", t.Error})
		}
		for _, pv := range t.Partitions {
			rows = append(rows, []string{
				t.Name, strconv.Itoa(int(pv.Partition)), leaderString(pv.Leader), strconv.Itoa(int(pv.LeaderEpoch)),
				joinInts(pv.Replicas), joinInts(pv.ISR), joinInts(pv.ELR), joinInts(pv.LastKnownELR), joinInts(pv.Offline), pv.Error,
			})
		}
	}
	return p.table([]string{"TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "ELR", "LAST-KNOWN-ELR", "OFFLINE", "ERROR"}, rows)
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
		if err := p.emitJSON(rows); err != nil {
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
				kept := views[:0]
				for _, v := range views {
					if !v.Internal {
						kept = append(kept, v)
					}
				}
				views = kept
			}
			return renderTopicList(a.printer(), views)
		},
	}
	c.Flags().BoolVar(&internal, "internal", false, "include internal topics such as __mirror_state")
	return c
}

func (a *app) topicsDescribe() *cobra.Command {
	return &cobra.Command{
		Use:   "describe TOPIC...",
		Short: "Show partitions, leaders, ISR and ELR of topics",
		Args:  minArgs(1, "at least one topic name (all topics: `twinctl partitions describe`)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			sels := make([]TopicSelector, len(args))
			for i, t := range args {
				sels[i] = TopicSelector{Topic: t}
			}
			ts, err := a.describe(cmd.Context(), sels, 0)
			if err != nil {
				return err
			}
			views := topicViews(ts)
			if err := renderPartitions(a.printer(), views); err != nil {
				return err
			}
			return topicErrors(views)
		},
	}
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
		Short: "Describe partitions (all topics when none given), following DescribeTopicPartitions pages",
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
			if err := renderPartitions(a.printer(), views); err != nil {
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
