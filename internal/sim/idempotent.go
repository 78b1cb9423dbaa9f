package sim

import (
	"fmt"
	"slices"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/storage"
)

// Idempotent producers (Config.Idempotent), as a Kafka client with
// enable.idempotence runs them: a producer asks a broker for a producer id
// (InitProducerId; the broker hands out the ids of a block it asked the
// shipped controller for, AllocateProducerIds, through
// serve.ProducerIDBlock), numbers its batches per partition from sequence
// 0, keeps at most maxInFlightIdem of them unacknowledged per partition,
// and sends a batch again, the same bytes, until it is acknowledged: after
// a lost request or answer (no answer within twice the produce timeout) or
// a retriable error. The leaders' shipped producer state
// (serve.Propose over storage/producer) must answer a retry of a batch the
// log holds with its original offsets and append nothing; a duplicate
// record would show as one value at two offsets in the history, which
// fails the run.
//
// A producer gives its id up (reset: a new InitProducerId, every batch it
// had not seen acknowledged abandoned, never sent again) when the head of
// a partition's queue is refused OUT_OF_ORDER_SEQUENCE_NUMBER (the
// partition lost batches before it: acks=1 writes truncated, or never
// appended), on INVALID_PRODUCER_EPOCH, or when a batch has waited longer
// than idemDeliveryMs (Kafka's delivery.timeout.ms). Abandoned values may
// still be appended by a copy in flight; they are never acknowledged.
//
// Checked: no producer id is handed out twice in the run (both clusters
// of a two-cluster run: their id spaces are disjoint), every answer is one
// a single-batch request may get (never DUPLICATE_SEQUENCE_NUMBER), and
// the history's "value at two offsets". Counted in Report.Idempotent.

// maxInFlightIdem bounds a producer's unacknowledged batches per
// partition, below storage/producer's MaxBatches so a retry is always one
// the partition remembers.
const maxInFlightIdem = 3

// idemDeliveryMs is how long a batch may wait for its acknowledgement
// before the producer abandons it (and its id).
const idemDeliveryMs = 8000

// idemRetryMs is the backoff after a retriable error.
const idemRetryMs = 100

// IdempotentReport is what the idempotent producers did.
type IdempotentReport struct {
	// Inits counts producer ids received; Resets ids given up.
	Inits, Resets int
	// Batches counts batches produced, Sends every request of one
	// (first sends and retries), Acked the batches acknowledged.
	Batches, Sends, Acked int
	// Duplicates counts retries the leaders answered as duplicates (with
	// the original's offsets, nothing appended).
	Duplicates int
	// OutOfOrder counts OUT_OF_ORDER_SEQUENCE_NUMBER answers; Fenced
	// INVALID_PRODUCER_EPOCH answers.
	OutOfOrder, Fenced int
	// Abandoned counts batches given up unacknowledged.
	Abandoned int
	// Moved counts producers carried to the other cluster at a failover
	// (two clusters), MovedAcked the batches they had unacknowledged
	// then that the new cluster acknowledged, MovedDuplicates those of
	// them it answered as duplicates (it held them, mirrored), and
	// MovedResets the carried ids given up.
	Moved, MovedAcked, MovedDuplicates, MovedResets int
}

// idemState is one producer's idempotence: its id and per partition its
// next sequence and unacknowledged batches.
type idemState struct {
	pid   int64 // -1 until InitProducerId answers
	epoch int16
	// gen counts the ids this producer had: answers for an earlier one
	// are dropped.
	gen int
	// initAt is when the InitProducerId in flight was sent, -1 none.
	initAt int64
	// parts by the index of the partition in Sim.topics.
	parts []*idemPart
	// moved: carried over from the other cluster's producer with this
	// id (pid, epoch, sequences and unacknowledged batches).
	moved bool
}

type idemPart struct {
	next  int32
	queue []*idemBatch // by sequence
}

type idemBatch struct {
	tp     twinlog.TopicPartition
	values []string
	seq    int32
	buf    []byte
	acks   replica.Acks
	first  int64 // when it was first sent
	// attempt numbers the sends; inflight: the latest has no answer yet;
	// retryAt: not before (after an error).
	attempt  int
	inflight bool
	retryAt  int64
	// moved: unacknowledged when its producer moved to the other cluster.
	moved bool
}

func (pr *producer) idem() *idemState {
	if pr.idemSt == nil {
		pr.idemSt = &idemState{pid: -1, initAt: -1, parts: make([]*idemPart, len(pr.s.topics))}
		for i := range pr.idemSt.parts {
			pr.idemSt.parts[i] = &idemPart{}
		}
	}
	return pr.idemSt
}

