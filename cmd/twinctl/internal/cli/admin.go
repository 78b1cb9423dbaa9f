package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// ---- configs ----

func (a *app) configsCommand() *cobra.Command {
	return group("configs", "Read and change topic or cluster configs (SPEC §1.3)", a.configsGet(), a.configsSet())
}

// resourceFlags selects --topic NAME or --cluster.
type resourceFlags struct {
	topic   string
	cluster bool
}

func (r *resourceFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&r.topic, "topic", "", "topic whose configs to use")
	c.Flags().BoolVar(&r.cluster, "cluster", false, "use the cluster-wide configs")
}

func (r *resourceFlags) resource() (*twinlogv1.ConfigResource, error) {
	switch {
	case r.topic != "" && r.cluster:
		return nil, usagef("pass either --topic NAME or --cluster, not both")
	case r.topic != "":
		return &twinlogv1.ConfigResource{Type: twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: r.topic}, nil
	case r.cluster:
		return &twinlogv1.ConfigResource{Type: twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_CLUSTER}, nil
	}
	return nil, usagef("pass --topic NAME or --cluster")
}

func resourceString(r *twinlogv1.ConfigResource) string {
	if r.GetType() == twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC {
		return "topic " + r.GetName()
	}
	if r.GetType() == twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER {
		return "broker " + r.GetName()
	}
	return "cluster"
}

type configView struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

func sourceName(s twinlogv1.ConfigSource) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "CONFIG_SOURCE_"))
}

func renderConfigs(p *printer, entries []*twinlogv1.ConfigEntry) error {
	views := make([]configView, 0, len(entries))
	for _, e := range entries {
		views = append(views, configView{e.GetName(), e.GetValue(), sourceName(e.GetSource())})
	}
	slices.SortFunc(views, func(x, y configView) int { return strings.Compare(x.Name, y.Name) })
	if p.json {
		return emitJSONLines(p, views)
	}
	rows := make([][]string, 0, len(views))
	for _, v := range views {
		rows = append(rows, []string{v.Name, v.Value, v.Source})
	}
	return p.table([]string{"KEY", "VALUE", "SOURCE"}, rows)
}

func (a *app) configsGet() *cobra.Command {
	var r resourceFlags
	c := &cobra.Command{
		Use:     "get (--topic NAME | --cluster)",
		Short:   "Show effective configs and where each comes from",
		Example: "  twinctl configs get --topic orders\n  twinctl configs get --cluster",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := r.resource()
			if err != nil {
				return err
			}
			client, err := a.admin()
			if err != nil {
				return err
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			resp, err := client.DescribeConfigs(ctx, &twinlogv1.DescribeConfigsRequest{Resources: []*twinlogv1.ConfigResource{res}})
			if err != nil {
				return rpcError(err, a.bootstrap, "describe configs")
			}
			var entries []*twinlogv1.ConfigEntry
			for _, rr := range resp.GetResults() {
				if err := protoErr(rr.GetError(), resourceString(res), rr.GetErrorMessage(), r.topic); err != nil {
					return err
				}
				entries = append(entries, rr.GetEntries()...)
			}
			return renderConfigs(a.printer(), entries)
		},
	}
	r.add(c)
	return c
}

