package controller

import (
	"strings"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

func TestCatchUpReason(t *testing.T) {
	const (
		mirroring = twinlogv1.MirrorState_MIRROR_STATE_MIRRORING
		paused    = twinlogv1.MirrorState_MIRROR_STATE_PAUSED
		failed    = twinlogv1.MirrorState_MIRROR_STATE_FAILED
		none      = twinlogv1.MirrorState_MIRROR_STATE_UNSPECIFIED
	)
	// base: two partitions, D committed exactly what S committed.
	base := func() catchUpTopic {
		return catchUpTopic{
			Name: "t", TopicID: "id1", Partitions: 2,
			States:        []twinlogv1.MirrorState{mirroring, mirroring},
			SourceTopicID: "id1", SourcePartitions: 2,
			Source: []hwAnswer{{HW: 10}, {HW: 7372}},
			Dest:   []hwAnswer{{HW: 10}, {HW: 7372}},
			// D's latest epochs and LEOs; S ends those epochs at or after them.
			DestEnd:   []epochEnd{{Epoch: 3, EndOffset: 10}, {Epoch: 5, EndOffset: 7372}},
			SourceEnd: []epochEnd{{Epoch: 3, EndOffset: 10}, {Epoch: 5, EndOffset: 7380}},
		}
	}
	tests := []struct {
		name string
		edit func(*catchUpTopic)
		want string // "" caught up, else a substring of the reason
	}{
		{"equal HWs", func(*catchUpTopic) {}, ""},
		{"D ahead of a stale source answer is still caught up", func(t *catchUpTopic) { t.Dest[1].HW = 7400 }, ""},
		{"paused and caught up", func(t *catchUpTopic) { t.States[0] = paused }, ""},
		{"empty partitions", func(t *catchUpTopic) { t.Source[0].HW, t.Dest[0].HW = 0, 0 }, ""},
		// The chaos seed 3 case: the report said lag 0, the fresh HWs do not.
		{"D behind S", func(t *catchUpTopic) { t.Dest[1].HW = 7012 }, "partition 1: destination HW 7012 < source HW 7372"},
		{"D behind by one", func(t *catchUpTopic) { t.Dest[0].HW = 9 }, "partition 0: destination HW 9 < source HW 10"},
		{"D leader unreachable", func(t *catchUpTopic) { t.Dest[1] = hwAnswer{HW: -1, Err: "dial b-2: unreachable"} }, "partition 1: destination: dial"},
		{"D without leader", func(t *catchUpTopic) { t.Dest[0] = hwAnswer{HW: -1, Err: "no unfenced leader"} }, "no unfenced leader"},
		{"S leader fenced", func(t *catchUpTopic) {
			t.Source[0] = hwAnswer{HW: -1, Err: "ListOffsets a-1: ERROR_CODE_FENCED_LEADER_EPOCH"}
		}, "partition 0: source: ListOffsets"},
		{"source unreachable", func(t *catchUpTopic) { t.SourceErr, t.Source = "Metadata from a-1: unreachable", nil }, "source: Metadata"},
		{"HW unknown without error", func(t *catchUpTopic) { t.Source[0].HW = -1 }, "no high watermark"},
		{"no report in the current LE", func(t *catchUpTopic) { t.States[1] = none }, "partition 1: leader reports no state"},
		{"failed", func(t *catchUpTopic) { t.States[0] = failed }, "partition 0: leader reports FAILED"},
		{"topic id differs", func(t *catchUpTopic) { t.SourceTopicID = "id2" }, "source topic id id2, local id1"},
		{"source added a partition", func(t *catchUpTopic) {
			t.SourcePartitions, t.Source = 3, append(t.Source, hwAnswer{HW: 0})
		}, "source has 3 partitions, destination 2"},
		// Issue 13: after an unclean election on S, D "caught up" by HW to a
		// log it diverges from (S.HW 10 again, reached in a new epoch).
		{"D diverges: S ended D's last epoch earlier", func(t *catchUpTopic) { t.SourceEnd[0] = epochEnd{Epoch: 3, EndOffset: 4} },
			"partition 0: destination log diverges from the source's: its last epoch 3 ends at 10, the source answers epoch 3 ending at 4"},
		{"D diverges: S never had D's last epoch", func(t *catchUpTopic) { t.SourceEnd[1] = epochEnd{Epoch: 4, EndOffset: 7000} },
			"partition 1: destination log diverges"},
		{"S moved on to a later epoch after D's", func(t *catchUpTopic) { t.SourceEnd[0] = epochEnd{Epoch: 3, EndOffset: 10} }, ""},
		{"D's cache empty", func(t *catchUpTopic) {
			t.Source[0].HW, t.Dest[0].HW = 0, 0
			t.DestEnd[0], t.SourceEnd[0] = epochEnd{Epoch: -1, EndOffset: 0}, epochEnd{Epoch: -1, EndOffset: -1, Err: "not asked"}
		}, ""},
		{"D's end unknown", func(t *catchUpTopic) {
			t.DestEnd[1] = epochEnd{Epoch: -1, EndOffset: -1, Err: "OffsetForLeaderEpoch b-2: x"}
		},
			"partition 1: destination: OffsetForLeaderEpoch"},
		{"S's end unknown", func(t *catchUpTopic) {
			t.SourceEnd[0] = epochEnd{Epoch: -1, EndOffset: -1, Err: "OffsetForLeaderEpoch a-1: x"}
		},
			"partition 0: source: OffsetForLeaderEpoch"},
		{"local error first", func(t *catchUpTopic) { t.Err, t.SourceErr = "topic is not in the mirror", "x" }, "topic is not in the mirror"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ct := base()
			tc.edit(&ct)
			got := catchUpReason(ct)
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("caught up expected, got %q", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Fatalf("reason %q, want it to contain %q", got, tc.want)
			}
		})
	}
}
