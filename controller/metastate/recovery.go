package metastate

import (
	"maps"
	"math"
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// Round is one unclean recovery round (SPEC §3.5). Rounds are soft state:
// they are not persisted and a new controller plans them again.
type Round struct {
	ID        uint64
	Topic     string
	TopicID   string
	Partition int32
	// Strategy is metadata.StrategyBalanced or metadata.StrategyAggressive.
	Strategy string
	// Candidates are the brokers to ask, in R order, with the broker epoch
	// each had when the round started.
	Candidates      []int32
	CandidateEpochs []int64
	// DeadlineMs: balanced needs every answer before it; aggressive uses
	// what arrived by then.
	DeadlineMs int64

	// trigger snapshot for the balanced re-check.
	lke []int32
	lkl int32
}

// ReplicaLogAnswer is one candidate's GetReplicaLogInfo answer for the
// round's partition.
type ReplicaLogAnswer struct {
	Broker                 int32
	BrokerEpoch            int64
	LastWrittenLeaderEpoch int32
	LogEndOffset           int64
	Error                  twinlogv1.ErrorCode
}

// RoundOutcome says what CompleteRecoveryRound did.
type RoundOutcome struct {
	// Applied is true if the winner was installed (the delta is non-nil).
	Applied bool
	Winner  int32
	// Reason explains a discarded round.
	Reason string
}

// ActiveRounds returns the rounds in progress, sorted by ID.
func (s *State) ActiveRounds() []Round {
	var out []Round
	for _, r := range s.rounds {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Round) int { return int(a.ID - b.ID) })
	return out
}

// AbortRounds forgets the listed rounds (unknown ids are ignored). The shell
// calls it for the StartRounds of a Tick or ElectLeaders whose delta failed
// to persist: those rounds were planned on a view that never became the
// image, and while they exist no other round starts for their partitions.
// Answers that still arrive for them are discarded by
// CompleteRecoveryRound ("round is not active").
func (s *State) AbortRounds(ids []uint64) {
	if len(ids) == 0 {
		return
	}
	for k, r := range s.rounds {
		if slices.Contains(ids, r.ID) {
			delete(s.rounds, k)
		}
	}
}

// roundTrigger returns the candidates of a round the partition needs under
// strategy now, nil if none (SPEC §3.5).
func (t *txn) roundTrigger(p *twinlogv1.PartitionRecord, strategy string) []int32 {
	if p.GetLeader() != noBroker {
		return nil
	}
	switch strategy {
	case metadata.StrategyBalanced:
		if len(p.GetIsr()) > 0 || len(p.GetElr()) > 0 || len(p.GetLastKnownElr()) == 0 {
			return nil
		}
		for _, b := range p.GetLastKnownElr() {
			if !t.acceptable(b) {
				return nil
			}
		}
		return inROrder(p.GetReplicas(), p.GetLastKnownElr())
	case metadata.StrategyAggressive:
		for _, b := range union(p.GetIsr(), p.GetElr()) {
			if t.acceptable(b) {
				return nil
			}
		}
		var c []int32
		for _, b := range p.GetReplicas() {
			if t.acceptable(b) {
				c = append(c, b)
			}
		}
		return c
	}
	return nil
}

// stillTriggered is the completion re-check of SPEC §3.5.
func (t *txn) stillTriggered(p *twinlogv1.PartitionRecord, r *Round) bool {
	if p == nil || p.GetTopicId() != r.TopicID || p.GetLeader() != noBroker {
		return false
	}
	switch r.Strategy {
	case metadata.StrategyBalanced:
		return len(p.GetIsr()) == 0 && len(p.GetElr()) == 0 &&
			slices.Equal(p.GetLastKnownElr(), r.lke) && p.GetLastKnownLeader() == r.lkl
	case metadata.StrategyAggressive:
		for _, b := range union(p.GetIsr(), p.GetElr()) {
			if t.acceptable(b) {
				return false
			}
		}
		return true
	}
	return false
}