func (a *app) configsSet() *cobra.Command {
	var (
		r        resourceFlags
		deletes  []string
		validate bool
	)
	c := &cobra.Command{
		Use:     "set (--topic NAME | --cluster) [KEY=VALUE...] [--delete KEY...]",
		Short:   "Set or delete configs",
		Example: "  twinctl configs set --topic orders min.insync.replicas=2\n  twinctl configs set --cluster --delete unclean.recovery.strategy",
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := r.resource()
			if err != nil {
				return err
			}
			set, err := parseKV(args, "config")
			if err != nil {
				return err
			}
			if len(set) == 0 && len(deletes) == 0 {
				return usagef("nothing to change: pass KEY=VALUE arguments or --delete KEY")
			}
			client, err := a.admin()
			if err != nil {
				return err
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			resp, err := client.AlterConfigs(ctx, &twinlogv1.AlterConfigsRequest{
				Resources:    []*twinlogv1.AlterConfigsResource{{Resource: res, Set: set, Delete: deletes}},
				ValidateOnly: validate,
			})
			if err != nil {
				return rpcError(err, a.bootstrap, "alter configs")
			}
			for _, rr := range resp.GetResults() {
				if err := protoErr(rr.GetError(), resourceString(res), rr.GetErrorMessage(), r.topic); err != nil {
					return err
				}
			}
			p := a.printer()
			if p.json {
				return p.emitJSON(map[string]any{"resource": resourceString(res), "set": set, "deleted": strs(deletes), "validate_only": validate})
			}
			if validate {
				// Nothing changed: the controller only checked the change.
				fmt.Fprintf(p.w, "would update %s configs (validate only: nothing changed)\n", resourceString(res))
				return nil
			}
			fmt.Fprintf(p.w, "updated %s configs\n", resourceString(res))
			return nil
		},
	}
	r.add(c)
	c.Flags().StringArrayVar(&deletes, "delete", nil, "config key to reset to its default (repeatable)")
	c.Flags().BoolVar(&validate, "validate-only", false, "check the change without applying it")
	return c
}

// ---- brokers ----

type brokerView struct {
	// ClusterID is on every line of --json (one broker per line).
	ClusterID string `json:"cluster_id"`
	ID        int32  `json:"id"`
	Host      string `json:"host"`
	Port      int32  `json:"port"`
	// Kafka is the broker's Kafka listener host:port, empty without one.
	Kafka       string   `json:"kafka_address"`
	Epoch       int64    `json:"broker_epoch"`
	Fenced      bool     `json:"fenced"`
	Shutdown    bool     `json:"in_controlled_shutdown"`
	LogDirs     []string `json:"log_dirs"`
	OfflineDirs []string `json:"offline_log_dirs"`
	// OfflineCount is how many partitions the broker reported offline (its
	// log failed to open); OfflineParts lists them, at most the first 1000
	// (the controller keeps no more). A fenced broker has no live report.
	OfflineCount int32                  `json:"offline_partition_count"`
	OfflineParts []offlinePartitionView `json:"offline_partitions"`
}

type offlinePartitionView struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Reason    string `json:"reason"`
}