// produceIdempotent is one step of an idempotent producer: get an id,
// resend what is due, and maybe start a new batch.
func (pr *producer) produceIdempotent() {
	s := pr.s
	st := pr.idem()
	if st.pid < 0 {
		if st.initAt < 0 || s.now-st.initAt > 2*s.cfg.RPCTimeoutMs {
			pr.initProducerID()
		}
		return
	}
	for _, ip := range st.parts {
		for _, bt := range ip.queue {
			if s.now-bt.first > idemDeliveryMs {
				pr.resetIdem(fmt.Sprintf("batch %s seq %d waited %d ms", bt.tp, bt.seq, s.now-bt.first))
				return
			}
		}
	}
	for _, ip := range st.parts {
		for _, bt := range ip.queue {
			if !bt.inflight && s.now >= bt.retryAt {
				pr.sendIdem(bt)
			}
		}
	}
	i := s.rng.IntN(len(s.topics))
	ip := st.parts[i]
	if len(ip.queue) >= maxInFlightIdem {
		return
	}
	tp := s.topics[i]
	acks, values, recs := pr.nextRecords()
	buf, err := storage.EncodeBatch(recs, storage.BatchOptions{Producer: &storage.Producer{ID: st.pid, Epoch: st.epoch, BaseSequence: ip.next}})
	if err != nil {
		s.fail("encode", "%v", err)
		return
	}
	bt := &idemBatch{tp: tp, values: values, seq: ip.next, buf: buf, acks: acks, first: s.now}
	ip.next += int32(len(values))
	ip.queue = append(ip.queue, bt)
	s.report.Idempotent.Batches++
	pr.sendIdem(bt)
}

// sendIdem sends bt (again) to the partition's leader as the producer
// sees it; without one it stays queued.
func (pr *producer) sendIdem(bt *idemBatch) {
	s := pr.s
	leader, le := s.leaderFor(bt.tp)
	if leader < 1 {
		bt.retryAt = s.now + idemRetryMs
		return
	}
	st := pr.idem()
	gen := st.gen
	bt.attempt++
	attempt := bt.attempt
	bt.inflight = true
	s.report.Idempotent.Sends++
	b := s.brokers[leader-1]
	s.tracef("producer %d -> broker %d %s acks %d pid %d seq %d attempt %d values %v (LE %d)", pr.id, leader, bt.tp, bt.acks, st.pid, bt.seq, attempt, bt.values, le)
	s.net.send(pr.node(), b.node(), "produce", func() {
		b.handleProduce(bt.tp, bt.acks, bt.buf, bt.values, s.cfg.ProduceTimeoutMs, func(code pb.ErrorCode, base int64, le int32) {
			s.net.send(b.node(), pr.node(), "produce-resp", func() {
				pr.idemResult(st, gen, bt, attempt, code, base, le)
			})
		})
	})
	// A lost request or answer: send again once twice the produce timeout
	// has passed without one.
	s.after(s.cfg.ProduceTimeoutMs*2, func() {
		if pr.idemSt == st && st.gen == gen && bt.attempt == attempt && bt.inflight {
			bt.inflight = false
		}
	})
}

// idemResult handles the answer to attempt of bt, sent by st under id
// gen.
func (pr *producer) idemResult(st *idemState, gen int, bt *idemBatch, attempt int, code pb.ErrorCode, base int64, le int32) {
	s := pr.s
	if pr.idemSt != st || st.gen != gen {
		// For an id given up (its batches are abandoned), or a request
		// sent before the producer moved to the other cluster.
		return
	}
	i := slices.Index(s.topics, bt.tp)
	ip := st.parts[i]
	at := slices.Index(ip.queue, bt)
	if at < 0 {
		return // acknowledged already (an earlier attempt's answer)
	}
	s.tracef("producer %d %s pid %d seq %d attempt %d: %s base %d LE %d", pr.id, bt.tp, st.pid, bt.seq, attempt, shortCode(code), base, le)
	current := attempt == bt.attempt
	switch code {
	case pb.ErrorCode_ERROR_CODE_NONE:
		ip.queue = slices.Delete(ip.queue, at, at+1)
		s.report.Idempotent.Acked++
		if bt.moved {
			s.report.Idempotent.MovedAcked++
			if s.dupSeqs[[2]int64{st.pid, int64(bt.seq)}] {
				s.report.Idempotent.MovedDuplicates++
			}
		}
		pr.result(bt.tp, bt.acks, bt.values, code, base, le)
		return
	case pb.ErrorCode_ERROR_CODE_DUPLICATE_SEQUENCE_NUMBER:
		s.fail("idempotent producer", "producer %d %s pid %d seq %d: DUPLICATE_SEQUENCE_NUMBER for a request of one batch", pr.id, bt.tp, st.pid, bt.seq)
		return
	case pb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER:
		s.report.Idempotent.OutOfOrder++
		if at == 0 {
			// Nothing before it is unacknowledged: the partition lost
			// batches this producer saw acknowledged (acks=1), or never
			// had them.
			pr.resetIdem(fmt.Sprintf("%s seq %d out of order at the head", bt.tp, bt.seq))
			return
		}
	case pb.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH:
		s.report.Idempotent.Fenced++
		pr.resetIdem(fmt.Sprintf("%s pid %d epoch %d fenced", bt.tp, st.pid, st.epoch))
		return
	}
	s.report.ProduceErrors++
	if current {
		bt.inflight = false
		bt.retryAt = s.now + idemRetryMs
	}
}

