package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/replica"
	"github.com/twinlog/twinlog/broker/serve"
	"github.com/twinlog/twinlog/storage"
)

// shadowLog is the simulator's copy of one replica's records (offset, epoch,
// value), kept in step with the LogOps it applies to storage and compared
// with storage from time to time. Offsets are dense (no mirror gaps yet).
type shadowLog struct {
	start int64
	recs  []shadowRec
	gen   int // bumped by every truncation
	// bases are the base offsets of the batches held, ascending: storage
	// truncates in whole batches (a batch straddling the offset goes), and
	// so does truncate. A record before the first base (none known) is
	// cut exactly.
	bases []int64
}

type shadowRec struct {
	epoch int32
	value string
}

func (l *shadowLog) leo() int64 { return l.start + int64(len(l.recs)) }

func (l *shadowLog) at(o int64) (shadowRec, bool) {
	if o < l.start || o >= l.leo() {
		return shadowRec{}, false
	}
	return l.recs[o-l.start], true
}

func (l *shadowLog) append(o int64, e int32, v string) {
	if o != l.leo() {
		// Gaps only come from mirrors; keep offsets honest.
		panic(fmt.Sprintf("shadow append at %d, LEO %d", o, l.leo()))
	}
	l.recs = append(l.recs, shadowRec{epoch: e, value: v})
}

// startBatch notes that a batch starts at o (the next append).
func (l *shadowLog) startBatch(o int64) { l.bases = append(l.bases, o) }

// truncate removes every batch with a record at or above o, as
// storage.Log.TruncateTo does: the log may end below o.
func (l *shadowLog) truncate(o int64) {
	if o < l.start {
		l.restart(o)
		return
	}
	if o >= l.leo() {
		return
	}
	// The batch holding o starts at the last base ≤ o.
	i, found := slices.BinarySearch(l.bases, o)
	if !found && i > 0 {
		i--
		o = max(l.bases[i], l.start)
	}
	l.bases = l.bases[:i]
	l.recs = l.recs[:o-l.start]
	l.gen++
}

func (l *shadowLog) restart(o int64) { l.start, l.recs, l.bases = o, nil, nil; l.gen++ }

// readShadow reads a whole log from storage.
func (s *Sim) readShadow(l *storage.Log) shadowLog {
	sh := shadowLog{start: int64(l.LogStartOffset())}
	sh.recs = make([]shadowRec, 0, max(0, int64(l.LogEndOffset())-sh.start))
	from := l.LogStartOffset()
	for from < l.LogEndOffset() {
		rr, err := l.Read(from, 1<<20, l.LogEndOffset())
		if err != nil {
			s.fail("storage read", "read %s from %d: %v", l.Dir(), from, err)
			return sh
		}
		if len(rr.Batches) == 0 {
			break
		}
		for bv, err := range storage.Batches(rr.Batches) {
			if err != nil {
				s.fail("storage read", "%s: %v", l.Dir(), err)
				return sh
			}
			recs, err := bv.Records()
			if err != nil {
				s.fail("storage read", "%s: %v", l.Dir(), err)
				return sh
			}
			if bv.NextOffset() > twinlog.Offset(sh.leo()) {
				sh.startBatch(int64(bv.BaseOffset()))
			}
			for _, r := range recs {
				if int64(r.Offset) < sh.leo() {
					continue
				}
				if int64(r.Offset) != sh.leo() {
					s.fail("storage read", "%s: gap at %d (record %d)", l.Dir(), sh.leo(), r.Offset)
					return sh
				}
				sh.recs = append(sh.recs, shadowRec{epoch: int32(bv.LeaderEpoch()), value: string(r.Value)})
			}
			from = bv.NextOffset()
		}
	}
	return sh
}

// produceReq is one produce request as the leader holds it.
type produceReq struct {
	batches storage.Validated // validated as the broker's produce path does
	values  []string
	le      int32
	reply   func(code pb.ErrorCode, base int64, le int32)
}

// producer writes unique values to random partitions with acks=all or 1.
type producer struct {
	s        *Sim
	id       int
	n        int
	inflight int
	// idemSt is the idempotent producer's state (Config.Idempotent,
	// idempotent.go); nil otherwise.
	idemSt *idemState
}

func (pr *producer) node() nodeID { return clientBase + nodeID(pr.id) }

