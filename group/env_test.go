package group

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// env drives a Coordinator as a host does: it takes Ready after every
// call, appends (acknowledging at once unless hold is set) and collects
// the responses by Ref.
type env struct {
	t    *testing.T
	c    *Coordinator
	now  int64
	next Ref
	// hold keeps appends pending until ack or fail.
	hold    bool
	pending []Append
	// log is every durable record, in order.
	log  []Record
	resp map[Ref]ResponseBody
	// tickAt is the last TickAtMs.
	tickAt int64
}

func testConfig() Config {
	return Config{InitialRebalanceDelayMs: NoInitialRebalanceDelay}
}

func newRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	c, err := New(cfg, Deps{Rand: newRand()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: c, resp: map[Ref]ResponseBody{}}
	if err := c.Load(0, nil); err != nil {
		t.Fatal(err)
	}
	e.drain()
	return e
}

func (e *env) drain() {
	for {
		rd := e.c.Ready()
		e.tickAt = rd.TickAtMs
		for _, r := range rd.Responses {
			if _, dup := e.resp[r.Ref]; dup {
				e.t.Fatalf("ref %d answered twice: %#v", r.Ref, r.Body)
			}
			e.resp[r.Ref] = r.Body
		}
		if len(rd.Appends) == 0 {
			return
		}
		e.pending = append(e.pending, rd.Appends...)
		if e.hold {
			return
		}
		e.ackAll()
	}
}

// ack makes the oldest pending append durable.
func (e *env) ack() {
	a := e.pending[0]
	e.pending = e.pending[1:]
	e.log = append(e.log, a.Records...)
	e.c.Appended(e.now, a.ID)
	e.drain()
}

func (e *env) ackAll() {
	for len(e.pending) > 0 {
		e.ack()
	}
}

// fail fails the oldest pending append.
func (e *env) fail(code ErrorCode) {
	a := e.pending[0]
	e.pending = e.pending[1:]
	e.c.AppendFailed(e.now, a.ID, code)
	e.drain()
}

func (e *env) ref() Ref { e.next++; return e.next }

func (e *env) advance(ms int64) {
	e.now += ms
	e.c.Tick(e.now)
	e.drain()
}

func (e *env) join(req JoinGroupRequest) Ref {
	r := e.ref()
	e.c.JoinGroup(e.now, r, req)
	e.drain()
	return r
}

func (e *env) sync(req SyncGroupRequest) Ref {
	r := e.ref()
	e.c.SyncGroup(e.now, r, req)
	e.drain()
	return r
}

func (e *env) heartbeat(g, m string, gen int32) ErrorCode {
	r := e.ref()
	e.c.Heartbeat(e.now, r, HeartbeatRequest{GroupID: g, MemberID: m, GenerationID: gen})
	e.drain()
	return e.resp[r].(*HeartbeatResponse).ErrorCode
}

func (e *env) leave(g string, ms ...LeaveMember) *LeaveGroupResponse {
	r := e.ref()
	e.c.LeaveGroup(e.now, r, LeaveGroupRequest{GroupID: g, Members: ms})
	e.drain()
	return e.mustResp(r).(*LeaveGroupResponse)
}

func (e *env) commit(req OffsetCommitRequest) Ref {
	r := e.ref()
	e.c.OffsetCommit(e.now, r, req)
	e.drain()
	return r
}

func (e *env) joinResp(r Ref) *JoinGroupResponse {
	b, ok := e.resp[r]
	if !ok {
		return nil
	}
	return b.(*JoinGroupResponse)
}

func (e *env) syncResp(r Ref) *SyncGroupResponse {
	b, ok := e.resp[r]
	if !ok {
		return nil
	}
	return b.(*SyncGroupResponse)
}

func (e *env) mustResp(r Ref) ResponseBody {
	e.t.Helper()
	b, ok := e.resp[r]
	if !ok {
		e.t.Fatalf("ref %d not answered", r)
	}
	return b
}