func renderBrokers(p *printer, clusterID string, bs []*twinlogv1.BrokerRecord, offline []*twinlogv1.BrokerOfflinePartitions) error {
	reports := map[int32]*twinlogv1.BrokerOfflinePartitions{}
	for _, r := range offline {
		reports[r.GetBrokerId()] = r
	}
	views := make([]brokerView, 0, len(bs))
	for _, b := range bs {
		kafka := ""
		if b.GetKafkaPort() != 0 {
			kafka = net.JoinHostPort(b.GetKafkaHost(), strconv.Itoa(int(b.GetKafkaPort())))
		}
		v := brokerView{clusterID, b.GetBrokerId(), b.GetHost(), b.GetPort(), kafka, b.GetBrokerEpoch(), b.GetFenced(),
			b.GetInControlledShutdown(), strs(b.GetLogDirs()), strs(b.GetOfflineLogDirs()), 0, []offlinePartitionView{}}
		if r := reports[b.GetBrokerId()]; r != nil {
			v.OfflineCount = max(r.GetCount(), int32(len(r.GetPartitions())))
			for _, op := range r.GetPartitions() {
				v.OfflineParts = append(v.OfflineParts, offlinePartitionView{op.GetTopic(), op.GetPartition(), op.GetReason()})
			}
		}
		views = append(views, v)
	}
	slices.SortFunc(views, func(x, y brokerView) int { return int(x.ID) - int(y.ID) })
	if p.json {
		return emitJSONLines(p, views)
	}
	rows := make([][]string, 0, len(views))
	for _, v := range views {
		offline := strconv.Itoa(int(v.OfflineCount))
		if v.Fenced {
			offline = "" // no live session, so no report: unknown
		}
		kafka := v.Kafka
		if kafka == "" {
			kafka = "-"
		}
		rows = append(rows, []string{strconv.Itoa(int(v.ID)), fmt.Sprintf("%s:%d", v.Host, v.Port), kafka, strconv.FormatInt(v.Epoch, 10),
			yesNo(v.Fenced), yesNo(v.Shutdown), offline, strings.Join(v.LogDirs, ","), strings.Join(v.OfflineDirs, ",")})
	}
	fmt.Fprintf(p.w, "cluster %s\n", clusterID)
	if err := p.table([]string{"ID", "ADDRESS", "KAFKA", "EPOCH", "FENCED", "SHUTTING-DOWN", "OFFLINE", "LOG-DIRS", "OFFLINE-DIRS"}, rows); err != nil {
		return err
	}
	// Which partitions are offline, and why: the OFFLINE count alone does
	// not tell the operator which dir to repair.
	for _, v := range views {
		if len(v.OfflineParts) == 0 {
			continue
		}
		fmt.Fprintf(p.w, "\nbroker %d offline partitions (log failed to open; see docs/operations.md):\n", v.ID)
		rows := make([][]string, 0, len(v.OfflineParts))
		for _, op := range v.OfflineParts {
			rows = append(rows, []string{fmt.Sprintf("  %s-%d", op.Topic, op.Partition), op.Reason})
		}
		if err := p.table([]string{"  PARTITION", "REASON"}, rows); err != nil {
			return err
		}
		if more := int(v.OfflineCount) - len(v.OfflineParts); more > 0 {
			fmt.Fprintf(p.w, "  ... and %d more (the controller keeps the first %d)\n", more, len(v.OfflineParts))
		}
	}
	return nil
}

func (a *app) brokersCommand() *cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "List registered brokers",
		Long: `Lists the registered brokers. OFFLINE counts the partitions whose log the
broker holds offline (it failed to open at start: corrupt, bad checkpoint,
I/O error), as its heartbeats report them; "-" for a fenced broker, which has
no live report. The partitions and the reason are listed below the table
(offline_partitions with --json). See docs/operations.md, "A corrupt
partition on a broker's disk".`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := a.admin()
			if err != nil {
				return err
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			resp, err := client.ListBrokers(ctx, &twinlogv1.ListBrokersRequest{})
			if err != nil {
				return rpcError(err, a.bootstrap, "list brokers")
			}
			return renderBrokers(a.printer(), resp.GetClusterId(), resp.GetBrokers(), resp.GetOfflinePartitions())
		},
	}
	return group("brokers", "Inspect and unregister brokers", list, a.brokersUnregister())
}

