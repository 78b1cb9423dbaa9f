package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newCA(t *testing.T, cn string) *CA {
	t.Helper()
	ca, err := NewCA(cn, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func parsePEMCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	b, rest := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("no CERTIFICATE block in %q", data)
	}
	if len(strings.TrimSpace(string(rest))) != 0 {
		t.Fatalf("unexpected data after the certificate: %q", rest)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewCA(t *testing.T) {
	ca := newCA(t, "twinlog test CA")
	c := ca.Cert
	if !c.IsCA || !c.BasicConstraintsValid || c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("basic constraints: IsCA=%v valid=%v maxPathLen=%d zero=%v", c.IsCA, c.BasicConstraintsValid, c.MaxPathLen, c.MaxPathLenZero)
	}
	if want := x509.KeyUsageCertSign | x509.KeyUsageCRLSign; c.KeyUsage != want {
		t.Errorf("key usage %v, want %v", c.KeyUsage, want)
	}
	if c.Subject.CommonName != "twinlog test CA" || c.Issuer.CommonName != "twinlog test CA" {
		t.Errorf("subject %q issuer %q", c.Subject, c.Issuer)
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v: want in [1, 2^128)", c.SerialNumber)
	}
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T, want ECDSA P-256", c.PublicKey)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	if d := c.NotAfter.Sub(c.NotBefore); d != 24*time.Hour {
		t.Errorf("validity %v, want 24h", d)
	}
	if time.Until(c.NotBefore) > -30*time.Second {
		t.Errorf("NotBefore %v is not about a minute ago", c.NotBefore)
	}
	if !parsePEMCert(t, ca.CertPEM).Equal(c) {
		t.Error("CertPEM does not hold Cert")
	}
	other := newCA(t, "twinlog test CA")
	if other.Cert.SerialNumber.Cmp(c.SerialNumber) == 0 {
		t.Error("two CAs have one serial number")
	}
}

func TestNewCAErrors(t *testing.T) {
	if _, err := NewCA("", time.Hour); err == nil {
		t.Error("empty common name accepted")
	}
	if _, err := NewCA("ca", 0); err == nil {
		t.Error("zero validity accepted")
	}
}

func TestIssueExtKeyUsage(t *testing.T) {
	ca := newCA(t, "ca")
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, tc := range []struct {
		name           string
		server, client bool
	}{
		{"server", true, false},
		{"client", false, true},
		{"both", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, keyPEM, err := ca.Issue(LeafOptions{
				CommonName: "broker-1", DNSNames: []string{"broker-1.local"},
				IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
				Server:      tc.server, Client: tc.client,
			})
			if err != nil {
				t.Fatal(err)
			}
			leaf := parsePEMCert(t, certPEM)
			if leaf.IsCA {
				t.Error("leaf is a CA")
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Errorf("certificate and key do not pair: %v", err)
			}
			if b, _ := pem.Decode(keyPEM); b == nil || b.Type != "PRIVATE KEY" {
				t.Errorf("key PEM is not a PKCS #8 PRIVATE KEY block")
			}
			for _, u := range []struct {
				usage x509.ExtKeyUsage
				want  bool
			}{{x509.ExtKeyUsageServerAuth, tc.server}, {x509.ExtKeyUsageClientAuth, tc.client}} {
				_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{u.usage}})
				if (err == nil) != u.want {
					t.Errorf("verify for usage %v: err=%v, want ok=%v", u.usage, err, u.want)
				}
			}
			if tc.server {
				for _, name := range []string{"broker-1.local", "127.0.0.1"} {
					if err := leaf.VerifyHostname(name); err != nil {
						t.Errorf("VerifyHostname(%s): %v", name, err)
					}
				}
			}
		})
	}
}