func (e *env) mustJoin(r Ref, code ErrorCode) *JoinGroupResponse {
	e.t.Helper()
	j := e.joinResp(r)
	if j == nil {
		e.t.Fatalf("join %d not answered", r)
	}
	if j.ErrorCode != code {
		e.t.Fatalf("join %d: %v, want %v (%+v)", r, j.ErrorCode, code, j)
	}
	return j
}

func (e *env) mustSync(r Ref, code ErrorCode) *SyncGroupResponse {
	e.t.Helper()
	s := e.syncResp(r)
	if s == nil {
		e.t.Fatalf("sync %d not answered", r)
	}
	if s.ErrorCode != code {
		e.t.Fatalf("sync %d: %v, want %v", r, s.ErrorCode, code)
	}
	return s
}

func (e *env) group(id string) GroupInfo {
	e.t.Helper()
	g, err := e.c.Group(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return g
}

func (e *env) state(id string) State { e.t.Helper(); return e.group(id).State }

func ptr[T any](v T) *T { return &v }

// consumerMeta is a ConsumerProtocolSubscription v0 for topics.
func consumerMeta(topics ...string) []byte {
	b := []byte{0, 0}
	b = append(b, byte(len(topics)>>24), byte(len(topics)>>16), byte(len(topics)>>8), byte(len(topics)))
	for _, t := range topics {
		b = append(b, byte(len(t)>>8), byte(len(t)))
		b = append(b, t...)
	}
	return append(b, 0xff, 0xff, 0xff, 0xff) // null user data
}

// jreq is a consumer's JoinGroup (v9) with the range protocol.
func jreq(g, member string) JoinGroupRequest {
	return JoinGroupRequest{
		Version: 9, GroupID: g, MemberID: member, SessionTimeoutMs: 10_000, RebalanceTimeoutMs: 30_000,
		ProtocolType: "consumer", Protocols: []Protocol{{Name: "range", Metadata: consumerMeta("t")}},
		ClientID: "client", ClientHost: "/10.0.0.1",
	}
}

// newMember joins a dynamic member (both KIP-394 rounds) and returns its id
// and the ref of its parked second join.
func (e *env) newMember(req JoinGroupRequest) (string, Ref) {
	e.t.Helper()
	j := e.mustJoin(e.join(req), MemberIDRequired)
	req.MemberID = j.MemberID
	return j.MemberID, e.join(req)
}

// stableGroup brings n dynamic members of g to Stable in one generation,
// the leader assigning each member its id as bytes; it returns the member
// ids sorted.
func (e *env) stableGroup(g string, n int) []string {
	e.t.Helper()
	var ids []string
	var refs []Ref
	for range n {
		id, r := e.newMember(jreq(g, ""))
		ids, refs = append(ids, id), append(refs, r)
	}
	e.advance(0) // the initial delay (none in testConfig)
	var leader string
	var gen int32
	for i, r := range refs {
		j := e.mustJoin(r, None)
		if j.MemberID != ids[i] {
			e.t.Fatalf("join answered member %s, want %s", j.MemberID, ids[i])
		}
		leader, gen = j.Leader, j.GenerationID
	}
	var as []SyncAssignment
	for _, id := range ids {
		as = append(as, SyncAssignment{MemberID: id, Assignment: []byte(id)})
	}
	srefs := map[string]Ref{}
	for _, id := range ids {
		req := SyncGroupRequest{GroupID: g, GenerationID: gen, MemberID: id}
		if id == leader {
			req.Assignments = as
		}
		srefs[id] = e.sync(req)
	}
	for id, r := range srefs {
		if s := e.mustSync(r, None); string(s.Assignment) != id {
			e.t.Fatalf("member %s assigned %q", id, s.Assignment)
		}
	}
	if st := e.state(g); st != Stable {
		e.t.Fatalf("group %s %v after sync", g, st)
	}
	slices.Sort(ids)
	return ids
}
