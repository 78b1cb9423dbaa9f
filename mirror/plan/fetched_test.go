package plan_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
)

// TestAnswerOutcome: the session ends on a DivergingEpoch (only with no
// error), OFFSET_OUT_OF_RANGE or an error fatal to the run; other errors
// are retried; a clean answer goes on to its records.
func TestAnswerOutcome(t *testing.T) {
	const s = 7
	div := &plan.Diverging{Epoch: 3, EndOffset: 56}
	for _, tc := range []struct {
		name      string
		answer    plan.FetchAnswer
		wantEnd   plan.Event
		wantRetry bool
	}{
		{"records", plan.FetchAnswer{}, nil, false},
		{"diverging", plan.FetchAnswer{Diverging: div}, plan.FetchDiverging{Session: s, Epoch: 3, EndOffset: 56}, false},
		{"out of range", plan.FetchAnswer{Error: twinlogv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, LogStartOffset: 40},
			plan.FetchOutOfRange{Session: s, SourceLogStartOffset: 40}, false},
		{"source lost the topic", plan.FetchAnswer{Error: twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION},
			plan.FetchError{Session: s, Error: twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}, false},
		{"topic re-created", plan.FetchAnswer{Error: twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID},
			plan.FetchError{Session: s, Error: twinlogv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID}, false},
		{"leader moved", plan.FetchAnswer{Error: twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER}, nil, true},
		{"fenced", plan.FetchAnswer{Error: twinlogv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH}, nil, true},
		// A DivergingEpoch beside an error is not an answer about the log.
		{"diverging with an error", plan.FetchAnswer{Error: twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, Diverging: div}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end, retry := plan.AnswerOutcome(s, tc.answer)
			if end != tc.wantEnd || retry != tc.wantRetry {
				t.Fatalf("AnswerOutcome(%+v) = %#v, %t; want %#v, %t", tc.answer, end, retry, tc.wantEnd, tc.wantRetry)
			}
		})
	}
}

// TestPlanAppend: batches wholly below the LEO are dropped, the appendable
// prefix is FetchedBatches', and a first batch that straddles the LEO
// (seed 760568) or is of an epoch below the latest cached one (seed 432)
// appends nothing and ends the session; a batch above the LE ends it after
// the prefix with FetchNeedsBump; an epoch above the source LE refuses the
// answer.
func TestPlanAppend(t *testing.T) {
	const s = 3
	b := func(base, last twinlog.Offset, e twinlog.Epoch) plan.FetchedBatch {
		return plan.FetchedBatch{BaseOffset: base, LastOffset: last, Epoch: e}
	}
	log := plan.LeaderLog{LogEndOffset: 10, LeaderEpoch: 5, LatestEpoch: 2}
	for _, tc := range []struct {
		name     string
		batches  []plan.FetchedBatch
		log      plan.LeaderLog
		sourceLE twinlog.Epoch
		want     plan.AppendPlan
		wantErr  bool
	}{
		{"empty", nil, log, 5, plan.AppendPlan{}, false},
		{"all appendable", []plan.FetchedBatch{b(10, 12, 2), b(13, 13, 4)}, log, 5, plan.AppendPlan{Append: 2}, false},
		{"below the LEO dropped", []plan.FetchedBatch{b(4, 7, 1), b(8, 9, 2), b(10, 11, 2)}, log, 5, plan.AppendPlan{Skip: 2, Append: 1}, false},
		{"only below the LEO", []plan.FetchedBatch{b(4, 9, 2)}, log, 5, plan.AppendPlan{Skip: 1}, false},
		{"needs a bump after the prefix", []plan.FetchedBatch{b(10, 11, 5), b(12, 14, 7)}, log, 7,
			plan.AppendPlan{Append: 1, End: plan.FetchNeedsBump{Session: s, Epoch: 7}}, false},
		{"straddles the LEO", []plan.FetchedBatch{b(4, 7, 1), b(8, 12, 2)}, log, 5,
			plan.AppendPlan{Skip: 1, End: plan.FetchStraddle{Session: s, BaseOffset: 8, LastOffset: 12, SourceLogStartOffset: 4}}, false},
		{"foreign epoch", []plan.FetchedBatch{b(10, 11, 0), b(12, 12, 2)}, log, 5,
			plan.AppendPlan{End: plan.FetchForeignEpoch{Session: s, Epoch: 0, BaseOffset: 10, SourceLogStartOffset: 4}}, false},
		{"epoch above the source LE", []plan.FetchedBatch{b(10, 11, 2), b(12, 12, 6)}, log, 5, plan.AppendPlan{}, true},
		{"MaxEpoch", []plan.FetchedBatch{b(10, 11, math.MaxInt32)}, log, -1, plan.AppendPlan{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := plan.PlanAppend(s, tc.batches, tc.log, tc.sourceLE, 4)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %t", err, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("PlanAppend (-want +got):\n%s", d)
			}
		})
	}
}
