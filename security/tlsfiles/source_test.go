package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twinlog/twinlog/security/pki"
)

// clock is a settable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logBuffer collects log output from any goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newCA(t *testing.T, name string) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(name, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func serverLeaf(name string) pki.LeafOptions {
	return pki.LeafOptions{CommonName: name, DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true}
}

func clientLeaf(name string) pki.LeafOptions {
	return pki.LeafOptions{CommonName: name, OrganizationalUnit: []string{"eng"}, Client: true}
}

// writeFile replaces path atomically, as a careful operator would.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// issue writes a certificate and key issued by ca to <dir>/<name>.crt and
// .key, replacing any there, and returns the files with CAFile set to
// <dir>/<name>-ca.pem holding the bundle cas.
func issue(t *testing.T, dir, name string, ca *pki.CA, o pki.LeafOptions, cas ...*pki.CA) Files {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(o)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := pki.WriteLeaf(dir, name, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	f := Files{CertFile: certFile, KeyFile: keyFile, CAFile: filepath.Join(dir, name+"-ca.pem")}
	writeBundle(t, f.CAFile, cas...)
	return f
}

func writeBundle(t *testing.T, path string, cas ...*pki.CA) {
	t.Helper()
	var bundle []byte
	for _, c := range cas {
		bundle = append(bundle, c.CertPEM...)
	}
	writeFile(t, path, bundle)
}

func load(t *testing.T, f Files, o Options) *Source {
	t.Helper()
	s, err := Load(f, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func leafOf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	other := newCA(t, "other")
	f := issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca, other)
	s := load(t, f, Options{})
	if got, want := s.NotAfter(), leafOf(t, f.CertFile).NotAfter; !got.Equal(want) {
		t.Errorf("NotAfter %v, want %v", got, want)
	}
	if ok, failed := s.Reloads(); ok != 0 || failed != 0 {
		t.Errorf("Reloads %d, %d", ok, failed)
	}
	m := s.cur.Load()
	if m.caCount != 2 || len(m.cert.Certificate) != 1 || m.cert.Leaf == nil {
		t.Errorf("material: %d CA certs, chain of %d", m.caCount, len(m.cert.Certificate))
	}
	if err := s.Check(); err != nil {
		t.Errorf("Check of unchanged files: %v", err)
	}
	if ok, failed := s.Reloads(); ok != 0 || failed != 0 {
		t.Errorf("Check of unchanged files reloaded: %d, %d", ok, failed)
	}

	// A file holding both the certificate and the key.
	both := filepath.Join(dir, "both.pem")
	certPEM, _ := os.ReadFile(f.CertFile)
	keyPEM, _ := os.ReadFile(f.KeyFile)
	writeFile(t, both, append(append([]byte{}, keyPEM...), certPEM...))
	load(t, Files{CertFile: both, KeyFile: both, CAFile: f.CAFile}, Options{})

	// A CA bundle alone (a client that presents no certificate).
	if s := load(t, Files{CAFile: f.CAFile}, Options{}); !s.NotAfter().IsZero() {
		t.Error("NotAfter without a certificate is not zero")
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	f := issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca)
	g := issue(t, dir, "other", ca, serverLeaf("broker-2"), ca)
	garbage := filepath.Join(dir, "garbage.pem")
	writeFile(t, garbage, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	text := filepath.Join(dir, "text")
	writeFile(t, text, []byte("not PEM at all\n"))
	missing := filepath.Join(dir, "missing.pem")

	for _, tc := range []struct {
		name  string
		files Files
		want  string // in the error
	}{
		{"missing cert", Files{missing, f.KeyFile, f.CAFile}, missing},
		{"missing key", Files{f.CertFile, missing, f.CAFile}, missing},
		{"missing CA", Files{f.CertFile, f.KeyFile, missing}, missing},
		{"unparsable cert", Files{garbage, f.KeyFile, f.CAFile}, garbage},
		{"cert not PEM", Files{text, f.KeyFile, f.CAFile}, text},
		{"key not PEM", Files{f.CertFile, text, f.CAFile}, text},
		{"key is a certificate", Files{f.CertFile, f.CertFile, f.CAFile}, "no private key"},
		{"CA not PEM", Files{f.CertFile, f.KeyFile, text}, text},
		{"CA is a key", Files{f.CertFile, f.KeyFile, f.KeyFile}, "no CERTIFICATE"},
		{"mismatched key", Files{f.CertFile, g.KeyFile, f.CAFile}, g.KeyFile},
		{"cert without key", Files{CertFile: f.CertFile, CAFile: f.CAFile}, "together"},
		{"nothing", Files{}, "no files"},
	} {
		_, err := Load(tc.files, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// server is a TLS listener that stays up for a whole test: each accepted
// connection is handshaken with the same config, and the outcome (the
// client's leaf or the error) is sent on results.
type server struct {
	ln      net.Listener
	results chan result
}

type result struct {
	leaf *x509.Certificate
	err  error
}

func serve(t *testing.T, cfg *tls.Config) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln, results: make(chan result, 100)}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				tc := tls.Server(c, cfg)
				err := tc.Handshake()
				if err == nil {
					_, err = tc.Write([]byte{1})
				}
				s.results <- result{PeerLeaf(tc.ConnectionState()), err}
			}()
		}
	}()
	return s
}

