package kafka

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"log/slog"
	"maps"
	"math/big"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	saslscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/scram"
)

// credStore holds SCRAM credentials by user and mechanism: the fake
// Admin's, which its SCRAM methods alter and describe, and the listener's
// Lookup in these tests, so that a user created through the Kafka API can
// then log in.
type credStore struct {
	mu    sync.Mutex
	creds map[string]map[scram.Mechanism]scram.Credential
}

func (s *credStore) lookup(user string, m scram.Mechanism) (scram.Credential, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.creds[user][m]
	return c, ok
}

func (s *credStore) put(user string, c scram.Credential) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.creds == nil {
		s.creds = map[string]map[scram.Mechanism]scram.Credential{}
	}
	if s.creds[user] == nil {
		s.creds[user] = map[scram.Mechanism]scram.Credential{}
	}
	s.creds[user][c.Mechanism] = c
}

func (s *credStore) remove(user string, m scram.Mechanism) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.creds[user][m]; !ok {
		return false
	}
	delete(s.creds[user], m)
	if len(s.creds[user]) == 0 {
		delete(s.creds, user)
	}
	return true
}

func (s *credStore) users() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.creds))
}

// addUser gives user both SCRAM credentials for password.
func (s *credStore) addUser(t *testing.T, user, password string) {
	t.Helper()
	for _, m := range []scram.Mechanism{scram.SHA256, scram.SHA512} {
		c, err := scram.NewCredential(m, password, []byte("salt of "+user), scram.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		s.put(user, c)
	}
}

// AlterUserScramCredentials alters the fake's store, as the controller
// would (not all or nothing per user: a fake).
func (a *fakeAdmin) AlterUserScramCredentials(_ context.Context, req *pb.AlterUserScramCredentialsRequest) (*pb.AlterUserScramCredentialsResponse, error) {
	a.record(req)
	a.mu.Lock()
	err := a.err
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	resp := &pb.AlterUserScramCredentialsResponse{}
	result := func(user string) *pb.AlterUserScramCredentialsResult {
		for _, r := range resp.Results {
			if r.User == user {
				return r
			}
		}
		r := &pb.AlterUserScramCredentialsResult{User: user}
		resp.Results = append(resp.Results, r)
		return r
	}
	for _, d := range req.GetDeletions() {
		r := result(d.GetName())
		m, ok := scram.MechanismFromKafka(int8(d.GetMechanism()))
		switch {
		case !ok:
			r.Error = pb.ErrorCode_ERROR_CODE_INVALID_REQUEST
		case !a.scram.remove(d.GetName(), m):
			r.Error, r.ErrorMessage = pb.ErrorCode_ERROR_CODE_RESOURCE_NOT_FOUND, "no such credential"
		}
	}
	for _, u := range req.GetUpsertions() {
		r := result(u.GetName())
		m, ok := scram.MechanismFromKafka(int8(u.GetMechanism()))
		if !ok {
			r.Error = pb.ErrorCode_ERROR_CODE_INVALID_REQUEST
			continue
		}
		c, err := scram.FromSaltedPassword(m, u.GetSaltedPassword(), u.GetSalt(), int(u.GetIterations()))
		if err != nil {
			r.Error, r.ErrorMessage = pb.ErrorCode_ERROR_CODE_UNACCEPTABLE_CREDENTIAL, err.Error()
			continue
		}
		a.scram.put(u.GetName(), c)
	}
	return resp, nil
}

// DescribeUserScramCredentials describes the fake's store.
func (a *fakeAdmin) DescribeUserScramCredentials(_ context.Context, req *pb.DescribeUserScramCredentialsRequest) (*pb.DescribeUserScramCredentialsResponse, error) {
	a.record(req)
	a.mu.Lock()
	err := a.err
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	users := req.GetUsers()
	if len(users) == 0 {
		users = a.scram.users()
	}
	resp := &pb.DescribeUserScramCredentialsResponse{}
	for _, u := range users {
		r := &pb.DescribeUserScramCredentialsResult{User: u}
		for _, m := range []scram.Mechanism{scram.SHA256, scram.SHA512} {
			if c, ok := a.scram.lookup(u, m); ok {
				r.Credentials = append(r.Credentials, &pb.ScramCredentialInfo{Mechanism: pb.ScramMechanism(m.KafkaCode()), Iterations: c.Iterations})
			}
		}
		if len(r.Credentials) == 0 {
			r.Error, r.ErrorMessage = pb.ErrorCode_ERROR_CODE_RESOURCE_NOT_FOUND, "no credential"
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// seenAuthorizer is a fakeAuthorizer that also records the principals
// Allowed is asked about.
type seenAuthorizer struct {
	*fakeAuthorizer
	mu   sync.Mutex
	seen map[string]bool
}

func (a *seenAuthorizer) Allowed(principal, host string, op acl.Operation, rt acl.ResourceType, name string) bool {
	a.mu.Lock()
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	a.seen[principal] = true
	a.mu.Unlock()
	return a.fakeAuthorizer.Allowed(principal, host, op, rt, name)
}

// takeSeen returns the principals seen since the last call, sorted.
func (a *seenAuthorizer) takeSeen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := slices.Sorted(maps.Keys(a.seen))
	a.seen = nil
	return s
}

// certPrincipal is what the fake Authorizer says a connection's TLS
// certificate names when a test wants one (saslOpts.cert); without a
// certificate a connection is User:ANONYMOUS until SASL names it.
const certPrincipal = "User:cert"

// saslEnv is a server with SASL (or not), a recBackend, a fakeAdmin whose
// credential store is the Lookup, and an authorizer whose principal is
// certPrincipal.
type saslEnv struct {
	addr string
	fa   *seenAuthorizer
	b    *recBackend
	adm  *fakeAdmin
	obs  *countingObserver
	// tls is the clients' TLS config for a TLS listener, nil for plaintext.
	tls *tls.Config
}

type saslOpts struct {
	sasl   *SASL // nil: no SASL; a nil Lookup is the fake Admin's store
	tls    bool
	idle   time.Duration
	grants []grant
	// cert: the connection presents a client certificate (certPrincipal),
	// which authenticates it without SASL.
	cert bool
}

func startSASL(t *testing.T, o saslOpts) *saslEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().(*net.TCPAddr)
	e := &saslEnv{
		addr: ln.Addr().String(),
		fa:   &seenAuthorizer{fakeAuthorizer: newFakeAuthorizer(o.grants...)},
		b:    &recBackend{host: a.IP.String(), port: int32(a.Port), topics: testTopics()},
		adm:  &fakeAdmin{},
		obs:  &countingObserver{requests: map[string]int{}, closed: map[string]int{}},
	}
	e.fa.principal = anonymousPrincipal
	if o.sasl == nil || o.cert {
		e.fa.principal = certPrincipal
	}
	cfg := Config{BrokerID: 1, Logger: slog.New(slog.DiscardHandler), Observer: e.obs, Authorizer: e.fa, IdleTimeout: o.idle}
	if o.sasl != nil {
		sc := *o.sasl
		if sc.Lookup == nil {
			sc.Lookup = e.adm.scram.lookup
		}
		cfg.SASL = &sc
	}
	var l net.Listener = ln
	if o.tls {
		var srv *tls.Config
		srv, e.tls = testTLS(t)
		l = tls.NewListener(ln, srv)
	}
	s := NewServer(cfg, e.b, e.adm)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

// testTLS returns a server config with a self-signed certificate for
// 127.0.0.1 and a client config that trusts it.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}

// dial connects a raw client, over TLS for a TLS listener.
func (e *saslEnv) dial(t *testing.T) *client {
	t.Helper()
	if e.tls == nil {
		return dial(t, e.addr)
	}
	c, err := tls.Dial("tcp", e.addr, e.tls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

// kgo returns a franz-go client for the env logging in with mech (nil: no
// SASL).
func (e *saslEnv) kgo(t *testing.T, mech sasl.Mechanism) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(e.addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second)}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	if e.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(e.tls.Clone()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// closedFor returns how many connections were closed for reason, waiting
// up to a few seconds for want.
func (e *saslEnv) closedFor(reason string, want int) int {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		e.obs.mu.Lock()
		n := e.obs.closed[reason]
		e.obs.mu.Unlock()
		if n >= want || time.Now().After(deadline) {
			return n
		}
	}
}

func handshake(c *client, mech string) *kmsg.SASLHandshakeResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(1)
	req.Mechanism = mech
	return c.roundTrip(req).(*kmsg.SASLHandshakeResponse)
}

func authenticate(c *client, v int16, msg []byte) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(v)
	req.SASLAuthBytes = msg
	return c.roundTrip(req).(*kmsg.SASLAuthenticateResponse)
}

// login authenticates c with mech's client (franz-go's) through raw
// requests at SaslAuthenticate version v, failing the test on an error or
// a session lifetime (the listeners here have none).
func login(c *client, v int16, mech sasl.Mechanism) {
	c.t.Helper()
	r := exchange(c, v, mech)
	if r.ErrorCode != 0 {
		c.t.Fatalf("SaslAuthenticate v%d: %v: %s", v, kerr.ErrorForCode(r.ErrorCode), orNull(r.ErrorMessage))
	}
	if r.SessionLifetimeMillis != 0 {
		c.t.Errorf("session lifetime %d, want 0", r.SessionLifetimeMillis)
	}
}

// exchange runs mech's client (franz-go's) through a SaslHandshake, which
// must succeed, and SaslAuthenticate requests at version v until the
// exchange completes or is refused; it returns the last answer.
func exchange(c *client, v int16, mech sasl.Mechanism) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	if r := handshake(c, mech.Name()); r.ErrorCode != 0 {
		c.t.Fatalf("SaslHandshake %s: %v", mech.Name(), kerr.ErrorForCode(r.ErrorCode))
	}
	session, msg, err := mech.Authenticate(context.Background(), "")
	if err != nil {
		c.t.Fatal(err)
	}
	for {
		r := authenticate(c, v, msg)
		if r.ErrorCode != 0 {
			return r
		}
		var done bool
		if done, msg, err = session.Challenge(r.SASLAuthBytes); err != nil {
			c.t.Fatalf("client: %v", err)
		}
		if done {
			return r
		}
	}
}

var allMechanisms = &SASL{Mechanisms: []string{MechanismSCRAMSHA512, MechanismSCRAMSHA256, MechanismPlain}, PlainWithoutTLS: true}

// metadataOK asks for topic "ok" on c and reports whether it was served.
func metadataOK(c *client) bool {
	c.t.Helper()
	resp := c.roundTrip(metadataReq(12, "ok")).(*kmsg.MetadataResponse)
	return len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0
}

// TestSASLWithFranzGo: franz-go's client logs in with each mechanism and
// the right password, and its requests are authorized as User:<name>,
// whatever the certificate said; PLAIN over TLS needs no PlainWithoutTLS.
func TestSASLWithFranzGo(t *testing.T) {
	mechs := map[string]sasl.Mechanism{
		MechanismSCRAMSHA256: saslscram.Auth{User: "alice", Pass: "secret"}.AsSha256Mechanism(),
		MechanismSCRAMSHA512: saslscram.Auth{User: "alice", Pass: "secret"}.AsSha512Mechanism(),
		MechanismPlain:       plain.Auth{User: "alice", Pass: "secret"}.AsMechanism(),
	}
	for _, tlsOn := range []bool{false, true} {
		cfg := allMechanisms
		if tlsOn {
			cfg = &SASL{Mechanisms: allMechanisms.Mechanisms}
		}
		e := startSASL(t, saslOpts{sasl: cfg, tls: tlsOn, grants: []grant{topicGrant(acl.Describe, "ok")}})
		e.adm.scram.addUser(t, "alice", "secret")
		for name, mech := range mechs {
			cl := e.kgo(t, mech)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			resp, err := metadataReq(12, "ok").RequestWith(ctx, cl)
			cancel()
			if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
				t.Fatalf("tls %t, %s: metadata %v %+v", tlsOn, name, err, resp)
			}
			if got := e.fa.takeSeen(); !reflect.DeepEqual(got, []string{alice}) {
				t.Errorf("tls %t, %s: authorized as %v, want %s", tlsOn, name, got, alice)
			}
			cl.Close()
		}
		if n := e.closedFor("authentication", 0); n != 0 {
			t.Errorf("tls %t: %d connections closed for authentication", tlsOn, n)
		}
	}
}

