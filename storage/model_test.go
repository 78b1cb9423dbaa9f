package storage

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/twinlog/twinlog"
	"github.com/twinlog/twinlog/storage/epoch"
)

// modelBatch is a batch as the model expects to read it back.
type modelBatch struct {
	base, last twinlog.Offset
	epoch      twinlog.Epoch
	data       []byte
}

// logModel is the reference: a slice of batches and the log bounds.
type logModel struct {
	batches  []modelBatch
	start    twinlog.Offset
	leo      twinlog.Offset
	durable  twinlog.Offset // every batch ending at or below this survives a crash
	hw       twinlog.Offset
	latestEp twinlog.Epoch
	// startEpoch is the epoch truncateFromStart re-inserted at start after
	// retention dropped its first batches (-1 none).
	startEpoch twinlog.Epoch
}

func (m *logModel) truncate(o twinlog.Offset) {
	i := 0
	for i < len(m.batches) && m.batches[i].last < o {
		i++
	}
	m.batches = m.batches[:i]
	m.leo = m.start
	if i > 0 {
		m.leo = m.batches[i-1].last + 1
	}
	m.hw = min(m.hw, m.leo)
	m.durable = min(m.durable, m.leo)
	if len(m.batches) == 0 {
		m.startEpoch = -1 // truncateFromEnd(start) dropped it
	}
}

// wantEpochs derives the epoch cache from the batches: one entry per run of
// an epoch at its first batch. An entry at the LEO of an empty log (left by
// truncateFromStart after retention emptied it) is also accepted.
func (m *logModel) wantEpochs() []epoch.Entry {
	var out []epoch.Entry
	for _, b := range m.batches {
		if len(out) == 0 || out[len(out)-1].Epoch != b.epoch {
			out = append(out, epoch.Entry{Epoch: b.epoch, StartOffset: b.base})
		}
	}
	if m.startEpoch >= 0 {
		switch {
		case len(out) > 0 && out[0].Epoch == m.startEpoch:
			out[0].StartOffset = m.start
		case len(out) == 0 || out[0].StartOffset > m.start:
			out = append([]epoch.Entry{{Epoch: m.startEpoch, StartOffset: m.start}}, out...)
		}
	}
	return out
}

type modelHarness struct {
	fs    *MemFS
	opts  Options
	l     *Log
	m     logModel
	clock *fakeClock
}

func (h *modelHarness) reopen(t *rapid.T, clean bool) {
	o := h.opts
	o.CleanShutdown = clean
	o.HighWatermark = h.m.hw
	l, err := Open(h.fs, testDir, o)
	if err != nil {
		t.Fatalf("reopen: %v\n%s", err, h.fs)
	}
	h.l = l
	if len(h.m.batches) == 0 {
		h.m.startEpoch = -1 // load does truncateFromEnd(LEO)
	}
}

func (h *modelHarness) check(t *rapid.T) {
	l, m := h.l, &h.m
	if l.LogStartOffset() != m.start || l.LogEndOffset() != m.leo || l.HighWatermark() != m.hw {
		t.Fatalf("bounds: log [%d, %d) hw %d, model [%d, %d) hw %d", l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), m.start, m.leo, m.hw)
	}
	// A full read, in random chunks, returns exactly the model's bytes.
	var want []byte
	for _, b := range m.batches {
		want = append(want, b.data...)
	}
	var got []byte
	from := m.start
	for from < m.leo {
		r, err := l.Read(from, rapid.IntRange(1, 2000).Draw(t, "maxBytes"), m.leo)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Batches) == 0 {
			break
		}
		bs, err := SplitBatches(r.Batches)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Batches...)
		from = bs[len(bs)-1].NextOffset()
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, model has %d", len(got), len(want))
	}
	// A random point read starts at the batch holding the offset, or the
	// next one after a gap.
	if m.leo > m.start {
		o := rapid.Int64Range(int64(m.start), int64(m.leo)-1).Draw(t, "point")
		r, err := l.Read(twinlog.Offset(o), 1, m.leo)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(m.batches, func(b modelBatch) bool { return b.last >= twinlog.Offset(o) })
		if !bytes.Equal(r.Batches, m.batches[i].data) {
			t.Fatalf("point read %d: got batch at %d, want %d", o, BatchView(r.Batches).BaseOffset(), m.batches[i].base)
		}
	}
	es := l.Epochs().Entries()
	wantEs := m.wantEpochs()
	if len(es) != len(wantEs) || (len(es) > 0 && !slices.Equal(es, wantEs)) {
		t.Fatalf("epochs %v, model %v", es, wantEs)
	}
}

func TestLogModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := newClock()
		h := &modelHarness{fs: NewMemFS(), clock: c,
			opts: Options{SegmentMaxBytes: 700, IndexIntervalBytes: 150, Clock: c.Now}}
		h.m.startEpoch = -1
		h.reopen(t, false)
		defer func() { h.l.Close() }()
		ts := int64(0)
		appendBatches := func(t *rapid.T, follower bool) {
			n := rapid.IntRange(1, 3).Draw(t, "batches")
			e := h.m.latestEp + twinlog.Epoch(rapid.IntRange(0, 2).Draw(t, "epochBump"))
			e = max(e, 0)
			var buf []byte
			next := h.m.leo
			var mbs []modelBatch
			for range n {
				recs := rapid.IntRange(1, 4).Draw(t, "records")
				rs := make([]Record, recs)
				for i := range rs {
					ts++
					rs[i] = Record{Timestamp: ts, Value: bytes.Repeat([]byte{byte(ts)}, rapid.IntRange(0, 120).Draw(t, "size"))}
				}
				base := next
				if follower {
					base += twinlog.Offset(rapid.IntRange(0, 3).Draw(t, "gap"))
				}
				b := must(EncodeBatch(rs, BatchOptions{BaseOffset: base, LeaderEpoch: e}))
				mbs = append(mbs, modelBatch{base: base, last: base + twinlog.Offset(recs-1), epoch: e})
				next = base + twinlog.Offset(recs)
				buf = append(buf, b...)
			}
			var err error
			if follower {
				_, err = h.l.AppendAsFollower(buf)
			} else {
				_, err = h.l.AppendAsLeader(buf, e)
			}
			if err != nil {
				t.Fatal(err)
			}
			// buf is now stamped; cut it into the model's batches.
			for i, b := range must(SplitBatches(buf)) {
				mbs[i].data = bytes.Clone(b)
			}
			h.m.batches = append(h.m.batches, mbs...)
			h.m.leo = next
			h.m.latestEp = e
		}
		t.Repeat(map[string]func(*rapid.T){
			"appendLeader":   func(t *rapid.T) { appendBatches(t, false) },
			"appendFollower": func(t *rapid.T) { appendBatches(t, true) },
			"truncate": func(t *rapid.T) {
				o := twinlog.Offset(rapid.Int64Range(0, int64(h.m.leo)+2).Draw(t, "to"))
				if err := h.l.TruncateTo(o); err != nil {
					t.Fatal(err)
				}
				if o < h.m.start {
					h.m = logModel{start: o, leo: o, durable: o, hw: o, latestEp: h.m.latestEp, startEpoch: -1}
				} else if o < h.m.leo {
					h.m.truncate(o)
				}
			},
			"truncateFully": func(t *rapid.T) {
				o := h.m.leo + twinlog.Offset(rapid.IntRange(-2, 5).Draw(t, "delta"))
				o = max(o, 0)
				if err := h.l.TruncateFullyAndStartAt(o); err != nil {
					t.Fatal(err)
				}
				h.m = logModel{start: o, leo: o, durable: o, hw: o, latestEp: h.m.latestEp, startEpoch: -1}
			},
			"roll": func(t *rapid.T) {
				if err := h.l.Roll(); err != nil {
					t.Fatal(err)
				}
			},
			"retention": func(t *rapid.T) {
				h.m.hw = h.l.SetHighWatermark(twinlog.Offset(rapid.Int64Range(int64(h.m.start), int64(h.m.leo)).Draw(t, "hw")))
				r := Retention{Bytes: rapid.Int64Range(1, 2000).Draw(t, "retentionBytes"), Below: h.m.hw}
				if rapid.Bool().Draw(t, "belowHW") {
					r.Below = twinlog.Offset(rapid.Int64Range(int64(h.m.start), int64(h.m.hw)).Draw(t, "below"))
				}
				if _, _, err := h.l.DeleteRetained(r); err != nil {
					t.Fatal(err)
				}
				start := h.l.LogStartOffset()
				if start < h.m.start || start > r.Below {
					t.Fatalf("log start %d outside [%d, below %d]", start, h.m.start, r.Below)
				}
				i := 0
				for i < len(h.m.batches) && h.m.batches[i].base < start {
					if h.m.batches[i].last >= start {
						t.Fatalf("log start %d inside batch %d", start, h.m.batches[i].base)
					}
					i++
				}
				if i > 0 {
					h.m.startEpoch = h.m.batches[i-1].epoch
				}
				h.m.batches = h.m.batches[i:]
				h.m.start = start
			},
			"flush": func(t *rapid.T) {
				if err := h.l.Flush(); err != nil {
					t.Fatal(err)
				}
				h.m.durable = h.m.leo
			},
			"closeReopen": func(t *rapid.T) {
				if err := h.l.Close(); err != nil {
					t.Fatal(err)
				}
				h.m.durable = h.m.leo
				h.reopen(t, rapid.Bool().Draw(t, "clean"))
			},
			"crash": func(t *rapid.T) {
				h.fs = h.fs.CrashClone()
				h.l.Close() // closes the old files; the clone is independent
				h.reopen(t, false)
				l, m := h.l, &h.m
				// The recovered log is a prefix of the model holding every
				// durable batch.
				if l.LogStartOffset() != m.start {
					t.Fatalf("log start %d, model %d", l.LogStartOffset(), m.start)
				}
				leo := l.LogEndOffset()
				if leo < m.durable || leo > m.leo {
					t.Fatalf("recovered LEO %d outside [durable %d, %d]", leo, m.durable, m.leo)
				}
				m.truncate(leo)
				if leo != m.leo {
					t.Fatalf("recovered LEO %d is not a batch boundary of the model (%d)", leo, m.leo)
				}
				m.hw = l.HighWatermark()
				m.durable = leo
			},
			"": func(t *rapid.T) { h.check(t) },
		})
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return v
}