// dial handshakes with the server and reads the byte it writes (so that a
// TLS 1.3 server's refusal of the client's certificate reaches the client),
// and returns the connection state, the server's outcome and the client's
// error.
func (s *server) dial(t *testing.T, cfg *tls.Config) (tls.ConnectionState, result, error) {
	t.Helper()
	c, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(c, cfg)
	err = tc.Handshake()
	if err == nil {
		_, err = tc.Read(make([]byte, 1))
	}
	cs := tc.ConnectionState()
	c.Close()
	select {
	case r := <-s.results:
		return cs, r, err
	case <-time.After(10 * time.Second):
		t.Fatal("server outcome not reported")
		return cs, result{}, err
	}
}

func serial(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].SerialNumber.String()
}

func TestReloadCertificateSeenByNewHandshakes(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	clk := newClock()
	logs := &logBuffer{}
	o := Options{Now: clk.Now, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	sf := issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca)
	srvSrc := load(t, sf, o)
	cliSrc := load(t, issue(t, dir, "client", ca, clientLeaf("alice"), ca), o)
	srv := serve(t, srvSrc.ServerConfig(tls.RequireAndVerifyClientCert))

	first := leafOf(t, sf.CertFile)
	cs, r, err := srv.dial(t, cliSrc.ClientConfig("localhost"))
	if err != nil || r.err != nil {
		t.Fatalf("handshake: client %v, server %v", err, r.err)
	}
	if serial(cs) != first.SerialNumber.String() {
		t.Fatalf("server presented %s, want %s", serial(cs), first.SerialNumber)
	}
	if r.leaf == nil || r.leaf.Subject.CommonName != "alice" {
		t.Fatalf("server's PeerLeaf %v, want alice", r.leaf)
	}

	// A new certificate for the server, written over the old files.
	issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca)
	second := leafOf(t, sf.CertFile)
	clk.Advance(DefaultMinReloadInterval)
	cs, r, err = srv.dial(t, cliSrc.ClientConfig("localhost"))
	if err != nil || r.err != nil {
		t.Fatalf("handshake after rotation: client %v, server %v", err, r.err)
	}
	if serial(cs) != second.SerialNumber.String() {
		t.Errorf("after rotation the server presented %s, want %s", serial(cs), second.SerialNumber)
	}
	if !srvSrc.NotAfter().Equal(second.NotAfter) {
		t.Errorf("NotAfter %v, want %v", srvSrc.NotAfter(), second.NotAfter)
	}
	if ok, failed := srvSrc.Reloads(); ok != 1 || failed != 0 {
		t.Errorf("Reloads %d, %d; want 1, 0", ok, failed)
	}
	if !strings.Contains(logs.String(), "reloaded TLS material") {
		t.Errorf("no reload logged: %s", logs)
	}
}