func (pr *producer) produce() {
	s := pr.s
	if s.cfg.Idempotent {
		pr.produceIdempotent()
		return
	}
	if pr.inflight >= 3 {
		return
	}
	tp := s.topics[s.rng.IntN(len(s.topics))]
	leader, le := s.leaderFor(tp)
	if leader < 1 {
		return
	}
	acks, values, recs := pr.nextRecords()
	buf, err := storage.EncodeBatch(recs, storage.BatchOptions{})
	if err != nil {
		s.fail("encode", "%v", err)
		return
	}
	pr.inflight++
	b := s.brokers[leader-1]
	s.tracef("producer %d -> broker %d %s acks %d values %v (LE %d)", pr.id, leader, tp, acks, values, le)
	done := false
	free := func() {
		if !done {
			done = true
			pr.inflight--
		}
	}
	s.net.send(pr.node(), b.node(), "produce", func() {
		b.handleProduce(tp, acks, buf, values, s.cfg.ProduceTimeoutMs, func(code pb.ErrorCode, base int64, le int32) {
			s.net.send(b.node(), pr.node(), "produce-resp", func() {
				free()
				pr.result(tp, acks, values, code, base, le)
			})
		})
	})
	// A lost request or answer frees the slot after the request timeout.
	s.after(s.cfg.ProduceTimeoutMs*2, free)
}

// nextRecords draws the acks and the 1-3 records of the producer's next
// batch, whose values are unique ("p<id>-<n>").
func (pr *producer) nextRecords() (replica.Acks, []string, []storage.Record) {
	s := pr.s
	acks := replica.AcksAll
	if s.chance(0.3) {
		acks = replica.AcksLeader
	}
	n := 1 + s.rng.IntN(3)
	values := make([]string, n)
	recs := make([]storage.Record, n)
	for i := range values {
		pr.n++
		values[i] = fmt.Sprintf("p%d-%d", pr.id, pr.n)
		recs[i] = storage.Record{Timestamp: s.clock().UnixMilli(), Value: []byte(values[i])}
	}
	return acks, values, recs
}

func (pr *producer) result(tp twinlog.TopicPartition, acks replica.Acks, values []string, code pb.ErrorCode, base int64, le int32) {
	s := pr.s
	s.tracef("producer %d %s %v: %s base %d LE %d", pr.id, tp, values, shortCode(code), base, le)
	if code != pb.ErrorCode_ERROR_CODE_NONE {
		s.report.ProduceErrors++
		return
	}
	m := s.minISRNow(tp.Topic)
	for i, v := range values {
		s.hist.RecordAck(tp.String(), base+int64(i), v, le, acks == replica.AcksAll || s.cfg.mutation == "acks1-as-all", m)
	}
	if acks == replica.AcksAll {
		s.report.AckedAll += len(values)
	} else {
		s.report.AckedOne += len(values)
	}
}

// handleProduce is the leader's produce path (SPEC §4.1). It reports
// whether the batch was proposed: then reply gets the outcome from the
// replica's Ready (possibly before handleProduce returns); otherwise it
// was refused (reply has the code) or not handled (no answer at all).
func (b *simBroker) handleProduce(tp twinlog.TopicPartition, acks replica.Acks, buf []byte, values []string, timeoutMs int64, reply func(pb.ErrorCode, int64, int32)) bool {
	s := b.s
	if !b.up || !b.registered {
		return false
	}
	p := b.parts[tp]
	if p == nil {
		reply(pb.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, -1, -1)
		return false
	}
	p.nextID++
	id := p.nextID
	// The broker's checks (serve.ValidateProduce with Kafka's default
	// timestamp bounds) and proposal (serve.Propose); the simulated
	// producer sends only valid batches.
	batches, n, code := serve.ValidateProduce(append([]byte(nil), buf...), s.clock().UnixMilli(),
		serve.ProduceLimits{MaxBatchBytes: storage.DefaultMaxBatchBytes, TimestampAfterMax: time.Hour})
	if code != pb.ErrorCode_ERROR_CODE_NONE || n != len(values) {
		s.fail("produce", "broker %d %s: the producer's batch of %d records: %s (%d offsets)", b.id, p.key, len(values), shortCode(code), n)
		return false
	}
	leo := p.r.LogEndOffset()
	var out pb.ProducePartitionResponse
	d, duplicate := serve.Propose(p.r, p.log, batches, replica.Proposal{ID: id, Acks: acks, TimeoutMs: timeoutMs, NumRecords: n}, s.now, &out)
	if s.w != nil {
		s.w.checkProduce(p, d, leo)
	}
	if out.GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		reply(out.GetError(), -1, -1)
		p.processReady()
		return false
	}
	req := &produceReq{batches: batches, values: values, le: int32(d.LeaderEpoch), reply: reply}
	if duplicate {
		// An idempotent producer's retry of a batch the log holds: no
		// batch to append, the answer is the original's.
		s.report.Idempotent.Duplicates++
		bv := batches.Batches()[0]
		s.dupSeqs[[2]int64{bv.ProducerID(), int64(bv.BaseSequence())}] = true
		s.tracef("broker %d %s: duplicate of [%d, %d]", b.id, p.key, d.BaseOffset, d.LastOffset)
	} else {
		p.proposals[id] = req
		if s.w != nil && s.cfg.Idempotent {
			for _, v := range values {
				s.w.noteAppended(v, int32(d.LeaderEpoch), s.clusterID)
			}
		}
	}
	p.results[id] = req
	p.processReady()
	return true
}

