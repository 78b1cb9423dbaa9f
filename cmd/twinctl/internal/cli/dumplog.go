package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// DumpedBatch is one batch as found in a segment file by a LogDumper.
type DumpedBatch struct {
	Segment      string // segment file name, e.g. 00000000000000000000.log
	Position     int64  // byte position of the batch in the segment
	BaseOffset   int64
	LastOffset   int64
	LeaderEpoch  int32
	Count        int32
	Size         int64 // total encoded size, header included
	MaxTimestamp int64 // milliseconds since the Unix epoch
	// ProducerID, ProducerEpoch and BaseSequence are the idempotent
	// producer's fields (−1: none).
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Compression is the batch's codec (none, gzip, snappy, lz4, zstd).
	Compression string
	CRCValid    bool
	// Err is empty when the whole batch validates (SPEC §2.2); otherwise it
	// says what is wrong and Records is empty.
	Err     string
	Records []Record
}

// EpochEntry is one line of a leader-epoch-checkpoint (SPEC §2.3).
type EpochEntry struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"start_offset"`
}

// LogDumper reads one partition directory (SPEC §2.1) without a broker and
// without writing to it.
type LogDumper interface {
	// Batches calls visit for every batch of every segment, in offset
	// order. A torn or unreadable tail is reported as a last DumpedBatch
	// with Err set, not as an error.
	Batches(ctx context.Context, dir string, visit func(DumpedBatch) error) error
	// EpochCheckpoint returns the leader-epoch-checkpoint; ok is false when
	// the file does not exist.
	EpochCheckpoint(dir string) (entries []EpochEntry, ok bool, err error)
}

func (a *app) dumpLogCommand() *cobra.Command {
	var records bool
	c := &cobra.Command{
		Use:   "dump-log DIR",
		Short: "Print the batches (and records) of a partition directory, offline",
		Long: `Reads the segments of one partition directory (<topic>-<partition>, SPEC §2.1)
without a running broker and without writing to it (no recovery, no
truncation), and prints each batch: base and last offset, record count,
leader epoch, position and size in its segment, max timestamp and whether
its CRC (and the rest of SPEC §2.2 validation) holds; then the
leader-epoch-checkpoint. With --records every record too. With --json one
JSON object per line: batches, then {"leader_epoch_checkpoint": [...]}.

Exit code 1 if any batch is invalid.`,
		Example: `  twinctl dump-log run/cluster-a/broker-1/demo-0
  twinctl dump-log --records --json run/cluster-a/broker-1/demo-0`,
		Args: exactArgs(1, "one partition directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.opts.DumpLog == nil {
				return fmt.Errorf("this twinctl build cannot read segments (Options.DumpLog is nil): rebuild cmd/twinctl with the storage segment reader wired in")
			}
			return a.dumpLog(cmd.Context(), args[0], records)
		},
	}
	c.Flags().BoolVar(&records, "records", false, "print every record, not only batch headers")
	return c
}

func (a *app) dumpLog(ctx context.Context, dir string, records bool) error {
	p := a.printer()
	if !p.json {
		fmt.Fprintf(p.w, "Dumping %s\n", dir)
	}
	segment := ""
	var batches, invalid int
	err := a.opts.DumpLog.Batches(ctx, dir, func(b DumpedBatch) error {
		batches++
		if b.Err != "" {
			invalid++
		}
		if p.json {
			return jsonLine{w: p.w}.write(dumpedBatchJSON(b, records))
		}
		if b.Segment != segment {
			segment = b.Segment
			fmt.Fprintf(p.w, "Segment %s\n", segment)
		}
		if b.Err != "" && b.Count == 0 && b.Size == 0 {
			fmt.Fprintf(p.w, "position: %d INVALID: %s\n", b.Position, b.Err)
			return nil
		}
		fmt.Fprintf(p.w, "baseOffset: %d lastOffset: %d count: %d leaderEpoch: %d producerId: %d producerEpoch: %d baseSequence: %d compression: %s position: %d size: %d maxTimestamp: %s crcValid: %t",
			b.BaseOffset, b.LastOffset, b.Count, b.LeaderEpoch, b.ProducerID, b.ProducerEpoch, b.BaseSequence, b.Compression, b.Position, b.Size, formatTimestamp(b.MaxTimestamp), b.CRCValid)
		if b.Err != "" {
			fmt.Fprintf(p.w, " INVALID: %s", b.Err)
		}
		fmt.Fprintln(p.w)
		if records {
			for _, r := range b.Records {
				fmt.Fprintf(p.w, "| offset: %d timestamp: %s key: %s value: %s\n", r.Offset, formatTimestamp(r.Timestamp), showBytes(r.Key), showBytes(r.Value))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	entries, ok, err := a.opts.DumpLog.EpochCheckpoint(dir)
	if err != nil {
		return err
	}
	if p.json {
		if entries == nil {
			entries = []EpochEntry{}
		}
		type cp struct {
			Present bool         `json:"leader_epoch_checkpoint_present"`
			Entries []EpochEntry `json:"leader_epoch_checkpoint"`
		}
		if err := (jsonLine{w: p.w}).write(cp{ok, entries}); err != nil {
			return err
		}
	} else {
		if batches == 0 {
			fmt.Fprintln(p.w, "no batches")
		}
		switch {
		case !ok:
			fmt.Fprintln(p.w, "leader-epoch-checkpoint: absent")
		default:
			fmt.Fprintf(p.w, "leader-epoch-checkpoint: %d entries\n", len(entries))
			for _, e := range entries {
				fmt.Fprintf(p.w, "  epoch: %d startOffset: %d\n", e.Epoch, e.StartOffset)
			}
		}
	}
	if invalid > 0 {
		return fmt.Errorf("%s: %d of %d batches are invalid (see INVALID above); the broker's recovery would truncate the segment there", dir, invalid, batches)
	}
	return nil
}

func dumpedBatchJSON(b DumpedBatch, records bool) any {
	type rec struct {
		Offset    int64   `json:"offset"`
		Timestamp string  `json:"timestamp"`
		Key       *string `json:"key"`
		Value     *string `json:"value"`
	}
	type batch struct {
		Segment       string `json:"segment"`
		Position      int64  `json:"position"`
		BaseOffset    int64  `json:"base_offset"`
		LastOffset    int64  `json:"last_offset"`
		Count         int32  `json:"count"`
		LeaderEpoch   int32  `json:"leader_epoch"`
		Size          int64  `json:"size"`
		MaxTimestamp  string `json:"max_timestamp"`
		ProducerID    int64  `json:"producer_id"`
		ProducerEpoch int16  `json:"producer_epoch"`
		BaseSequence  int32  `json:"base_sequence"`
		Compression   string `json:"compression"`
		CRCValid      bool   `json:"crc_valid"`
		Error         string `json:"error,omitempty"`
		Records       []rec  `json:"records,omitempty"`
	}
	out := batch{Segment: b.Segment, Position: b.Position, BaseOffset: b.BaseOffset, LastOffset: b.LastOffset,
		Count: b.Count, LeaderEpoch: b.LeaderEpoch, Size: b.Size, MaxTimestamp: formatTimestamp(b.MaxTimestamp),
		ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch, BaseSequence: b.BaseSequence,
		Compression: b.Compression, CRCValid: b.CRCValid, Error: b.Err}
	if records {
		for _, r := range b.Records {
			k, _ := bytesField(r.Key)
			v, _ := bytesField(r.Value)
			out.Records = append(out.Records, rec{r.Offset, formatTimestamp(r.Timestamp), k, v})
		}
	}
	return out
}