func TestReloadCARotation(t *testing.T) {
	dir := t.TempDir()
	oldCA, newCA_ := newCA(t, "old"), newCA(t, "new")
	clk := newClock()
	o := Options{Now: clk.Now, Logger: slog.New(slog.DiscardHandler)}
	sf := issue(t, dir, "broker", oldCA, serverLeaf("broker-1"), oldCA)
	cf := issue(t, dir, "client", newCA_, clientLeaf("alice"), oldCA)
	srvSrc, cliSrc := load(t, sf, o), load(t, cf, o)
	srv := serve(t, srvSrc.ServerConfig(tls.RequireAndVerifyClientCert))

	// The client's certificate is from a CA the server does not trust yet.
	_, r, err := srv.dial(t, cliSrc.ClientConfig("localhost"))
	if err == nil || r.err == nil {
		t.Fatalf("client certificate of an untrusted CA: client %v, server %v", err, r.err)
	}

	// The server's bundle gains the new CA: new handshakes accept it.
	writeBundle(t, sf.CAFile, oldCA, newCA_)
	clk.Advance(DefaultMinReloadInterval)
	_, r, err = srv.dial(t, cliSrc.ClientConfig("localhost"))
	if err != nil || r.err != nil {
		t.Fatalf("after adding the CA: client %v, server %v", err, r.err)
	}

	// The server moves to a certificate of the new CA; the client, which
	// trusts only the old one, refuses it until its own bundle changes.
	issue(t, dir, "broker", newCA_, serverLeaf("broker-1"), oldCA, newCA_)
	clk.Advance(DefaultMinReloadInterval)
	_, _, err = srv.dial(t, cliSrc.ClientConfig("localhost"))
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("client accepted a server certificate of a CA it does not trust: %v", err)
	}
	writeBundle(t, cf.CAFile, newCA_)
	clk.Advance(DefaultMinReloadInterval)
	_, r, err = srv.dial(t, cliSrc.ClientConfig("localhost"))
	if err != nil || r.err != nil {
		t.Fatalf("after the client's CA rotation: client %v, server %v", err, r.err)
	}

	// Dropping the old CA from the server's bundle refuses what it issued.
	writeBundle(t, sf.CAFile, newCA_)
	clk.Advance(DefaultMinReloadInterval)
	oldClient := load(t, issue(t, dir, "client2", oldCA, clientLeaf("bob"), newCA_), o)
	_, r, err = srv.dial(t, oldClient.ClientConfig("localhost"))
	if err == nil || r.err == nil {
		t.Fatalf("client certificate of a removed CA: client %v, server %v", err, r.err)
	}
}