// TestSASLRaw: each SaslAuthenticate version carries the exchange (v1+
// with a session lifetime of 0); after success the connection is
// User:<name>, and a second SaslHandshake or SaslAuthenticate is refused
// ILLEGAL_SASL_STATE without closing it.
func TestSASLRaw(t *testing.T) {
	e := startSASL(t, saslOpts{sasl: allMechanisms, grants: []grant{topicGrant(acl.Describe, "ok")}})
	e.adm.scram.addUser(t, "alice", "secret")
	for v := range int16(3) {
		for _, mech := range []sasl.Mechanism{
			saslscram.Auth{User: "alice", Pass: "secret"}.AsSha256Mechanism(),
			saslscram.Auth{User: "alice", Pass: "secret"}.AsSha512Mechanism(),
			plain.Auth{User: "alice", Pass: "secret"}.AsMechanism(),
		} {
			c := e.dial(t)
			login(c, v, mech)
			if !metadataOK(c) {
				t.Fatalf("v%d %s: metadata refused", v, mech.Name())
			}
			if got := e.fa.takeSeen(); !reflect.DeepEqual(got, []string{alice}) {
				t.Errorf("v%d %s: authorized as %v, want %s", v, mech.Name(), got, alice)
			}
			if r := handshake(c, mech.Name()); r.ErrorCode != illegalSASLState {
				t.Errorf("v%d %s: handshake after authentication: %v", v, mech.Name(), kerr.ErrorForCode(r.ErrorCode))
			}
			if r := authenticate(c, v, []byte("n,,n=alice,r=x")); r.ErrorCode != illegalSASLState {
				t.Errorf("v%d %s: authenticate after authentication: %v", v, mech.Name(), kerr.ErrorForCode(r.ErrorCode))
			}
			if !metadataOK(c) {
				t.Fatalf("v%d %s: metadata refused after the refusals", v, mech.Name())
			}
		}
	}
	if n := e.closedFor("authentication", 0); n != 0 {
		t.Errorf("%d connections closed for authentication", n)
	}
}

