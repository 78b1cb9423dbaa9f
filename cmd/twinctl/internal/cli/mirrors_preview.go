package cli

import (
	"context"
	"fmt"
	"strconv"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// A failback discards the records this cluster wrote after it stopped
// mirroring (SPEC §6.6 step 2: each partition is cut where its epochs pass
// the source's last mirrored leader epoch). `mirrors create` and `mirrors
// start` say how many before they run (PreviewMirrorTruncation, the leaders'
// own rule), and --dry-run says it and changes nothing.

// truncationView is one partition's preview as twinctl prints it.
type truncationView struct {
	Mirror    string `json:"mirror"`
	Topic     string `json:"topic"`
	Partition *int32 `json:"partition"`
	Leader    *int32 `json:"leader"`
	LMLE      *int32 `json:"lmle"`
	// LogStartOffset, HighWatermark and LogEndOffset are the leader's log
	// now; TruncationOffset the first offset removed (null: none).
	LogStartOffset   *int64 `json:"log_start_offset"`
	HighWatermark    *int64 `json:"high_watermark"`
	LogEndOffset     *int64 `json:"log_end_offset"`
	TruncationOffset *int64 `json:"truncation_offset"`
	Records          int64  `json:"records_removed"`
	Committed        int64  `json:"committed_records_removed"`
	Error            string `json:"error,omitempty"`
	Message          string `json:"error_message,omitempty"`
}

func truncationViews(mirror string, ps []*twinlogv1.MirrorTruncationPreview) []truncationView {
	i32 := func(v int32, ok bool) *int32 {
		if !ok {
			return nil
		}
		return &v
	}
	i64 := func(v int64) *int64 {
		if v < 0 {
			return nil
		}
		return &v
	}
	out := make([]truncationView, 0, len(ps))
	for _, p := range ps {
		known := p.GetError() == twinlogv1.ErrorCode_ERROR_CODE_NONE
		out = append(out, truncationView{
			Mirror: mirror, Topic: p.GetTopic(), Partition: i32(p.GetPartition(), p.GetPartition() >= 0),
			Leader: i32(p.GetLeader(), p.GetLeader() >= 0), LMLE: i32(p.GetLmle(), known),
			LogStartOffset: i64(p.GetLogStartOffset()), HighWatermark: i64(p.GetHighWatermark()), LogEndOffset: i64(p.GetLogEndOffset()),
			TruncationOffset: i64(p.GetTruncationOffset()),
			Records:          p.GetRecordsRemoved(), Committed: p.GetCommittedRecordsRemoved(),
			Error: errString(p.GetError()), Message: p.GetErrorMessage(),
		})
	}
	return out
}

// previewTruncation asks the controller what starting mirror's topics
// from source (empty: the mirror's) would truncate here.
func previewTruncation(ctx context.Context, client twinlogv1.MirrorServiceClient, mirror string, source, topics []string) ([]truncationView, error) {
	resp, err := client.PreviewMirrorTruncation(ctx, &twinlogv1.PreviewMirrorTruncationRequest{Mirror: mirror, SourceBootstrap: source, Topics: topics})
	if err != nil {
		return nil, err
	}
	return truncationViews(mirror, resp.GetPartitions()), nil
}

// renderTruncationPreview prints vs in full: a table or JSON Lines.
func (a *app) renderTruncationPreview(vs []truncationView) error {
	p := a.printer()
	if p.json {
		return emitJSONLines(p, vs)
	}
	str := func(v any) string {
		switch x := v.(type) {
		case *int32:
			if x != nil {
				return strconv.Itoa(int(*x))
			}
		case *int64:
			if x != nil {
				return strconv.FormatInt(*x, 10)
			}
		}
		return ""
	}
	rows := make([][]string, 0, len(vs))
	var total, committed int64
	for _, v := range vs {
		note := v.Message
		if v.Error == "" && v.TruncationOffset == nil {
			note = "nothing truncated"
		}
		rows = append(rows, []string{v.Topic, str(v.Partition), str(v.Leader), str(v.LMLE),
			fmt.Sprintf("%s/%s/%s", orDash(str(v.LogStartOffset)), orDash(str(v.HighWatermark)), orDash(str(v.LogEndOffset))),
			str(v.TruncationOffset), strconv.FormatInt(v.Records, 10), strconv.FormatInt(v.Committed, 10), note})
		total, committed = total+v.Records, committed+v.Committed
	}
	if err := p.table([]string{"TOPIC", "PARTITION", "LEADER", "LMLE", "LS/HW/LEO", "TRUNCATE-AT", "REMOVES", "COMMITTED", "NOTE"}, rows); err != nil {
		return err
	}
	fmt.Fprintf(p.w, "the LMLE truncation removes %d records here, %d of them committed (acked with acks=all); a divergence found while fetching may remove more\n", total, committed)
	return nil
}

// noteTruncation prints, before a create or start runs, one line per
// partition the start will truncate (nothing when none will). It is best
// effort, with its own --timeout: a preview that fails (no Describe on the
// mirror, the source not answering) is said on stderr and the command goes
// on with a deadline of its own.
func (a *app) noteTruncation(parent context.Context, client twinlogv1.MirrorServiceClient, mirror string, source, topics []string) {
	ctx, cancel := a.rpcCtx(parent)
	defer cancel()
	vs, err := previewTruncation(ctx, client, mirror, source, topics)
	if err != nil {
		fmt.Fprintf(a.opts.Stderr, "twinctl: could not preview the truncation (%v); `mirrors describe %s` shows what the start did\n", rpcError(err, a.bootstrap, "preview"), mirror)
		return
	}
	if a.json {
		return // --json prints the results only; --dry-run --json prints the preview
	}
	for _, v := range vs {
		if v.Records == 0 || v.Partition == nil {
			continue
		}
		fmt.Fprintf(a.opts.Stdout, "mirror %s topic %s partition %d: truncating at offset %d (past LMLE %d) removes %d records, %d of them committed here\n",
			mirror, v.Topic, *v.Partition, *v.TruncationOffset, *v.LMLE, v.Records, v.Committed)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
