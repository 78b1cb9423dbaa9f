package controller

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastate"
)

// Default bounds of the backoff between the unclean recovery rounds of a
// partition whose rounds keep failing (Config.RecoveryRetryBackoff,
// Config.RecoveryRetryMaxBackoff). Tick plans a round for every leaderless
// partition that needs one on every tick once the previous round ended, so
// without a backoff a candidate that answers with an error for as long as
// its copy is offline (KAFKA_STORAGE_ERROR), or does not answer, is asked
// once a tick (20 times a second in brokertest) for as long as the
// partition stays leaderless.
// The first retry comes two default ticks (250 ms) after a failure; the cap
// keeps the wait well below unclean.recovery.timeout.ms (default 5 min),
// and a repair is seen at once anyway: a candidate's re-registration (a
// restart) resets the backoff.
const (
	roundRetryInitialBackoff = 500 * time.Millisecond
	roundRetryMaxBackoff     = 30 * time.Second
)

// roundKey names a partition in roundBackoff.
type roundKey struct {
	topic     string
	partition int32
}

// roundRetry is the backoff of one leaderless partition whose last rounds
// failed, with what the last failed round saw: a change in any of it (a
// candidate re-registered or left, the partition record changed) may change
// the answers, so the next round then asks at once.
type roundRetry struct {
	failures       int
	notBefore      time.Time
	topicID        string
	partitionEpoch int32
	candidates     []int32
	epochs         []int64
}

// roundBackoff is the shell's soft state for spacing out failed recovery
// rounds. It is scheduling only: whether a round elects a leader stays
// metastate's decision (CompleteRecoveryRound); the shell only delays
// asking again. Guarded by c.mu.
type roundBackoff struct {
	initial, max time.Duration // the first wait and the cap
	parts        map[roundKey]*roundRetry
	sweptAt      time.Time
}

// backoff is the wait after the n-th consecutive failed round (n ≥ 1): the
// initial wait doubled per failure, capped at max.
func (b *roundBackoff) backoff(n int) time.Duration {
	d := b.initial
	for i := 1; i < n && d < b.max; i++ {
		d *= 2
	}
	return min(d, b.max)
}

// wait returns how long round r must wait before asking its candidates: 0
// unless the partition's previous round failed recently and nothing the
// round depends on changed since.
func (b *roundBackoff) wait(r metastate.Round, p *twinlogv1.PartitionRecord, now time.Time) time.Duration {
	k := roundKey{r.Topic, r.Partition}
	rr := b.parts[k]
	if rr == nil {
		return 0
	}
	if !rr.sameAs(r, p) {
		delete(b.parts, k)
		return 0
	}
	return max(rr.notBefore.Sub(now), 0)
}

// sameAs reports whether round r on partition p asks what the failed round
// behind rr asked: the same topic, partition record and candidates with the
// same broker epochs.
func (rr *roundRetry) sameAs(r metastate.Round, p *twinlogv1.PartitionRecord) bool {
	return rr.topicID == r.TopicID && rr.partitionEpoch == p.GetPartitionEpoch() &&
		slices.Equal(rr.candidates, r.Candidates) && slices.Equal(rr.epochs, r.CandidateEpochs)
}

// record notes how a round ended and returns the wait before the
// partition's next round: none once the partition has a leader (or is
// gone), else the next step of the backoff. Now and then it also forgets
// partitions that got a leader without a round.
func (b *roundBackoff) record(r metastate.Round, st *metastate.State, now time.Time) time.Duration {
	k := roundKey{r.Topic, r.Partition}
	if now.Sub(b.sweptAt) >= b.max {
		b.sweptAt = now
		for pk, rr := range b.parts {
			if p := st.Partition(pk.topic, pk.partition); p == nil || p.GetTopicId() != rr.topicID || p.GetLeader() >= 0 {
				delete(b.parts, pk)
			}
		}
	}
	p := st.Partition(r.Topic, r.Partition)
	if p == nil || p.GetTopicId() != r.TopicID || p.GetLeader() >= 0 {
		delete(b.parts, k)
		return 0
	}
	rr := b.parts[k]
	if rr == nil || !rr.sameAs(r, p) {
		rr = &roundRetry{topicID: r.TopicID, partitionEpoch: p.GetPartitionEpoch(),
			candidates: slices.Clone(r.Candidates), epochs: slices.Clone(r.CandidateEpochs)}
		if b.parts == nil {
			b.parts = map[roundKey]*roundRetry{}
		}
		b.parts[k] = rr
	}
	rr.failures++
	d := b.backoff(rr.failures)
	rr.notBefore = now.Add(d)
	return d
}

