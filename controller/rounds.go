package controller

import (
	"context"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastate"
)

// startRoundLocked launches one unclean recovery round (SPEC §3.5) as a
// goroutine. c.mu is held. Rounds started before Run (tests driving Tick
// without Run) are run with a background context.
func (c *Controller) startRoundLocked(r metastate.Round) {
	parent := c.roundCtx
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	c.rounds[r.ID] = cancel
	// Resolve addresses now, under the lock, from the image the round was
	// planned on.
	addrs := make([]string, len(r.Candidates))
	for i, b := range r.Candidates {
		if br := c.state.Broker(b); br != nil {
			addrs[i] = net.JoinHostPort(br.GetHost(), strconv.Itoa(int(br.GetPort())))
		}
	}
	remaining := untilMs(r.DeadlineMs, c.nowMs())
	c.log.Info("unclean recovery round started", "round", r.ID, "topic", r.Topic, "partition", r.Partition,
		"strategy", r.Strategy, "candidates", r.Candidates)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer cancel()
		answers := c.askCandidates(ctx, r, addrs, remaining)
		if ctx.Err() != nil {
			return // round ended (cancelled by Tick or shutdown)
		}
		c.completeRound(r, answers)
	}()
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

// askCandidates sends GetReplicaLogInfo to every candidate in parallel and
// collects the answers that arrive before the deadline.
func (c *Controller) askCandidates(ctx context.Context, r metastate.Round, addrs []string, remaining time.Duration) []metastate.ReplicaLogAnswer {
	timeout := c.cfg.RecoveryRPCTimeout
	if remaining > 0 && remaining < timeout {
		timeout = remaining
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		mu      sync.Mutex
		answers []metastate.ReplicaLogAnswer
		wg      sync.WaitGroup
	)
	for i, b := range r.Candidates {
		if addrs[i] == "" {
			continue
		}
		epoch := int64(-1)
		if i < len(r.CandidateEpochs) {
			epoch = r.CandidateEpochs[i]
		}
		wg.Add(1)
		go func(b int32, addr string, epoch int64) {
			defer wg.Done()
			a, ok := c.askOne(ctx, r, b, addr, epoch)
			if !ok {
				return
			}
			mu.Lock()
			answers = append(answers, a)
			mu.Unlock()
		}(b, addrs[i], epoch)
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
	d, out := c.state.CompleteRecoveryRound(r.ID, answers, c.nowMs())
	if err := c.commitLocked(d); err != nil {
		c.log.Error("persist recovery round result", "round", r.ID, "err", err)
		return
	}
	if out.Applied {
		c.log.Warn("unclean recovery round elected a leader", "round", r.ID, "topic", r.Topic,
			"partition", r.Partition, "leader", out.Winner, "answers", len(answers))
	} else {
		c.log.Info("unclean recovery round discarded", "round", r.ID, "topic", r.Topic,
			"partition", r.Partition, "reason", out.Reason, "answers", len(answers))
	}
}
