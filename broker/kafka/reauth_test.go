package kafka

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	saslscram "github.com/twmb/franz-go/pkg/sasl/scram"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/scram"
)

// testClock is a clock the test moves (SASL.Now).
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestSASLReauthentication (KIP-368): with a session lifetime, each
// SaslAuthenticate v1+ success answers it; the client re-authenticates on
// the same connection (also after the end, by a handshake) and keeps
// being served as the same user; a request after the end closes the
// connection ("expired"), as does a re-authentication that fails, changes
// user or mechanism, or is interleaved with another request; a second one
// within a second is refused as on any authenticated connection.
func TestSASLReauthentication(t *testing.T) {
	const life = time.Minute
	clock := &testClock{now: time.Unix(1_700_000_000, 0)}
	cfg := *allMechanisms
	cfg.MaxSessionLifetime, cfg.Now = life, clock.Now
	e := startSASL(t, saslOpts{sasl: &cfg, grants: []grant{topicGrant(acl.Describe, "ok")}})
	e.adm.scram.addUser(t, "alice", "secret")
	e.adm.scram.addUser(t, "bob", "secret")
	alice512 := saslscram.Auth{User: "alice", Pass: "secret"}.AsSha512Mechanism()
	// served counts the Metadata requests this test expects to reach the
	// backend: only those metadataOK sends on an authenticated session.
	served := 0
	metadataOK := func(c *client) bool {
		served++
		return metadataOK(c)
	}

	// loggedIn is a connection alice authenticated at SaslAuthenticate v2,
	// told the lifetime.
	loggedIn := func(name string, mech sasl.Mechanism) *client {
		t.Helper()
		c := e.dial(t)
		r := exchange(c, 2, mech)
		if r.ErrorCode != 0 || r.SessionLifetimeMillis != life.Milliseconds() {
			t.Fatalf("%s: login %v, lifetime %d ms, want %d", name, kerr.ErrorForCode(r.ErrorCode), r.SessionLifetimeMillis, life.Milliseconds())
		}
		if !metadataOK(c) {
			t.Fatalf("%s: metadata refused after login", name)
		}
		return c
	}
	closedAfter := map[string]int{}
	wantClosed := func(name string, c *client, reason string) {
		t.Helper()
		if !c.closed() {
			t.Fatalf("%s: connection still open", name)
		}
		closedAfter[reason]++
		if n := e.closedFor(reason, closedAfter[reason]); n != closedAfter[reason] {
			t.Errorf("%s: %d connections closed for %s, want %d", name, n, reason, closedAfter[reason])
		}
	}

	for _, mech := range []sasl.Mechanism{alice512, plain.Auth{User: "alice", Pass: "secret"}.AsMechanism()} {
		name := mech.Name()
		c := loggedIn(name, mech)
		// Before the end, and (a minute later) after it: each time the
		// session is renewed and the connection served as alice.
		for _, wait := range []time.Duration{life / 2, life + time.Second} {
			clock.advance(wait)
			r := exchange(c, 2, mech)
			if r.ErrorCode != 0 || r.SessionLifetimeMillis != life.Milliseconds() {
				t.Fatalf("%s: re-authentication after %v: %v %s, lifetime %d", name, wait, kerr.ErrorForCode(r.ErrorCode), orNull(r.ErrorMessage), r.SessionLifetimeMillis)
			}
			if !metadataOK(c) {
				t.Fatalf("%s: metadata refused after re-authenticating", name)
			}
		}
		if got := e.fa.takeSeen(); !reflect.DeepEqual(got, []string{alice}) {
			t.Errorf("%s: authorized as %v, want %s only", name, got, alice)
		}
		// At most one re-authentication a second: the next is refused
		// without ending the connection.
		if r := handshake(c, name); r.ErrorCode != illegalSASLState {
			t.Errorf("%s: a second re-authentication within a second: %v", name, kerr.ErrorForCode(r.ErrorCode))
		}
		if !metadataOK(c) {
			t.Fatalf("%s: metadata refused after the refused handshake", name)
		}
		e.fa.takeSeen()
		// The session ends: the next request closes the connection.
		clock.advance(life)
		c.send(metadataReq(12, "ok"))
		wantClosed(name+" expired", c, "expired")
	}

	// SaslAuthenticate v0 cannot carry the lifetime: that client is
	// closed at the end all the same (as in Kafka).
	c := e.dial(t)
	if r := exchange(c, 0, alice512); r.ErrorCode != 0 {
		t.Fatalf("v0 login: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if !metadataOK(c) {
		t.Fatal("v0: metadata refused")
	}
	clock.advance(life)
	c.send(metadataReq(12, "ok"))
	wantClosed("v0 expired", c, "expired")

	// Failed re-authentications: each answered SASL_AUTHENTICATION_FAILED
	// (or, for a disabled mechanism, UNSUPPORTED_SASL_MECHANISM) and closed.
	type failure struct {
		name    string
		mech    sasl.Mechanism
		code    int16
		message string
		before  func()
	}
	for _, f := range []failure{
		{name: "another user", mech: saslscram.Auth{User: "bob", Pass: "secret"}.AsSha512Mechanism(), code: saslAuthenticationFailed,
			message: "Cannot change principals during re-authentication from User:alice: User:bob"},
		{name: "another mechanism", mech: saslscram.Auth{User: "alice", Pass: "secret"}.AsSha256Mechanism(), code: saslAuthenticationFailed,
			message: "SASL mechanism SCRAM-SHA-256 cannot re-authenticate a session of SCRAM-SHA-512"},
		{name: "changed password", mech: alice512, code: saslAuthenticationFailed, message: "authentication failed",
			before: func() { e.adm.scram.addUser(t, "alice", "changed") }},
		{name: "deleted user", mech: alice512, code: saslAuthenticationFailed, message: "authentication failed",
			before: func() { e.adm.scram.remove("alice", scram.SHA512) }},
	} {
		e.adm.scram.addUser(t, "alice", "secret")
		c := loggedIn(f.name, alice512)
		clock.advance(life / 2)
		if f.before != nil {
			f.before()
		}
		r := exchange(c, 2, f.mech)
		if r.ErrorCode != f.code || orNull(r.ErrorMessage) != f.message {
			t.Errorf("%s: %v %q, want %v %q", f.name, kerr.ErrorForCode(r.ErrorCode), orNull(r.ErrorMessage), kerr.ErrorForCode(f.code), f.message)
		}
		wantClosed(f.name, c, "authentication")
	}
	e.adm.scram.addUser(t, "alice", "secret")

	// A mechanism this connection is not offered.
	c = loggedIn("unsupported mechanism", alice512)
	clock.advance(life / 2)
	if r := handshake(c, "GSSAPI"); r.ErrorCode != unsupportedSASLMechanism {
		t.Errorf("unsupported mechanism: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	wantClosed("unsupported mechanism", c, "authentication")

	// Another request between the handshake and the exchange.
	c = loggedIn("interleaved", alice512)
	clock.advance(life / 2)
	if r := handshake(c, alice512.Name()); r.ErrorCode != 0 {
		t.Fatalf("interleaved: handshake %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.send(metadataReq(12, "ok"))
	wantClosed("interleaved", c, "authentication")

	// None of the requests that closed a connection reached the backend.
	calls := e.b.take()
	if len(calls) != served {
		t.Errorf("the backend got %d calls, want the %d Metadata requests served", len(calls), served)
	}
	for _, call := range calls {
		if _, ok := call.(*pb.MetadataRequest); !ok {
			t.Errorf("backend call %T", call)
		}
	}
}

// TestSASLReauthenticationWithFranzGo: franz-go reads the session lifetime
// and re-authenticates before it ends (KIP-368); its requests keep being
// served, as alice, on the same connection, and none is closed.
func TestSASLReauthenticationWithFranzGo(t *testing.T) {
	// franz-go re-authenticates a second (its least margin) before the
	// end, and a re-authentication may begin once a second: 2.5 s gives
	// one every 1.5 s.
	cfg := *allMechanisms
	cfg.MaxSessionLifetime = 2500 * time.Millisecond
	e := startSASL(t, saslOpts{sasl: &cfg, grants: []grant{topicGrant(acl.Describe, "ok")}})
	e.adm.scram.addUser(t, "alice", "secret")
	cl := e.kgo(t, saslscram.Auth{User: "alice", Pass: "secret"}.AsSha512Mechanism())

	// reauthentications is the SaslHandshakes beyond one per connection:
	// the test fails below if any connection closed, so each open one
	// logged in once.
	reauthentications := func() int {
		e.obs.mu.Lock()
		defer e.obs.mu.Unlock()
		return e.obs.requests[kmsg.NameForKey(saslHandshakeKey)] - e.obs.conns
	}
	served := 0
	tick := time.NewTicker(20 * time.Millisecond) // a steady client, not a spin
	defer tick.Stop()
	for deadline := time.Now().Add(30 * time.Second); reauthentications() < 2; <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("%d re-authentications in 30 s (%d requests served), want 2", reauthentications(), served)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		resp, err := metadataReq(12, "ok").RequestWith(ctx, cl)
		cancel()
		if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("request %d: %v %+v", served, err, resp)
		}
		served++
	}
	if got := e.fa.takeSeen(); !reflect.DeepEqual(got, []string{alice}) {
		t.Errorf("authorized as %v, want %s only", got, alice)
	}
	e.obs.mu.Lock()
	defer e.obs.mu.Unlock()
	if len(e.obs.closed) != 0 {
		t.Errorf("connections closed: %v", e.obs.closed)
	}
}