// RoundTransport carries an unclean recovery round's questions (SPEC §3.5)
// to its candidates. Production sends GetReplicaLogInfo over gRPC
// (grpcRounds); the simulator sends them through its own network.
type RoundTransport interface {
	// AskReplicaLogs asks every target with an address for its log of the
	// round's partition and calls done exactly once, with the answers that
	// arrived, when all targets have answered or timeout has passed, or
	// earlier with what it has when ctx is done. It never calls done
	// before it returns: the controller holds its lock while asking.
	AskReplicaLogs(ctx context.Context, r metastate.Round, targets []RoundTarget, timeout time.Duration, done func([]metastate.ReplicaLogAnswer))
}

// RoundTarget is one candidate of a recovery round: its id, its address in
// the image the round was planned on ("" if it has none) and the broker
// epoch the round expects it to answer in.
type RoundTarget struct {
	Broker      int32
	Addr        string
	BrokerEpoch int64
}

// startRoundLocked launches one unclean recovery round (SPEC §3.5) through
// the round transport. c.mu is held. Rounds started before Run (tests
// driving Tick without Run, the simulator) run under a background context.
//
// A round for a partition whose previous round failed less than its
// backoff ago is not run: it is dropped from the state machine
// (AbortRounds) and Tick plans it again on a later tick, when it is due.
// Only rounds Tick would plan again are deferred so (the topic's own
// strategy); another (an aggressive ElectLeaders round on a balanced topic,
// which no tick re-plans) runs at once.
func (c *Controller) startRoundLocked(r metastate.Round) {
	now := c.now()
	p := c.state.Partition(r.Topic, r.Partition)
	if wait := c.roundRetry.wait(r, p, now); wait > 0 && r.Strategy == c.state.UncleanStrategy(r.Topic) {
		c.state.AbortRounds([]uint64{r.ID})
		c.log.Debug("unclean recovery round deferred: the last one failed", "topic", r.Topic, "partition", r.Partition,
			"retry_in", wait.String())
		return
	}
	parent := c.roundCtx
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	c.rounds[r.ID] = cancel
	// Resolve addresses now, under the lock, from the image the round was
	// planned on.
	targets := make([]RoundTarget, len(r.Candidates))
	for i, b := range r.Candidates {
		targets[i] = RoundTarget{Broker: b, BrokerEpoch: -1}
		if br := c.state.Broker(b); br != nil {
			targets[i].Addr = net.JoinHostPort(br.GetHost(), strconv.Itoa(int(br.GetPort())))
		}
		if i < len(r.CandidateEpochs) {
			targets[i].BrokerEpoch = r.CandidateEpochs[i]
		}
	}
	// Each question is bounded by RecoveryRPCTimeout and by the round's
	// own deadline.
	timeout := c.cfg.RecoveryRPCTimeout
	if remaining := untilMs(r.DeadlineMs, now.UnixMilli()); remaining > 0 && remaining < timeout {
		timeout = remaining
	}
	c.log.Info("unclean recovery round started", "round", r.ID, "topic", r.Topic, "partition", r.Partition,
		"strategy", r.Strategy, "candidates", r.Candidates)
	c.roundsT.AskReplicaLogs(ctx, r, targets, timeout, func(answers []metastate.ReplicaLogAnswer) {
		defer cancel()
		if ctx.Err() != nil {
			return // round ended (cancelled by Tick or shutdown)
		}
		c.completeRound(r, answers)
	})
}

// untilMs is the time from nowMs to deadlineMs, saturated instead of
// wrapped: a round whose deadline is far away (a huge
// unclean.recovery.timeout.ms saturates it at MaxInt64) has (practically)
// unlimited time, where (deadline - now) * time.Millisecond would wrap to a
// negative or tiny duration.
func untilMs(deadlineMs, nowMs int64) time.Duration {
	const maxMs = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case nowMs < 0 && deadlineMs > math.MaxInt64+nowMs:
		return math.MaxInt64
	case nowMs > 0 && deadlineMs < math.MinInt64+nowMs:
		return math.MinInt64
	}
	d := deadlineMs - nowMs
	switch {
	case d > maxMs:
		return math.MaxInt64
	case d < -maxMs:
		return math.MinInt64
	}
	return time.Duration(d) * time.Millisecond
}

// grpcRounds is the production RoundTransport: one goroutine per round
// (counted in c.wg, so Run's shutdown waits for it) asks the candidates in
// parallel over gRPC.
type grpcRounds struct{ c *Controller }

func (g grpcRounds) AskReplicaLogs(ctx context.Context, r metastate.Round, targets []RoundTarget, timeout time.Duration, done func([]metastate.ReplicaLogAnswer)) {
	g.c.wg.Add(1)
	go func() {
		defer g.c.wg.Done()
		done(g.c.askCandidates(ctx, r, targets, timeout))
	}()
}