func TestCorruptRewriteKeepsOldMaterial(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	clk := newClock()
	logs := &logBuffer{}
	o := Options{Now: clk.Now, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	sf := issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca)
	srvSrc := load(t, sf, o)
	cliSrc := load(t, issue(t, dir, "client", ca, clientLeaf("alice"), ca), o)
	srv := serve(t, srvSrc.ServerConfig(tls.RequireAndVerifyClientCert))
	first := leafOf(t, sf.CertFile)
	good, err := os.ReadFile(sf.CertFile)
	if err != nil {
		t.Fatal(err)
	}

	// A truncated certificate (an in-place write caught half way).
	if err := os.WriteFile(sf.CertFile, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	err = srvSrc.Check()
	if err == nil || !strings.Contains(err.Error(), sf.CertFile) {
		t.Fatalf("Check of a truncated certificate: %v", err)
	}
	if ok, failed := srvSrc.Reloads(); ok != 0 || failed != 1 {
		t.Errorf("Reloads %d, %d; want 0, 1", ok, failed)
	}
	if !strings.Contains(logs.String(), "reload failed") {
		t.Errorf("failure not logged: %s", logs)
	}
	// The old certificate still serves, and the same bad file is not
	// counted again by later checks, handshakes included.
	for range 3 {
		clk.Advance(DefaultMinReloadInterval)
		cs, r, err := srv.dial(t, cliSrc.ClientConfig("localhost"))
		if err != nil || r.err != nil {
			t.Fatalf("handshake with a corrupt file on disk: client %v, server %v", err, r.err)
		}
		if serial(cs) != first.SerialNumber.String() {
			t.Fatalf("server presented %s, want the old %s", serial(cs), first.SerialNumber)
		}
		if err := srvSrc.Check(); err == nil {
			t.Fatal("Check forgot the failure")
		}
	}
	if ok, failed := srvSrc.Reloads(); ok != 0 || failed != 1 {
		t.Errorf("Reloads %d, %d; want 0, 1", ok, failed)
	}

	// Another certificate with the old key: a mismatch, a second failure.
	other := issue(t, dir, "other", ca, serverLeaf("broker-2"), ca)
	otherCert, _ := os.ReadFile(other.CertFile)
	writeFile(t, sf.CertFile, otherCert)
	if err := srvSrc.Check(); err == nil || !strings.Contains(err.Error(), "does not hold the key") {
		t.Fatalf("Check of a mismatched pair: %v", err)
	}
	if _, failed := srvSrc.Reloads(); failed != 2 {
		t.Errorf("failed reloads %d, want 2", failed)
	}

	// The good file back: nothing to reload, and no error.
	writeFile(t, sf.CertFile, good)
	if err := srvSrc.Check(); err != nil {
		t.Fatalf("Check after repair: %v", err)
	}
	if ok, failed := srvSrc.Reloads(); ok != 0 || failed != 2 {
		t.Errorf("Reloads %d, %d; want 0, 2", ok, failed)
	}

	// The matching key arrives after its certificate: one failure, then
	// the pair loads.
	otherKey, _ := os.ReadFile(other.KeyFile)
	writeFile(t, sf.CertFile, otherCert)
	if err := srvSrc.Check(); err == nil {
		t.Fatal("half-rotated pair loaded")
	}
	writeFile(t, sf.KeyFile, otherKey)
	if err := srvSrc.Check(); err != nil {
		t.Fatalf("rotated pair: %v", err)
	}
	if ok, failed := srvSrc.Reloads(); ok != 1 || failed != 3 {
		t.Errorf("Reloads %d, %d; want 1, 3", ok, failed)
	}
	clk.Advance(DefaultMinReloadInterval)
	cs, _, err := srv.dial(t, cliSrc.ClientConfig("localhost"))
	if err != nil || cs.PeerCertificates[0].Subject.CommonName != "broker-2" {
		t.Errorf("after the pair rotated: %v", err)
	}

	// A removed file fails like a corrupt one.
	if err := os.Remove(sf.CAFile); err != nil {
		t.Fatal(err)
	}
	if err := srvSrc.Check(); err == nil || !strings.Contains(err.Error(), sf.CAFile) {
		t.Errorf("Check with the CA file gone: %v", err)
	}
}

func TestRateLimit(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	clk := newClock()
	o := Options{Now: clk.Now, MinReloadInterval: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	sf := issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca)
	srvSrc := load(t, sf, o)
	cliSrc := load(t, Files{CAFile: sf.CAFile}, o)
	srv := serve(t, srvSrc.ServerConfig(tls.NoClientCert))
	first := leafOf(t, sf.CertFile).SerialNumber.String()

	issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca)
	second := leafOf(t, sf.CertFile).SerialNumber.String()

	presented := func() string {
		t.Helper()
		cs, r, err := srv.dial(t, cliSrc.ClientConfig("localhost"))
		if err != nil || r.err != nil {
			t.Fatalf("handshake: client %v, server %v", err, r.err)
		}
		return serial(cs)
	}
	clk.Advance(9 * time.Second)
	if got := presented(); got != first {
		t.Errorf("9s after Load: presented %s, want the first %s (no check yet)", got, first)
	}
	clk.Advance(time.Second)
	if got := presented(); got != second {
		t.Errorf("10s after Load: presented %s, want the second %s", got, second)
	}

	// The check at 10s restarts the interval; Check ignores it.
	issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca)
	third := leafOf(t, sf.CertFile).SerialNumber.String()
	clk.Advance(5 * time.Second)
	if got := presented(); got != second {
		t.Errorf("5s after a check: presented %s, want %s", got, second)
	}
	if err := srvSrc.Check(); err != nil {
		t.Fatal(err)
	}
	if got := presented(); got != third {
		t.Errorf("after Check: presented %s, want %s", got, third)
	}
	if ok, _ := srvSrc.Reloads(); ok != 2 {
		t.Errorf("%d reloads, want 2", ok)
	}

	// A clock that goes back does not stop checks.
	issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca)
	fourth := leafOf(t, sf.CertFile).SerialNumber.String()
	clk.Advance(-time.Hour)
	if got := presented(); got != fourth {
		t.Errorf("after the clock went back: presented %s, want %s", got, fourth)
	}
}