// resetIdem gives the producer's id up: every unacknowledged batch is
// abandoned and the next step asks for a new id.
func (pr *producer) resetIdem(why string) {
	s := pr.s
	st := pr.idem()
	n := 0
	for _, ip := range st.parts {
		n += len(ip.queue)
		ip.queue, ip.next = nil, 0
	}
	s.report.Idempotent.Resets++
	s.report.Idempotent.Abandoned += n
	if st.moved {
		s.report.Idempotent.MovedResets++
	}
	s.tracef("producer %d gives up pid %d (%s): %d batches abandoned", pr.id, st.pid, why, n)
	st.pid, st.gen, st.initAt, st.moved = -1, st.gen+1, -1, false
}

// moveProducers carries, at a failover, each of the old source's
// idempotent producers with a producer id to the destination with even
// odds, as an application moved to the other cluster with its producer:
// the destination's producer of the same index takes over its id, epoch,
// sequences and unacknowledged batches (their values keep the name of
// their writer) and sends them there; the answers to what it sent before
// are lost with the old connection. The destination's producer gives up
// its own state and the source's starts afresh. On the destination the
// leaders must answer the batches it holds (mirrored) as duplicates with
// their offsets, and go on from the last sequence it holds.
func (w *world) moveProducers(from, to *Sim) {
	for i, sp := range from.producers {
		st := sp.idemSt
		if st == nil || st.pid < 0 || w.rng.IntN(2) == 0 {
			continue
		}
		dp := to.producers[i]
		if old := dp.idemSt; old != nil && old.pid >= 0 {
			dp.resetIdem("its application moved away")
		}
		n := 0
		for _, ip := range st.parts {
			for _, bt := range ip.queue {
				bt.inflight, bt.retryAt, bt.moved = false, 0, true
				bt.first = to.now // the new connection's delivery timeout
				n++
			}
		}
		st.moved = true
		dp.idemSt, sp.idemSt = st, nil
		to.report.Idempotent.Moved++
		w.a.tracef("mirror: producer %d of %s moves to %s as producer %d with pid %d and %d unacknowledged batches", sp.id, from.clusterID, to.clusterID, dp.id, st.pid, n)
	}
}

// initProducerID asks a random running broker for a producer id.
func (pr *producer) initProducerID() {
	s := pr.s
	st := pr.idem()
	b := s.brokers[s.rng.IntN(len(s.brokers))]
	st.initAt = s.now
	gen := st.gen
	s.net.send(pr.node(), b.node(), "init-pid", func() {
		b.initProducerID(func(pid int64, epoch int16) {
			s.net.send(b.node(), pr.node(), "init-pid-resp", func() {
				if st.gen != gen || st.pid >= 0 {
					return // a later request's answer came first
				}
				s.report.Idempotent.Inits++
				if by, ok := s.pidsGiven[pid]; ok {
					s.fail("producer id given twice", "producer %d of cluster %s got id %d, given before to %s", pr.id, s.clusterID, pid, by)
					return
				}
				s.pidsGiven[pid] = fmt.Sprintf("producer %d of cluster %s", pr.id, s.clusterID)
				st.pid, st.epoch, st.initAt = pid, epoch, -1
				s.tracef("producer %d has pid %d epoch %d", pr.id, pid, epoch)
			})
		})
	})
}

// initProducerID answers an InitProducerId as the broker does
// (broker/producerids.go): the next id of its block, asking the
// controller for a block when it has none; no answer when it is down or
// not registered, the controller refused or did not answer, or the block
// that came back lies below one used since.
func (b *simBroker) initProducerID(reply func(pid int64, epoch int16)) {
	s := b.s
	if !b.up || !b.registered {
		return
	}
	if id, ok := b.pids.Take(); ok {
		reply(id, 0)
		return
	}
	inc := b.inc
	req := &pb.AllocateProducerIdsRequest{BrokerId: b.id, BrokerEpoch: b.epoch}
	askController(b, "allocate-pids", "allocate-pids-resp", s.cfg.RPCTimeoutMs, func(c *controller) *pb.AllocateProducerIdsResponse {
		return rpc(c, fmt.Sprintf("allocate producer ids %d", b.id), false, brokerCaller(s, b.id, pb.ControllerService_AllocateProducerIds_FullMethodName), c.svc.AllocateProducerIds, req)
	}, func(resp *pb.AllocateProducerIdsResponse, err error) {
		if err != nil || b.inc != inc || !b.up {
			return
		}
		if resp.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			s.tracef("broker %d allocate producer ids: %s", b.id, errText(resp))
			return
		}
		if err := b.pids.Refill(resp.GetProducerIdStart(), resp.GetProducerIdLen()); err != nil {
			// A later block came first (two InitProducerIds found the
			// block used up; the shipped allocator asks once for both).
			s.tracef("broker %d: %v", b.id, err)
			return
		}
		if id, ok := b.pids.Take(); ok {
			reply(id, 0)
		}
	})
}