// brokersUnregister removes a broker that is gone for good (AdminService
// UnregisterBroker, Kafka's KIP-500 unregister): the controller refuses a
// broker that is still live (INVALID_REQUEST: stop it and let its session
// expire) and an id it does not know (BROKER_ID_NOT_REGISTERED).
func (a *app) brokersUnregister() *cobra.Command {
	return &cobra.Command{
		Use:   "unregister ID",
		Short: "Remove a broker that is gone for good (it must be stopped and fenced first)",
		Long: `Removes the broker's registration: it leaves every ISR and ELR and its
record is deleted. Its id stays in the replica sets until a reassignment
moves them (twinctl reassign), and the broker may register again later.
A live broker is refused: stop it and wait broker.session.timeout.ms.`,
		Example: "  twinctl brokers unregister 4",
		Args:    exactArgs(1, "one broker id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 32)
			if err != nil || id < 0 || strconv.FormatInt(id, 10) != args[0] {
				return usagef("bad broker id %q: want an integer ≥ 0", args[0])
			}
			client, err := a.admin()
			if err != nil {
				return err
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			resp, err := client.UnregisterBroker(ctx, &twinlogv1.UnregisterBrokerRequest{BrokerId: int32(id)})
			if err != nil {
				return rpcError(err, a.bootstrap, "unregister broker")
			}
			if err := protoErr(resp.GetError(), fmt.Sprintf("broker %d", id), resp.GetErrorMessage(), ""); err != nil {
				return err
			}
			p := a.printer()
			if p.json {
				return p.emitJSON(map[string]any{"broker_id": id, "result": "unregistered"})
			}
			return p.table([]string{"ID", "RESULT"}, [][]string{{strconv.FormatInt(id, 10), "unregistered"}})
		},
	}
}

// ---- elect-leaders ----

func toTopicPartitions(sels []TopicSelector) []*twinlogv1.TopicPartitions {
	out := make([]*twinlogv1.TopicPartitions, 0, len(sels))
	for _, s := range normalizeSelectors(sels) {
		out = append(out, &twinlogv1.TopicPartitions{Topic: s.Topic, Partitions: s.Partitions})
	}
	return out
}

// renderPartitionResults prints per-partition results and fails if any failed.
func renderPartitionResults(p *printer, rs []*twinlogv1.PartitionResult, okWord string, ignore ...twinlogv1.ErrorCode) error {
	type row struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Error     string `json:"error,omitempty"`
		Message   string `json:"error_message,omitempty"`
	}
	rows := make([]row, 0, len(rs))
	var errs []error
	for _, r := range rs {
		rows = append(rows, row{r.GetTopic(), r.GetPartition(), errString(r.GetError()), r.GetErrorMessage()})
		if !slices.Contains(ignore, r.GetError()) {
			errs = append(errs, protoErr(r.GetError(), fmt.Sprintf("partition %s-%d", r.GetTopic(), r.GetPartition()), r.GetErrorMessage(), r.GetTopic()))
		}
	}
	if p.json {
		if err := emitJSONLines(p, rows); err != nil {
			return err
		}
		return errors.Join(errs...)
	}
	trs := make([][]string, 0, len(rows))
	for _, r := range rows {
		result := okWord
		if r.Error != "" {
			result = r.Error
			if r.Message != "" {
				result += ": " + r.Message
			}
		}
		trs = append(trs, []string{r.Topic, strconv.Itoa(int(r.Partition)), result})
	}
	if err := p.table([]string{"TOPIC", "PARTITION", "RESULT"}, trs); err != nil {
		return err
	}
	return errors.Join(errs...)
}