// TestStatShortcut shows which rewrites a check notices: one that changes
// the stat always, one that keeps size and modification time only while
// that time is recent (the racy window), never one that restores an old
// modification time.
func TestStatShortcut(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	sf := issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca)
	good, err := os.ReadFile(sf.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(good, []byte("-----BEGIN CERTIFICATE-----\n"), []byte("-----BEGIN CERTIFICATE-----\n!"), 1)
	bad = bad[:len(good)] // same size
	setTime := func(mt time.Time) {
		t.Helper()
		if err := os.Chtimes(sf.CertFile, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	rewrite := func(data []byte, mt time.Time) {
		t.Helper()
		if err := os.WriteFile(sf.CertFile, data, 0o644); err != nil { // same inode
			t.Fatal(err)
		}
		setTime(mt)
	}

	old := time.Now().Add(-time.Hour)
	setTime(old)
	for _, f := range []string{sf.KeyFile, sf.CAFile} {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	s := load(t, sf, Options{Logger: slog.New(slog.DiscardHandler)})
	rewrite(bad, old)
	if err := s.Check(); err != nil {
		t.Errorf("a rewrite that restores an old size and time was noticed: %v", err)
	}
	rewrite(bad, old.Add(time.Second))
	if err := s.Check(); err == nil {
		t.Error("a rewrite with a new modification time went unnoticed")
	}
	rewrite(good, old.Add(2*time.Second))
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}

	recent := time.Now().Add(-time.Second)
	rewrite(good, recent)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	rewrite(bad, recent)
	if err := s.Check(); err == nil {
		t.Error("a same-size rewrite within the racy window went unnoticed")
	}
}

// TestResumptionReverified checks that a resumed session is verified
// against the current CA pool: a session ticket issued while the client's
// CA was trusted does not outlive the CA's removal.
func TestResumptionReverified(t *testing.T) {
	dir := t.TempDir()
	ca, other := newCA(t, "ca"), newCA(t, "other")
	clk := newClock()
	o := Options{Now: clk.Now, Logger: slog.New(slog.DiscardHandler)}
	sf := issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca)
	srvSrc := load(t, sf, o)
	cliSrc := load(t, issue(t, dir, "client", ca, clientLeaf("alice"), ca), o)
	srv := serve(t, srvSrc.ServerConfig(tls.RequireAndVerifyClientCert))
	cache := tls.NewLRUClientSessionCache(4)
	dial := func() (tls.ConnectionState, result, error) {
		cfg := cliSrc.ClientConfig("localhost")
		cfg.ClientSessionCache = cache
		return srv.dial(t, cfg)
	}
	if _, r, err := dial(); err != nil || r.err != nil {
		t.Fatalf("first handshake: client %v, server %v", err, r.err)
	}
	cs, r, err := dial()
	if err != nil || r.err != nil {
		t.Fatalf("second handshake: client %v, server %v", err, r.err)
	}
	if !cs.DidResume {
		t.Fatal("the second handshake did not resume; the test proves nothing")
	}
	if r.leaf == nil || r.leaf.Subject.CommonName != "alice" {
		t.Errorf("resumed PeerLeaf %v, want alice", r.leaf)
	}
	writeBundle(t, sf.CAFile, other)
	clk.Advance(DefaultMinReloadInterval)
	_, r, err = dial()
	if r.err == nil || !strings.Contains(r.err.Error(), "unknown authority") {
		t.Errorf("resumption after the CA was removed: server %v, client %v", r.err, err)
	}
}