// askCandidates sends GetReplicaLogInfo to every candidate in parallel and
// collects the answers that arrive within timeout.
func (c *Controller) askCandidates(ctx context.Context, r metastate.Round, targets []RoundTarget, timeout time.Duration) []metastate.ReplicaLogAnswer {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		mu      sync.Mutex
		answers []metastate.ReplicaLogAnswer
		wg      sync.WaitGroup
	)
	for _, t := range targets {
		if t.Addr == "" {
			continue
		}
		wg.Add(1)
		go func(t RoundTarget) {
			defer wg.Done()
			a, ok := c.askOne(ctx, r, t.Broker, t.Addr, t.BrokerEpoch)
			if !ok {
				return
			}
			mu.Lock()
			answers = append(answers, a)
			mu.Unlock()
		}(t)
	}
	wg.Wait()
	return answers
}

func (c *Controller) askOne(ctx context.Context, r metastate.Round, b int32, addr string, epoch int64) (metastate.ReplicaLogAnswer, bool) {
	log := c.log.With("round", r.ID, "topic", r.Topic, "partition", r.Partition, "broker_id", b)
	conn, err := c.dial(addr)
	if err != nil {
		log.Warn("dial recovery candidate", "addr", addr, "err", err)
		return metastate.ReplicaLogAnswer{}, false
	}
	defer conn.Close()
	resp, err := twinlogv1.NewReplicationServiceClient(conn).GetReplicaLogInfo(ctx, &twinlogv1.GetReplicaLogInfoRequest{
		BrokerEpoch: epoch,
		Topics: []*twinlogv1.GetReplicaLogInfoTopic{{
			Topic: r.Topic, TopicId: r.TopicID, Partitions: []int32{r.Partition},
		}},
	})
	if err != nil {
		log.Warn("GetReplicaLogInfo", "addr", addr, "err", err)
		return metastate.ReplicaLogAnswer{}, false
	}
	for _, t := range resp.GetTopics() {
		if t.GetTopic() != r.Topic {
			continue
		}
		for _, p := range t.GetPartitions() {
			if p.GetPartition() != r.Partition {
				continue
			}
			return metastate.ReplicaLogAnswer{
				Broker:                 b,
				BrokerEpoch:            resp.GetBrokerEpoch(),
				LastWrittenLeaderEpoch: p.GetLastWrittenLeaderEpoch(),
				LogEndOffset:           p.GetLogEndOffset(),
				Error:                  p.GetError(),
			}, true
		}
	}
	log.Warn("GetReplicaLogInfo answer lacks the partition")
	return metastate.ReplicaLogAnswer{}, false
}

// completeRound feeds a round's answers back into the state machine, which
// re-checks the trigger and installs the winner if it still holds.
func (c *Controller) completeRound(r metastate.Round, answers []metastate.ReplicaLogAnswer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.rounds, r.ID)
	if c.failed != nil {
		return
	}
	now := c.now()
	d, out := c.state.CompleteRecoveryRound(r.ID, answers, now.UnixMilli())
	if err := c.commitLocked(d); err != nil {
		c.log.Error("persist recovery round result", "round", r.ID, "err", err)
		return
	}
	retryIn := c.roundRetry.record(r, c.state, now)
	if out.Applied {
		c.log.Warn("unclean recovery round elected a leader", "round", r.ID, "topic", r.Topic,
			"partition", r.Partition, "leader", out.Winner, "answers", len(answers))
		return
	}
	attrs := []any{"round", r.ID, "topic", r.Topic, "partition", r.Partition, "reason", out.Reason,
		"candidates", r.Candidates, "answers", len(answers)}
	if errs := answerErrors(answers); errs != "" {
		attrs = append(attrs, "answer_errors", errs)
	}
	if retryIn > 0 {
		attrs = append(attrs, "retry_in", retryIn.String())
	}
	c.log.Info("unclean recovery round discarded", attrs...)
}

// answerErrors lists the candidates that answered with an error, as
// "broker=CODE" pairs ("" if none): KAFKA_STORAGE_ERROR names a candidate
// whose copy is offline (twinctl brokers list, OFFLINE).
func answerErrors(answers []metastate.ReplicaLogAnswer) string {
	var b strings.Builder
	for _, a := range answers {
		if a.Error == twinlogv1.ErrorCode_ERROR_CODE_NONE {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d=%s", a.Broker, strings.TrimPrefix(a.Error.String(), "ERROR_CODE_"))
	}
	return b.String()
}
