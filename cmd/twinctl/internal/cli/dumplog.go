package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) dumpLogCommand() *cobra.Command {
	var records bool
	c := &cobra.Command{
		Use:   "dump-log DIR",
		Short: "Print the batches (and records) of a partition directory, offline",
		Long: `Reads the segments of one partition directory (<topic>-<partition>, SPEC §2.1)
without a running broker and prints each batch: base and last offset, leader
epoch and record count; with --records every record too.`,
		Args: exactArgs(1, "one partition directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.opts.DumpLog == nil {
				return fmt.Errorf("this twinctl build cannot read segments (Options.DumpLog is nil): rebuild cmd/twinctl with the storage segment reader wired in")
			}
			p := a.printer()
			return a.opts.DumpLog(cmd.Context(), args[0], func(b Batch) error {
				if p.json {
					type rec struct {
						Offset    int64   `json:"offset"`
						Timestamp string  `json:"timestamp"`
						Key       *string `json:"key"`
						Value     *string `json:"value"`
					}
					type batch struct {
						BaseOffset  int64 `json:"base_offset"`
						LastOffset  int64 `json:"last_offset"`
						LeaderEpoch int32 `json:"leader_epoch"`
						Count       int   `json:"count"`
						Records     []rec `json:"records,omitempty"`
					}
					out := batch{BaseOffset: b.BaseOffset, LastOffset: b.LastOffset, LeaderEpoch: b.LeaderEpoch, Count: len(b.Records)}
					if records {
						for _, r := range b.Records {
							k, _ := bytesField(r.Key)
							v, _ := bytesField(r.Value)
							out.Records = append(out.Records, rec{r.Offset, formatTimestamp(r.Timestamp), k, v})
						}
					}
					return jsonLine{w: p.w}.write(out)
				}
				fmt.Fprintf(p.w, "baseOffset: %d lastOffset: %d leaderEpoch: %d count: %d\n", b.BaseOffset, b.LastOffset, b.LeaderEpoch, len(b.Records))
				if records {
					for _, r := range b.Records {
						fmt.Fprintf(p.w, "| offset: %d timestamp: %s key: %s value: %s\n", r.Offset, formatTimestamp(r.Timestamp), showBytes(r.Key), showBytes(r.Value))
					}
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&records, "records", false, "print every record, not only batch headers")
	return c
}