func (a *app) electLeadersCommand() *cobra.Command {
	var (
		typ string
		all bool
	)
	c := &cobra.Command{
		Use:   "elect-leaders --type preferred|unclean (TOPIC[:P,P...]... | --all)",
		Short: "Run a preferred or unclean leader election (SPEC §3.4)",
		Long: `Preferred elects R[0] where it is in the ISR and acceptable. Unclean runs one
aggressive recovery round (SPEC §3.5) and may lose acknowledged records.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var et twinlogv1.ElectionType
			switch typ {
			case "preferred":
				et = twinlogv1.ElectionType_ELECTION_TYPE_PREFERRED
			case "unclean":
				et = twinlogv1.ElectionType_ELECTION_TYPE_UNCLEAN
			default:
				return usagef("--type must be preferred or unclean, got %q", typ)
			}
			sels, err := parseSelectors(args)
			if err != nil {
				return err
			}
			if len(sels) == 0 && !all {
				return usagef("name partitions (TOPIC or TOPIC:P,P) or pass --all for every partition")
			}
			if len(sels) > 0 && all {
				return usagef("pass either partitions or --all, not both")
			}
			client, err := a.admin()
			if err != nil {
				return err
			}
			ctx, cancel := a.rpcCtx(cmd.Context())
			defer cancel()
			resp, err := client.ElectLeaders(ctx, &twinlogv1.ElectLeadersRequest{Type: et, Partitions: toTopicPartitions(sels)})
			if err != nil {
				return rpcError(err, a.bootstrap, "elect leaders")
			}
			return renderPartitionResults(a.printer(), resp.GetResults(), "elected", twinlogv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED)
		},
	}
	c.Flags().StringVar(&typ, "type", "preferred", "election type: preferred or unclean")
	c.Flags().BoolVar(&all, "all", false, "elect for every partition")
	return c
}

// ---- reassign ----

// reassignFile is Kafka's kafka-reassign-partitions JSON format.
type reassignFile struct {
	Partitions []struct {
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		Replicas  []int32 `json:"replicas"`
	} `json:"partitions"`
}

func (a *app) reassignCommand() *cobra.Command {
	var (
		file   string
		cancel bool
	)
	c := &cobra.Command{
		Use:   "reassign (TOPIC:PARTITION=B,B,B... | --file FILE) [--cancel]",
		Short: "Move partition replicas (SPEC §3.8)",
		Example: `  twinctl reassign orders:0=1,2,4 orders:1=2,4,1
  twinctl reassign --file plan.json     # {"partitions":[{"topic":"orders","partition":0,"replicas":[1,2,4]}]}
  twinctl reassign --cancel orders:0`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var parts []*twinlogv1.ReassignablePartition
			if file != "" {
				raw, err := os.ReadFile(file)
				if err != nil {
					return usagef("read --file: %v", err)
				}
				var rf reassignFile
				if err := json.Unmarshal(raw, &rf); err != nil {
					return usagef("parse %s: %v: want {\"partitions\":[{\"topic\":..,\"partition\":..,\"replicas\":[..]}]}", file, err)
				}
				for _, p := range rf.Partitions {
					parts = append(parts, &twinlogv1.ReassignablePartition{Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas})
				}
			}
			for _, arg := range args {
				tp, reps, hasReps := strings.Cut(arg, "=")
				topic, ps, ok := strings.Cut(tp, ":")
				pn, err := strconv.ParseInt(ps, 10, 32)
				if !ok || topic == "" || err != nil || pn < 0 {
					return usagef("bad partition %q: want TOPIC:PARTITION=B,B,B (or TOPIC:PARTITION with --cancel)", arg)
				}
				rp := &twinlogv1.ReassignablePartition{Topic: topic, Partition: int32(pn)}
				if !cancel {
					if !hasReps {
						return usagef("%q has no target replicas: want TOPIC:PARTITION=B,B,B", arg)
					}
					rp.Replicas, err = parseInt32List(reps)
					if err != nil || len(rp.Replicas) == 0 {
						return usagef("bad replicas in %q: want broker ids like 1,2,3", arg)
					}
				}
				parts = append(parts, rp)
			}
			if cancel {
				for _, p := range parts {
					p.Replicas = nil // empty target cancels
				}
			}
			if len(parts) == 0 {
				return usagef("nothing to reassign: pass TOPIC:PARTITION=B,B,B or --file")
			}
			client, err := a.admin()
			if err != nil {
				return err
			}
			ctx, stop := a.rpcCtx(cmd.Context())
			defer stop()
			resp, err := client.AlterPartitionReassignments(ctx, &twinlogv1.AlterPartitionReassignmentsRequest{Partitions: parts})
			if err != nil {
				return rpcError(err, a.bootstrap, "reassign partitions")
			}
			word := "reassignment started"
			if cancel {
				word = "reassignment cancelled"
			}
			return renderPartitionResults(a.printer(), resp.GetResults(), word)
		},
	}
	c.Flags().StringVar(&file, "file", "", "reassignment plan in Kafka's JSON format")
	c.Flags().BoolVar(&cancel, "cancel", false, "cancel ongoing reassignments of the named partitions")
	return c
}