func TestIssueDefaultsAndSubject(t *testing.T) {
	ca := newCA(t, "ca")
	certPEM, _, err := ca.Issue(LeafOptions{
		CommonName: "alice", Organization: []string{"acme"}, OrganizationalUnit: []string{"eng"},
		Client: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	leaf := parsePEMCert(t, certPEM)
	if d := leaf.NotAfter.Sub(leaf.NotBefore); d != DefaultLeafValidity {
		t.Errorf("validity %v, want %v", d, DefaultLeafValidity)
	}
	if got, want := leaf.Subject.String(), "CN=alice,OU=eng,O=acme"; got != want {
		t.Errorf("subject %q, want %q", got, want)
	}
	if leaf.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("key usage %v", leaf.KeyUsage)
	}
	if err := leaf.CheckSignatureFrom(ca.Cert); err != nil || leaf.Issuer.CommonName != "ca" {
		t.Errorf("issuer %q: %v", leaf.Issuer, err)
	}

	nb := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	certPEM, _, err = ca.Issue(LeafOptions{CommonName: "bob", Client: true, NotBefore: nb, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	leaf = parsePEMCert(t, certPEM)
	if !leaf.NotBefore.Equal(nb) || !leaf.NotAfter.Equal(nb.Add(time.Hour)) {
		t.Errorf("validity %v..%v", leaf.NotBefore, leaf.NotAfter)
	}
}

func TestIssueErrors(t *testing.T) {
	ca := newCA(t, "ca")
	for name, o := range map[string]LeafOptions{
		"no usage":           {CommonName: "x", DNSNames: []string{"x"}},
		"server without SAN": {CommonName: "x", Server: true},
		"no name":            {Client: true},
		"negative validity":  {CommonName: "x", Client: true, Validity: -time.Hour},
	} {
		if _, _, err := ca.Issue(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// handshake runs one TLS handshake over loopback and returns each side's
// error. The server writes a byte after its handshake and the client reads
// it, so that a client certificate refused by a TLS 1.3 server (which the
// client learns of only after its own handshake) fails on the client too.
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Server(c, server)
		err = tc.Handshake()
		if err == nil {
			_, err = tc.Write([]byte{1})
		}
		done <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(c, client)
	clientErr = tc.Handshake()
	if clientErr == nil {
		_, clientErr = tc.Read(make([]byte, 1))
	}
	c.Close()
	return <-done, clientErr
}

type party struct {
	cert tls.Certificate
	pool *x509.CertPool
}

func newParty(t *testing.T, ca *CA, o LeafOptions) party {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(o)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.CertPEM) {
		t.Fatal("CA PEM not appended")
	}
	return party{cert, pool}
}

func serverConfig(p party) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{p.cert},
		ClientCAs:    p.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
}

func clientConfig(p party, serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{p.cert},
		RootCAs:      p.pool,
		ServerName:   serverName,
	}
}

func TestMutualTLS(t *testing.T) {
	ca := newCA(t, "ca")
	srv := newParty(t, ca, LeafOptions{CommonName: "broker", DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
	cli := newParty(t, ca, LeafOptions{CommonName: "alice", Client: true})
	for _, name := range []string{"localhost", "127.0.0.1"} {
		for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			cc := clientConfig(cli, name)
			cc.MaxVersion = v
			if serr, cerr := handshake(t, serverConfig(srv), cc); serr != nil || cerr != nil {
				t.Errorf("%s, version %x: server %v, client %v", name, v, serr, cerr)
			}
		}
	}
	// A certificate made for clients only cannot serve.
	cliAsServer := newParty(t, ca, LeafOptions{CommonName: "alice", DNSNames: []string{"localhost"}, Client: true})
	if _, cerr := handshake(t, serverConfig(cliAsServer), clientConfig(cli, "localhost")); cerr == nil {
		t.Error("client refused nothing: a client-only certificate served")
	}
}

func TestForeignCARefused(t *testing.T) {
	ca := newCA(t, "ca")
	foreign := newCA(t, "ca") // same name, other key
	srv := newParty(t, ca, LeafOptions{CommonName: "broker", DNSNames: []string{"localhost"}, Server: true})
	cli := newParty(t, ca, LeafOptions{CommonName: "alice", Client: true})
	badCli := newParty(t, foreign, LeafOptions{CommonName: "alice", Client: true})
	badSrv := newParty(t, foreign, LeafOptions{CommonName: "broker", DNSNames: []string{"localhost"}, Server: true})

	serr, cerr := handshake(t, serverConfig(srv), clientConfig(party{badCli.cert, cli.pool}, "localhost"))
	if serr == nil || cerr == nil {
		t.Errorf("client certificate from a foreign CA: server %v, client %v", serr, cerr)
	}
	serr, cerr = handshake(t, serverConfig(party{badSrv.cert, srv.pool}), clientConfig(cli, "localhost"))
	if cerr == nil {
		t.Errorf("server certificate from a foreign CA accepted (server %v)", serr)
	}
	var verr *tls.CertificateVerificationError
	if cerr != nil && !errors.As(cerr, &verr) {
		t.Errorf("client error %v is not a certificate verification error", cerr)
	}
}

func TestWriteFilesAndLoadCA(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := ca.WriteFiles(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	checkMode(t, certFile, 0o644)
	checkMode(t, keyFile, 0o600)
	noTempFiles(t, dir)

	loaded, err := LoadCA(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Cert.Equal(ca.Cert) || string(loaded.CertPEM) != string(ca.CertPEM) {
		t.Error("loaded certificate differs")
	}
	// The loaded CA issues certificates that verify against the original.
	certPEM, _, err := loaded.Issue(LeafOptions{CommonName: "x", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := parsePEMCert(t, certPEM).Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Error(err)
	}

	// Overwriting keeps the modes and leaves no temporary files.
	other := newCA(t, "other")
	if err := other.WriteFiles(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	checkMode(t, keyFile, 0o600)
	noTempFiles(t, dir)

	// Mismatched key, non-CA certificate, missing and empty files.
	otherKey := filepath.Join(dir, "other.key")
	if err := newCA(t, "third").WriteFiles(filepath.Join(dir, "third.crt"), otherKey); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(certFile, otherKey); err == nil || !strings.Contains(err.Error(), otherKey) {
		t.Errorf("mismatched key: %v", err)
	}
	leafPEM, leafKey, err := ca.Issue(LeafOptions{CommonName: "leaf", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	lc, lk, err := WriteLeaf(dir, "leaf", leafPEM, leafKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(lc, lk); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Errorf("leaf loaded as a CA: %v", err)
	}
	if _, err := LoadCA(filepath.Join(dir, "missing.crt"), keyFile); err == nil {
		t.Error("missing file accepted")
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(empty, keyFile); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty certificate file: %v", err)
	}
	if _, err := LoadCA(certFile, empty); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty key file: %v", err)
	}
}

func TestWriteLeaf(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs", "broker-1")
	ca := newCA(t, "ca")
	certPEM, keyPEM, err := ca.Issue(LeafOptions{CommonName: "broker-1", DNSNames: []string{"localhost"}, Server: true, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := WriteLeaf(dir, "broker", certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if certFile != filepath.Join(dir, "broker.crt") || keyFile != filepath.Join(dir, "broker.key") {
		t.Errorf("paths %s, %s", certFile, keyFile)
	}
	checkMode(t, certFile, 0o644)
	checkMode(t, keyFile, 0o600)
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`} {
		if _, _, err := WriteLeaf(dir, bad, certPEM, keyPEM); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	if _, _, err := WriteLeaf(dir, "x", nil, keyPEM); err == nil {
		t.Error("empty certificate accepted")
	}
	noTempFiles(t, dir)
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %v, want %v", path, got, want)
	}
}

func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}
