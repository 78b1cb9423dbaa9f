package plan_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/twinlog/twinlog"
	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/mirror/plan"
)

// TestPropertyRandomEvents drives B (mirroring A) with random operator
// requests, leader changes, replica views, source changes, fetch outcomes,
// held and failed writes and ticks. After every step: illegal requests are
// rejected with nothing changed, a fetcher runs only in MIRRORING, B is
// writable only in STOPPED, B's log is a prefix of A's (copied records equal
// the source's) and LE_B ≥ every record epoch. At the end a Stop always
// reaches STOPPED and writable once its writes are acked and the bump done.
func TestPropertyRandomEvents(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		a, b := newCluster(rt, 'a'), newCluster(rt, 'b')
		link(a, b)
		a.le = 1
		a.mustProduce(2)
		b.status = plan.ReplicaStatus{Replicas: []twinlog.BrokerID{1, 2, 3}, ISR: []twinlog.BrokerID{1}, MinInsyncReplicas: 1}
		cfg := plan.Config{PendingTimeoutMs: 1000, RetryInitialBackoffMs: 10, RetryMaxBackoffMs: 100, RetryMaxAttempts: 3}
		gen := int64(1)
		b.mirrorFrom(gen, cfg)
		now := int64(0)

		op := func(ev plan.Event, o plan.Op) {
			before := b.m.State()
			// A Pause or Resume while stopping with a run wanted after it
			// (a Start since, of a later generation) is that run's desired
			// state (seed 2001489).
			restarted := before == plan.Stopping && b.desired.State != plan.Stopped &&
				b.desired.Generation > int64(b.runRecord().GetGeneration())
			err := b.m.Step(ev)
			legal := plan.Accepts(before, o) || restarted && (o == plan.OpPause || o == plan.OpResume)
			if legal != (err == nil) {
				rt.Fatalf("%v from %v: err %v", o, before, err)
			}
			if err != nil && (!errors.Is(err, plan.ErrInvalidRequest) || b.m.State() != before) {
				rt.Fatalf("%v from %v: %v, state %v", o, before, err, b.m.State())
			}
			if err == nil {
				switch o {
				case plan.OpStart:
					b.desired = plan.Desired{State: plan.Mirroring, Generation: gen, SourceClusterID: "A"}
				case plan.OpStop:
					b.desired.State = plan.Stopped
				case plan.OpPause:
					b.desired.State = plan.Paused
				case plan.OpResume:
					b.desired.State = plan.Mirroring
				}
			}
			b.drive()
		}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := range steps {
			switch k := rapid.IntRange(0, 15).Draw(rt, fmt.Sprintf("kind%d", i)); k {
			case 0:
				gen++
				op(plan.Start{Generation: gen, SourceClusterID: "A"}, plan.OpStart)
			case 1:
				op(plan.Pause{}, plan.OpPause)
			case 2:
				op(plan.Resume{}, plan.OpResume)
			case 3:
				op(plan.Stop{}, plan.OpStop)
			case 4, 5:
				now += int64(rapid.IntRange(1, 600).Draw(rt, "dt"))
				b.tick(now)
			case 6, 7:
				if b.fetching {
					b.fetch()
				}
			case 8:
				a.mustProduce(rapid.IntRange(1, 3).Draw(rt, "n"))
			case 9:
				a.leaderChange()
			case 10:
				a.up = !a.up
			case 11:
				b.leaderChange()
			case 12:
				isr := []twinlog.BrokerID{1}
				al := map[twinlog.BrokerID]twinlog.Epoch{}
				for _, r := range []twinlog.BrokerID{2, 3} {
					if rapid.Bool().Draw(rt, "inISR") {
						isr = append(isr, r)
					}
					if rapid.Bool().Draw(rt, "aligned") {
						al[r] = b.le
					}
				}
				b.status.ISR, b.status.FollowerAlignedEpoch = isr, al
				b.status.MinInsyncReplicas = rapid.IntRange(1, 3).Draw(rt, "minISR")
				b.status.SupportUncleanLeaderElection = rapid.Bool().Draw(rt, "unclean")
				b.step(plan.ReplicaStatusChanged{Status: b.status})
			case 13:
				b.holdWrites = !b.holdWrites
				if !b.holdWrites {
					b.releaseWrites()
				}
			case 14:
				if b.fetching {
					codes := []twinlogv1.ErrorCode{twinlogv1.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE,
						twinlogv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}
					b.step(plan.FetchError{Session: b.session, Error: rapid.SampledFrom(codes).Draw(rt, "code")})
				}
			case 15:
				if len(b.held) > 0 { // fail one held write instead of acking it
					i := rapid.IntRange(0, len(b.held)-1).Draw(rt, "failed")
					ack := b.held[i].(plan.WriteAcked)
					b.held = slices.Delete(b.held, i, i+1)
					b.step(plan.WriteFailed{Seq: ack.Seq, Error: twinlogv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS})
				}
			}
			checkProperty(rt, a, b)
		}

		// Stop always ends STOPPED once its writes are acked and the bump done.
		b.holdWrites = false
		b.releaseWrites()
		if b.m.State() != plan.Stopped {
			op(plan.Stop{}, plan.OpStop)
		}
		for range 3 {
			now += 1000
			b.tick(now) // rewrites of failed writes
		}
		if b.m.State() != plan.Stopped || !b.writable {
			rt.Fatalf("after stop: state %v writable %v (%s)", b.m.State(), b.writable, b.m.Status().LastError)
		}
		if r := b.lmleRecord(); r == nil || twinlog.Epoch(r.GetLmle()) >= b.le {
			rt.Fatalf("LMLE record %v, LE %d (inv. 18)", r, b.le)
		}
		for _, r := range b.log.recs {
			if r.ep >= b.le {
				rt.Fatalf("record %v not below the post-stop LE %d", r, b.le)
			}
		}
		checkProperty(rt, a, b)
	})
}

func checkProperty(rt *rapid.T, a, b *cluster) {
	st := b.m.State()
	if b.fetching && st != plan.Mirroring {
		rt.Fatalf("fetcher running in %v", st)
	}
	if b.writable && st != plan.Stopped {
		rt.Fatalf("writable in %v", st)
	}
	if len(b.log.recs) > len(a.log.recs) {
		rt.Fatalf("B %q longer than A %q", b.log, a.log)
	}
	for i, r := range b.log.recs {
		if r != a.log.recs[i] {
			rt.Fatalf("B %q is not a prefix of A %q", b.log, a.log)
		}
		if r.ep > b.le {
			rt.Fatalf("record %v above LE_B %d", r, b.le)
		}
	}
}