// TestSASLFailure: a wrong password, an unknown user or a malformed
// message is SASL_AUTHENTICATION_FAILED with only what may be told, and
// the connection closes once answered; nothing reaches the backend.
func TestSASLFailure(t *testing.T) {
	e := startSASL(t, saslOpts{sasl: allMechanisms, grants: []grant{topicGrant(acl.Describe, "ok")}})
	e.adm.scram.addUser(t, "alice", "secret")

	// franz-go sees the failure.
	for _, mech := range []sasl.Mechanism{
		saslscram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism(),
		saslscram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism(),
		plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(),
	} {
		cl := e.kgo(t, mech)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err := metadataReq(12, "ok").RequestWith(ctx, cl)
		cancel()
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", mech.Name(), err)
		}
		cl.Close()
	}

	type attempt struct {
		name, mech string
		msgs       [][]byte
		wantMsg    string
	}
	for _, a := range []attempt{
		{"plain wrong password", MechanismPlain, [][]byte{[]byte("\x00alice\x00wrong")}, "authentication failed"},
		{"plain unknown user", MechanismPlain, [][]byte{[]byte("\x00mallory\x00secret")}, "authentication failed"},
		{"plain two fields", MechanismPlain, [][]byte{[]byte("alice\x00secret")}, "malformed or unsupported SASL message: "},
		{"scram channel binding", MechanismSCRAMSHA256, [][]byte{[]byte("p=tls-unique,,n=alice,r=abc")}, "malformed or unsupported SASL message: channel binding"},
		{"too long", MechanismSCRAMSHA256, [][]byte{make([]byte, maxSASLMessageBytes+1)}, "SASL message of 16385 bytes"},
	} {
		c := e.dial(t)
		if r := handshake(c, a.mech); r.ErrorCode != 0 {
			t.Fatalf("%s: handshake %v", a.name, kerr.ErrorForCode(r.ErrorCode))
		}
		var r *kmsg.SASLAuthenticateResponse
		for _, m := range a.msgs {
			r = authenticate(c, 2, m)
		}
		if r.ErrorCode != saslAuthenticationFailed || !strings.HasPrefix(orNull(r.ErrorMessage), a.wantMsg) {
			t.Errorf("%s: %v %q, want SASL_AUTHENTICATION_FAILED %q", a.name, kerr.ErrorForCode(r.ErrorCode), orNull(r.ErrorMessage), a.wantMsg)
		}
		if !c.closed() {
			t.Errorf("%s: connection not closed", a.name)
		}
	}

	// An unknown user over SCRAM fails at the proof, as a wrong password.
	c := e.dial(t)
	mech := saslscram.Auth{User: "mallory", Pass: "secret"}.AsSha512Mechanism()
	if r := handshake(c, mech.Name()); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	session, first, _ := mech.Authenticate(t.Context(), "")
	r := authenticate(c, 1, first)
	if r.ErrorCode != 0 {
		t.Fatalf("unknown user refused at the first message: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	_, final, err := session.Challenge(r.SASLAuthBytes)
	if err != nil {
		t.Fatal(err)
	}
	if r := authenticate(c, 1, final); r.ErrorCode != saslAuthenticationFailed || orNull(r.ErrorMessage) != "authentication failed" {
		t.Errorf("unknown user: %v %q", kerr.ErrorForCode(r.ErrorCode), orNull(r.ErrorMessage))
	}
	if !c.closed() {
		t.Error("unknown user: connection not closed")
	}

	if calls := e.b.take(); len(calls) != 0 {
		t.Errorf("the backend got %d calls", len(calls))
	}
	if n := e.closedFor("authentication", 9); n < 9 {
		t.Errorf("%d connections closed for authentication, want at least 9", n)
	}
}

// TestSASLRequestBeforeAuthentication: only ApiVersions, SaslHandshake and
// SaslAuthenticate may come before authentication; anything else closes
// the connection, also mid-exchange, and never reaches the backend.
func TestSASLRequestBeforeAuthentication(t *testing.T) {
	e := startSASL(t, saslOpts{sasl: allMechanisms, grants: []grant{topicGrant(acl.Describe, "ok"), topicGrant(acl.Write, "ok")}})
	e.adm.scram.addUser(t, "alice", "secret")

	c := e.dial(t)
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	avr := kmsg.NewPtrApiVersionsResponse()
	avr.SetVersion(3)
	c.recv(c.send(av), avr, false)
	if avr.ErrorCode != 0 {
		t.Fatalf("ApiVersions before authentication: %v", kerr.ErrorForCode(avr.ErrorCode))
	}
	c.send(metadataReq(12, "ok"))
	if !c.closed() {
		t.Fatal("metadata before authentication: connection not closed")
	}

	// Mid-SCRAM.
	c = e.dial(t)
	mech := saslscram.Auth{User: "alice", Pass: "secret"}.AsSha256Mechanism()
	handshake(c, mech.Name())
	_, first, _ := mech.Authenticate(t.Context(), "")
	if r := authenticate(c, 2, first); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	c.send(produceReq(9, 1, "ok"))
	if !c.closed() {
		t.Fatal("produce mid-exchange: connection not closed")
	}

	// An API the listener does not serve at all.
	c = e.dial(t)
	c.raw([]byte{0, 0, 0, 10, 0x27, 0x0f, 0, 0, 0, 0, 0, 1, 0xff, 0xff})
	if !c.closed() {
		t.Fatal("unknown API before authentication: connection not closed")
	}

	if calls := e.b.take(); len(calls) != 0 {
		t.Errorf("the backend got %v", calls)
	}
	if n := e.closedFor("authentication", 3); n != 3 {
		t.Errorf("%d connections closed for authentication, want 3", n)
	}
}

// TestSASLHandshake: a disabled mechanism, and PLAIN on a connection that
// is not TLS, are UNSUPPORTED_SASL_MECHANISM with the mechanisms the
// connection may use, and the client may ask again; a second handshake is
// ILLEGAL_SASL_STATE and closes the connection, as does SaslAuthenticate
// before any; SaslHandshake v0 is UNSUPPORTED_VERSION.
func TestSASLHandshake(t *testing.T) {
	cfg := &SASL{Mechanisms: []string{MechanismSCRAMSHA256, MechanismPlain}}
	e := startSASL(t, saslOpts{sasl: cfg})
	c := e.dial(t)
	for _, m := range []string{MechanismSCRAMSHA512, MechanismPlain, "scram-sha-256", "GSSAPI", ""} {
		r := handshake(c, m)
		if r.ErrorCode != unsupportedSASLMechanism || !reflect.DeepEqual(r.SupportedMechanisms, []string{MechanismSCRAMSHA256}) {
			t.Errorf("handshake %q: %v %v, want UNSUPPORTED_SASL_MECHANISM [SCRAM-SHA-256]", m, kerr.ErrorForCode(r.ErrorCode), r.SupportedMechanisms)
		}
	}
	if r := handshake(c, MechanismSCRAMSHA256); r.ErrorCode != 0 || !reflect.DeepEqual(r.SupportedMechanisms, []string{MechanismSCRAMSHA256}) {
		t.Fatalf("handshake SCRAM-SHA-256: %v %v", kerr.ErrorForCode(r.ErrorCode), r.SupportedMechanisms)
	}
	if r := handshake(c, MechanismSCRAMSHA256); r.ErrorCode != illegalSASLState {
		t.Errorf("second handshake: %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(r.ErrorCode))
	}
	if !c.closed() {
		t.Error("second handshake: connection not closed")
	}

	c = e.dial(t)
	if r := authenticate(c, 1, []byte("n,,n=alice,r=abc")); r.ErrorCode != illegalSASLState {
		t.Errorf("authenticate before handshake: %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(r.ErrorCode))
	}
	if !c.closed() {
		t.Error("authenticate before handshake: connection not closed")
	}

	c = e.dial(t)
	v0 := kmsg.NewPtrSASLHandshakeRequest()
	v0.Mechanism = MechanismSCRAMSHA256
	if r := c.roundTrip(v0).(*kmsg.SASLHandshakeResponse); r.ErrorCode != unsupportedVersion {
		t.Errorf("handshake v0: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := handshake(c, MechanismSCRAMSHA256); r.ErrorCode != 0 {
		t.Errorf("handshake v1 after v0: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// Over TLS, PLAIN is offered.
	et := startSASL(t, saslOpts{sasl: cfg, tls: true})
	c = et.dial(t)
	if r := handshake(c, MechanismPlain); r.ErrorCode != 0 || !reflect.DeepEqual(r.SupportedMechanisms, []string{MechanismSCRAMSHA256, MechanismPlain}) {
		t.Errorf("handshake PLAIN over TLS: %v %v", kerr.ErrorForCode(r.ErrorCode), r.SupportedMechanisms)
	}
}

// TestSASLApiVersions: SaslHandshake (v1) and SaslAuthenticate (v0-v2) are
// advertised with SASL only; the SCRAM credential APIs (v0) with an Admin,
// SASL or not.
func TestSASLApiVersions(t *testing.T) {
	for _, on := range []bool{false, true} {
		o := saslOpts{}
		if on {
			o.sasl = allMechanisms
		}
		e := startSASL(t, o)
		c := e.dial(t)
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(3)
		c.recv(c.send(req), resp, false)
		got := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 17 || k.ApiKey == 36 || k.ApiKey == 50 || k.ApiKey == 51 {
				got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
			}
		}
		want := map[int16][2]int16{50: {0, 0}, 51: {0, 0}}
		if on {
			want[17], want[36] = [2]int16{0, 1}, [2]int16{0, 2} // 17 v0 advertised for librdkafka, refused if sent
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("SASL %t: advertised %v, want %v", on, got, want)
		}
	}
	s := NewServer(Config{SASL: allMechanisms}, &recBackend{}, nil)
	for _, key := range []int16{50, 51} {
		if _, ok := s.apis[key]; ok {
			t.Errorf("%s served without an admin", kmsg.NameForKey(key))
		}
	}
}

// TestSASLBounds: before authentication a frame is at most 512 KiB, and a
// connection must authenticate within the idle timeout of its start,
// however busy it keeps.
func TestSASLBounds(t *testing.T) {
	e := startSASL(t, saslOpts{sasl: allMechanisms, idle: 300 * time.Millisecond})
	c := e.dial(t)
	c.raw(binary.BigEndian.AppendUint32(nil, maxUnauthenticatedRequestBytes+1))
	if !c.closed() {
		t.Error("large frame before authentication: connection not closed")
	}
	if n := e.closedFor("oversized", 1); n != 1 {
		t.Errorf("%d connections closed oversized, want 1", n)
	}

	c = e.dial(t)
	start := time.Now()
	for {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		c.send(req)
		if _, err := c.frame(); err != nil {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("an unauthenticated connection was kept past its deadline")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("closed after %v, before the idle timeout", d)
	}
	if n := e.closedFor("authentication", 1); n != 1 {
		t.Errorf("%d connections closed for authentication, want 1", n)
	}

	// Once authenticated, the idle timeout is per request again.
	e.adm.scram.addUser(t, "alice", "secret")
	c = e.dial(t)
	login(c, 2, plain.Auth{User: "alice", Pass: "secret"}.AsMechanism())
	for range 8 {
		time.Sleep(50 * time.Millisecond)
		c.roundTrip(metadataReq(12, "ok"))
	}
}

// TestSCRAMCredentialAPIs: franz-go's admin client alters and describes
// SCRAM credentials through the listener, authorized on the cluster, and
// a user so created logs in.
func TestSCRAMCredentialAPIs(t *testing.T) {
	e := startSASL(t, saslOpts{sasl: allMechanisms, grants: []grant{clusterGrant(acl.Alter), clusterGrant(acl.Describe)}})
	e.adm.scram.addUser(t, "alice", "secret")
	adm := kadm.NewClient(e.kgo(t, saslscram.Auth{User: "alice", Pass: "secret"}.AsSha512Mechanism()))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "pw"},
		{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 100, Salt: []byte("s"), SaltedPassword: make([]byte, 32)},
	})
	if err != nil || altered["bob"].Err != nil || !errors.Is(altered["carol"].Err, kerr.UnacceptableCredential) {
		t.Fatalf("AlterUserSCRAMs: %v %+v", err, altered)
	}
	described, err := adm.DescribeUserSCRAMs(ctx, "bob", "carol")
	if err != nil {
		t.Fatal(err)
	}
	if want := []kadm.CredInfo{{Mechanism: kadm.ScramSha256, Iterations: 4096}, {Mechanism: kadm.ScramSha512, Iterations: 8192}}; described["bob"].Err != nil || !reflect.DeepEqual(described["bob"].CredInfos, want) {
		t.Errorf("bob: %+v, want %v", described["bob"], want)
	}
	if !errors.Is(described["carol"].Err, kerr.ResourceNotFound) {
		t.Errorf("carol: %+v, want RESOURCE_NOT_FOUND", described["carol"])
	}
	all, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || !reflect.DeepEqual(slices.Sorted(maps.Keys(all)), []string{"alice", "bob"}) {
		t.Errorf("every user: %v %v", err, all)
	}

	// bob logs in with the password the admin client salted.
	bob := e.kgo(t, saslscram.Auth{User: "bob", Pass: "pw"}.AsSha256Mechanism())
	if _, err := metadataReq(12).RequestWith(ctx, bob); err != nil {
		t.Fatalf("bob: %v", err)
	}
	if got := e.fa.takeSeen(); slices.Contains(got, certPrincipal) {
		t.Errorf("authorized as %v", got)
	}

	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || altered["bob"].Err != nil {
		t.Fatalf("delete: %v %+v", err, altered)
	}
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || !errors.Is(altered["bob"].Err, kerr.ResourceNotFound) {
		t.Fatalf("second delete: %v %+v", err, altered)
	}
	if _, ok := e.adm.scram.lookup("bob", scram.SHA512); !ok {
		t.Error("bob's SCRAM-SHA-512 credential went with the SCRAM-SHA-256 one")
	}
}

// TestSCRAMCredentialAPIsRaw: the translation and the authorization, with
// exact requests: denied is CLUSTER_AUTHORIZATION_FAILED at the top for
// Describe and per user for Alter, nothing asked; a user described twice
// is DUPLICATE_RESOURCE and not asked; an Admin error is the request's.
func TestSCRAMCredentialAPIsRaw(t *testing.T) {
	e := startSASL(t, saslOpts{}) // no SASL: the APIs are served all the same
	c := e.dial(t)
	describe := func(users ...string) *kmsg.DescribeUserSCRAMCredentialsResponse {
		req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		for _, u := range users {
			ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			ru.Name = u
			req.Users = append(req.Users, ru)
		}
		return c.roundTrip(req).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	}
	alter := func() *kmsg.AlterUserSCRAMCredentialsResponse {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = "bob", 1
		req.Deletions = append(req.Deletions, d)
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = "carol", 2, 4096, []byte("salt"), make([]byte, 64)
		req.Upsertions = append(req.Upsertions, u)
		u.Name = "bob"
		req.Upsertions = append(req.Upsertions, u)
		return c.roundTrip(req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	}
	type result struct {
		user string
		code int16
	}
	alterResults := func(r *kmsg.AlterUserSCRAMCredentialsResponse) []result {
		var out []result
		for _, x := range r.Results {
			out = append(out, result{x.User, x.ErrorCode})
		}
		return out
	}
	describeResults := func(r *kmsg.DescribeUserSCRAMCredentialsResponse) []result {
		var out []result
		for _, x := range r.Results {
			out = append(out, result{x.User, x.ErrorCode})
		}
		return out
	}

	// Denied.
	if r := describe("bob"); r.ErrorCode != clusterAuthorizationFailed {
		t.Errorf("describe denied: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got, want := alterResults(alter()), []result{{"bob", clusterAuthorizationFailed}, {"carol", clusterAuthorizationFailed}}; !reflect.DeepEqual(got, want) {
		t.Errorf("alter denied: %v, want %v", got, want)
	}
	if calls := e.adm.take(); len(calls) != 0 {
		t.Errorf("denied requests reached the admin: %v", calls)
	}

	e.fa.allow(grant{certPrincipal, acl.Alter, acl.Cluster, acl.ClusterName}, grant{certPrincipal, acl.Describe, acl.Cluster, acl.ClusterName})
	// bob's deletion fails (no credential), carol's upsertion is made, and
	// bob's too (the fake is not all or nothing per user).
	if got, want := alterResults(alter()), []result{{"bob", 91}, {"carol", 0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("alter: %v, want %v", got, want)
	}
	calls := e.adm.take()
	wantAlter := &pb.AlterUserScramCredentialsRequest{
		Deletions: []*pb.ScramCredentialDeletion{{Name: "bob", Mechanism: pb.ScramMechanism_SCRAM_MECHANISM_SCRAM_SHA_256}},
		Upsertions: []*pb.ScramCredentialUpsertion{
			{Name: "carol", Mechanism: pb.ScramMechanism_SCRAM_MECHANISM_SCRAM_SHA_512, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 64)},
			{Name: "bob", Mechanism: pb.ScramMechanism_SCRAM_MECHANISM_SCRAM_SHA_512, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 64)},
		},
	}
	if len(calls) != 1 || !protoEqual(calls[0], wantAlter) {
		t.Errorf("the admin got %v, want %v", calls, wantAlter)
	}

	r := describe("bob", "carol", "bob", "dave")
	if got, want := describeResults(r), []result{{"carol", 0}, {"dave", 91}, {"bob", duplicateResource}}; r.ErrorCode != 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("describe: %v %v, want %v", kerr.ErrorForCode(r.ErrorCode), got, want)
	}
	if len(r.Results) > 0 && (len(r.Results[0].CredentialInfos) != 1 || r.Results[0].CredentialInfos[0].Mechanism != 2 || r.Results[0].CredentialInfos[0].Iterations != 4096) {
		t.Errorf("carol: %+v", r.Results[0].CredentialInfos)
	}
	if calls := e.adm.take(); len(calls) != 1 || !protoEqual(calls[0], &pb.DescribeUserScramCredentialsRequest{Users: []string{"carol", "dave"}}) {
		t.Errorf("the admin got %v, want carol and dave", calls)
	}
	// Only duplicates: nothing to ask (an empty list would describe all).
	if got, want := describeResults(describe("bob", "bob")), []result{{"bob", duplicateResource}}; !reflect.DeepEqual(got, want) {
		t.Errorf("describe duplicates: %v, want %v", got, want)
	}
	if calls := e.adm.take(); len(calls) != 0 {
		t.Errorf("duplicates only: the admin got %v", calls)
	}

	e.adm.set(func(a *fakeAdmin) { a.err = status.Error(codes.Unavailable, "no controller") })
	if r := describe(); r.ErrorCode != notController || !strings.Contains(orNull(r.ErrorMessage), "no controller") {
		t.Errorf("describe, admin error: %v %q", kerr.ErrorForCode(r.ErrorCode), orNull(r.ErrorMessage))
	}
	if got, want := alterResults(alter()), []result{{"bob", notController}, {"carol", notController}}; !reflect.DeepEqual(got, want) {
		t.Errorf("alter, admin error: %v, want %v", got, want)
	}
}

// TestSASLConfig: Validate refuses what NewServer would serve otherwise
// than written; NewServer keeps the known mechanisms, in order, and
// defaults to the SCRAM ones.
func TestSASLConfig(t *testing.T) {
	lookup := (&credStore{}).lookup
	for _, c := range []struct {
		cfg SASL
		ok  bool
	}{
		{SASL{Mechanisms: []string{MechanismPlain, MechanismSCRAMSHA256}, Lookup: lookup}, true},
		{SASL{Lookup: lookup}, true},
		{SASL{Mechanisms: []string{"GSSAPI"}, Lookup: lookup}, false},
		{SASL{Mechanisms: []string{"scram-sha-256"}, Lookup: lookup}, false},
		{SASL{Mechanisms: []string{MechanismPlain, MechanismPlain}, Lookup: lookup}, false},
		{SASL{Mechanisms: []string{MechanismPlain}}, false},
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%v: Validate %v", c.cfg.Mechanisms, err)
		}
	}
	for _, c := range []struct{ in, want []string }{
		{nil, []string{MechanismSCRAMSHA512, MechanismSCRAMSHA256}},
		{[]string{MechanismPlain, "GSSAPI", MechanismSCRAMSHA256, MechanismPlain}, []string{MechanismPlain, MechanismSCRAMSHA256}},
		{[]string{"GSSAPI"}, nil},
	} {
		in := &SASL{Mechanisms: c.in}
		s := NewServer(Config{SASL: in}, &recBackend{}, nil)
		if !reflect.DeepEqual(s.cfg.SASL.Mechanisms, c.want) || s.cfg.SASL.Random == nil || in.Random != nil {
			t.Errorf("%v: served %v (random set %t)", c.in, s.cfg.SASL.Mechanisms, s.cfg.SASL.Random != nil)
		}
	}
}

// TestSASLCertificateSuffices: with SASL on, a connection whose TLS
// certificate named a principal is authenticated already: its requests are
// served as that principal without a SASL exchange, and a SaslAuthenticate
// is ILLEGAL_SASL_STATE (as after a SASL login).
func TestSASLCertificateSuffices(t *testing.T) {
	e := startSASL(t, saslOpts{sasl: allMechanisms, cert: true, grants: []grant{{certPrincipal, acl.Describe, acl.Topic, "ok"}}})
	c := e.dial(t)
	resp := c.roundTrip(metadataReq(12, "ok")).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata with a certificate: %+v", resp.Topics)
	}
	if got := e.fa.takeSeen(); !slices.Contains(got, certPrincipal) {
		t.Fatalf("authorized as %v, want %s", got, certPrincipal)
	}
	if r := authenticate(c, 2, []byte("n,,n=alice,r=abc")); r.ErrorCode != illegalSASLState {
		t.Fatalf("SaslAuthenticate after a certificate: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