// consumer reads one partition from its leader below the HW.
type consumer struct {
	s        *Sim
	id       int
	name     string
	tp       twinlog.TopicPartition
	pos      int64
	le       int32
	inflight bool
	sentAt   int64
}

func (c *consumer) node() nodeID { return clientBase + 500 + nodeID(c.id) }

func (c *consumer) poll() {
	s := c.s
	if c.inflight && s.now-c.sentAt < 1000 {
		return
	}
	leader, le := s.leaderFor(c.tp)
	if leader < 1 {
		return
	}
	if c.le < le {
		c.le = le
	}
	c.inflight, c.sentAt = true, s.now
	b := s.brokers[leader-1]
	req := &pb.FetchRequest{ReplicaId: -1, ReplicaBrokerEpoch: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER,
		Partitions: []*pb.FetchPartition{{Topic: c.tp.Topic, Partition: c.tp.Partition, FetchOffset: c.pos, CurrentLeaderEpoch: c.le, LastFetchedEpoch: -1}}}
	pos := c.pos
	s.net.send(c.node(), b.node(), "consume", func() {
		pr := b.serveFetch(req, 1+s.rng.IntN(1800)).GetPartitions()[0]
		s.net.send(b.node(), c.node(), "consume-resp", func() {
			c.inflight = false
			if c.pos != pos {
				return
			}
			c.handle(pr)
		})
	})
}

func (c *consumer) handle(pr *pb.FetchPartitionResponse) {
	s := c.s
	key := c.tp.String()
	hw := twinlog.Offset(pr.GetHighWatermark())
	switch pr.GetError() {
	case pb.ErrorCode_ERROR_CODE_NONE:
	case pb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:
		// auto.offset.reset=earliest-known: restart from the leader's HW
		// (the offset we held is gone: an unclean election cut it).
		s.tracef("consumer %s %s: out of range at %d (HW %d, logStart %d)", c.name, key, c.pos, hw, pr.GetLogStartOffset())
		c.pos = max(pr.GetLogStartOffset(), 0)
		s.hist.RecordReset(c.name, key)
		return
	case pb.ErrorCode_ERROR_CODE_LOG_TRUNCATED:
		c.pos = 0
		s.hist.RecordReset(c.name, key)
		return
	default:
		return
	}
	for bv, err := range storage.Batches(pr.GetRecords()) {
		if err != nil {
			s.fail("consumer batch", "%s: %v", key, err)
			return
		}
		rs, err := bv.Records()
		if err != nil {
			s.fail("consumer batch", "%s: %v", key, err)
			return
		}
		for _, r := range rs {
			if int64(r.Offset) < c.pos {
				continue
			}
			if r.Offset >= hw {
				s.fail("§8.13 read at or above HW", "consumer %s got offset %d with HW %d", c.name, r.Offset, hw)
				return
			}
			s.hist.RecordRead(c.name, key, int64(r.Offset), string(r.Value), pr.GetLeaderEpoch())
			s.report.Consumed++
			c.pos = int64(r.Offset) + 1
		}
	}
}