// addSat is a + b, saturated at the int64 range instead of wrapping: an
// image written before configdef capped unclean.recovery.timeout.ms may
// hold a timeout near MaxInt64, and a wrapped deadline lies in the past, so
// the round would end at once instead of (practically) never.
func addSat(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

func (s *State) newRound(t *txn, p *twinlogv1.PartitionRecord, strategy string, cands []int32, nowMs int64) *Round {
	s.nextRoundID++
	r := &Round{
		ID: s.nextRoundID, Topic: p.GetTopic(), TopicID: p.GetTopicId(), Partition: p.GetPartition(),
		Strategy: strategy, Candidates: cands,
		DeadlineMs: addSat(nowMs, metadata.ConfigInt(t.clusterConfigValue(metadata.KeyUncleanRecoveryTimeoutMs), 300000)),
		lke:        slices.Clone(p.GetLastKnownElr()), lkl: p.GetLastKnownLeader(),
	}
	for _, b := range cands {
		r.CandidateEpochs = append(r.CandidateEpochs, t.broker(b).GetBrokerEpoch())
	}
	s.rounds[tpKey{p.GetTopic(), p.GetPartition()}] = r
	return r
}

// planRounds ends expired or obsolete rounds and starts the rounds the view
// needs.
func (s *State) planRounds(t *txn, nowMs int64) TickResult {
	var res TickResult
	for _, k := range slices.SortedFunc(maps.Keys(s.rounds), cmpKey) {
		r := s.rounds[k]
		p := t.partition(k.topic, k.part)
		if nowMs >= r.DeadlineMs || !t.stillTriggered(p, r) {
			delete(s.rounds, k)
			res.EndedRounds = append(res.EndedRounds, *r)
		}
	}
	for _, k := range t.leaderlessKeys() {
		p := t.partition(k.topic, k.part)
		if s.rounds[k] != nil {
			continue
		}
		strategy := t.strategy(p.GetTopic())
		if cands := t.roundTrigger(p, strategy); len(cands) > 0 {
			res.StartRounds = append(res.StartRounds, *s.newRound(t, p, strategy, cands, nowMs))
		}
	}
	return res
}

// CompleteRecoveryRound applies a finished round (SPEC §3.5) only if the
// partition is still leaderless, the trigger still holds and the winner is
// still acceptable with the broker epoch it answered with; else the round is
// discarded (nil delta). Answers from non-candidates, unacceptable brokers,
// with errors or with a broker epoch that is not the registered one are
// ignored. Balanced needs every candidate's answer before the deadline;
// aggressive needs one. Highest (lastWrittenLeaderEpoch, LEO) wins, ties by
// R order.
func (s *State) CompleteRecoveryRound(id uint64, answers []ReplicaLogAnswer, nowMs int64) (*twinlogv1.MetadataDelta, RoundOutcome) {
	out := RoundOutcome{Winner: noBroker}
	var r *Round
	for k, x := range s.rounds {
		if x.ID == id {
			r = x
			delete(s.rounds, k)
			break
		}
	}
	if r == nil {
		out.Reason = "round is not active"
		return nil, out
	}
	t := s.view()
	p := t.partition(r.Topic, r.Partition)
	if !t.stillTriggered(p, r) {
		out.Reason = "trigger no longer holds"
		return nil, out
	}
	if r.Strategy == metadata.StrategyBalanced && nowMs > r.DeadlineMs {
		out.Reason = "balanced round answered after its deadline"
		return nil, out
	}
	valid := map[int32]ReplicaLogAnswer{}
	for _, a := range answers {
		br := t.broker(a.Broker)
		if a.Error != ecNone || !contains(r.Candidates, a.Broker) || !t.acceptable(a.Broker) ||
			br.GetBrokerEpoch() != a.BrokerEpoch || !contains(p.GetReplicas(), a.Broker) {
			continue
		}
		valid[a.Broker] = a
	}
	if r.Strategy == metadata.StrategyBalanced && len(valid) < len(r.Candidates) {
		out.Reason = "balanced round is missing answers"
		return nil, out
	}
	winner := noBroker
	for _, b := range p.GetReplicas() {
		a, ok := valid[b]
		if !ok {
			continue
		}
		if winner == noBroker {
			winner = b
			continue
		}
		w := valid[winner]
		if a.LastWrittenLeaderEpoch > w.LastWrittenLeaderEpoch ||
			(a.LastWrittenLeaderEpoch == w.LastWrittenLeaderEpoch && a.LogEndOffset > w.LogEndOffset) {
			winner = b
		}
	}
	if winner == noBroker {
		out.Reason = "no valid answer"
		return nil, out
	}
	o := defaultOpts()
	o.uncleanWinner = winner
	t.change(p, o)
	out.Applied, out.Winner = true, winner
	return t.delta(), out
}

func cmpKey(a, b tpKey) int {
	switch {
	case a.topic < b.topic:
		return -1
	case a.topic > b.topic:
		return 1
	}
	return int(a.part - b.part)
}
