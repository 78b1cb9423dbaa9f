package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twinlog/twinlog/security/pki"
)

// TestClientVerifiesServer is the security-critical half of ClientConfig:
// with InsecureSkipVerify set, nothing but VerifyConnection stands between
// the client and any server, so every way a server can be wrong is tried.
func TestClientVerifiesServer(t *testing.T) {
	dir := t.TempDir()
	ca, foreign := newCA(t, "ca"), newCA(t, "ca") // same name, other key
	o := Options{Logger: slog.New(slog.DiscardHandler)}
	good := load(t, issue(t, dir, "good", ca, serverLeaf("broker-1"), ca), o)
	cli := load(t, issue(t, dir, "client", ca, clientLeaf("alice"), ca), o)

	for _, tc := range []struct {
		name       string
		server     *Source
		serverName string
		want       string // in the client's error; "" means accepted
	}{
		{"DNS name", good, "localhost", ""},
		{"IP address", good, "127.0.0.1", ""},
		{"wrong DNS name", good, "broker-9.example", "broker-9.example"},
		{"wrong IP address", good, "127.0.0.2", "127.0.0.2"},
		{"foreign CA", load(t, issue(t, dir, "foreign", foreign, serverLeaf("broker-1"), ca), o), "localhost", "unknown authority"},
		{"client-only certificate", load(t, issue(t, dir, "cliasserver", ca, pki.LeafOptions{CommonName: "x", DNSNames: []string{"localhost"}, Client: true}, ca), o), "localhost", "usage"},
		{"self-signed", selfSigned(t), "localhost", "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, tc.server.ServerConfig(tls.NoClientCert))
			cfg := cli.ClientConfig(tc.serverName)
			_, _, err := srv.dial(t, cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("client error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// selfSigned is a source whose certificate is its own CA's only
// certificate, a server that vouches for itself.
func selfSigned(t *testing.T) *Source {
	t.Helper()
	dir := t.TempDir()
	ca := newCA(t, "localhost")
	f := Files{CertFile: filepath.Join(dir, "ca.crt"), KeyFile: filepath.Join(dir, "ca.key"), CAFile: filepath.Join(dir, "ca.crt")}
	if err := ca.WriteFiles(f.CertFile, f.KeyFile); err != nil {
		t.Fatal(err)
	}
	return load(t, f, Options{Logger: slog.New(slog.DiscardHandler)})
}

// TestClientServerName covers where the name checked comes from when
// ClientConfig's serverName is empty.
func TestClientServerName(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	o := Options{Logger: slog.New(slog.DiscardHandler)}
	srvSrc := load(t, issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca), o)
	cli := load(t, Files{CAFile: filepath.Join(dir, "broker-ca.pem")}, o)
	srv := serve(t, srvSrc.ServerConfig(tls.NoClientCert))
	port := srv.ln.Addr().(*net.TCPAddr).Port

	dialer := &tls.Dialer{Config: cli.ClientConfig("")}
	for _, tc := range []struct {
		addr string
		want string
	}{
		// tls.Dialer fills ServerName from the host dialled.
		{net.JoinHostPort("localhost", strconv.Itoa(port)), ""},
		// An IP address is never a server name in crypto/tls: refused.
		{net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), "no server name"},
	} {
		c, err := dialer.Dial("tcp", tc.addr)
		if err == nil {
			// Drain the server's byte so its handshake outcome is reported.
			c.Read(make([]byte, 1))
			c.Close()
		}
		<-srv.results
		if tc.want == "" && err != nil {
			t.Errorf("%s: %v", tc.addr, err)
		}
		if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: error %v, want one containing %q", tc.addr, err, tc.want)
		}
	}

	// A name set on a copy of the config (as gRPC does from the target's
	// authority) is the one checked.
	cfg := cli.ClientConfig("").Clone()
	cfg.ServerName = "broker-9.example"
	if _, _, err := srv.dial(t, cfg); err == nil || !strings.Contains(err.Error(), "broker-9.example") {
		t.Errorf("name set on a clone: %v", err)
	}
	cfg.ServerName = "localhost"
	if _, _, err := srv.dial(t, cfg); err != nil {
		t.Errorf("name set on a clone: %v", err)
	}
	// Nothing set anywhere: refused.
	if _, _, err := srv.dial(t, cli.ClientConfig("")); err == nil || !strings.Contains(err.Error(), "no server name") {
		t.Errorf("no name: %v", err)
	}
}

func TestServerVerifiesClient(t *testing.T) {
	dir := t.TempDir()
	ca, foreign := newCA(t, "ca"), newCA(t, "ca")
	o := Options{Logger: slog.New(slog.DiscardHandler)}
	srvSrc := load(t, issue(t, dir, "broker", ca, serverLeaf("broker-1"), ca), o)
	alice := load(t, issue(t, dir, "alice", ca, clientLeaf("alice"), ca), o)
	noCert := load(t, Files{CAFile: filepath.Join(dir, "alice-ca.pem")}, o)
	stranger := load(t, issue(t, dir, "stranger", foreign, clientLeaf("alice"), ca), o)
	serverOnly := load(t, issue(t, dir, "serveronly", ca, serverLeaf("broker-2"), ca), o)

	for _, tc := range []struct {
		auth    tls.ClientAuthType
		client  *Source
		ok      bool
		wantCN  string // the server's PeerLeaf when ok
		wantErr string // in the server's error when refused
	}{
		{tls.RequireAndVerifyClientCert, alice, true, "alice", ""},
		{tls.RequireAndVerifyClientCert, noCert, false, "", "certificate"},
		{tls.RequireAndVerifyClientCert, stranger, false, "", "unknown authority"},
		{tls.RequireAndVerifyClientCert, serverOnly, false, "", "usage"},
		{tls.VerifyClientCertIfGiven, alice, true, "alice", ""},
		{tls.VerifyClientCertIfGiven, noCert, true, "", ""},
		{tls.VerifyClientCertIfGiven, stranger, false, "", "unknown authority"},
		// The unverified modes of crypto/tls verify too.
		{tls.RequestClientCert, stranger, false, "", "unknown authority"},
		{tls.RequireAnyClientCert, stranger, false, "", "unknown authority"},
		{tls.RequireAnyClientCert, noCert, false, "", "certificate"},
		{tls.NoClientCert, alice, true, "", ""},
		{tls.NoClientCert, stranger, true, "", ""},
	} {
		srv := serve(t, srvSrc.ServerConfig(tc.auth))
		for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			cfg := tc.client.ClientConfig("localhost")
			cfg.MaxVersion = v
			_, r, cerr := srv.dial(t, cfg)
			name := tc.auth.String() + "/" + tlsVersion(v)
			if tc.ok {
				if cerr != nil || r.err != nil {
					t.Errorf("%s: refused: client %v, server %v", name, cerr, r.err)
					continue
				}
				got := ""
				if r.leaf != nil {
					got = r.leaf.Subject.CommonName
				}
				if got != tc.wantCN {
					t.Errorf("%s: PeerLeaf %q, want %q", name, got, tc.wantCN)
				}
				continue
			}
			if r.err == nil || cerr == nil || !strings.Contains(r.err.Error(), tc.wantErr) {
				t.Errorf("%s: server %v (want one containing %q), client %v", name, r.err, tc.wantErr, cerr)
			}
		}
	}
}

func tlsVersion(v uint16) string {
	if v == tls.VersionTLS12 {
		return "TLS1.2"
	}
	return "TLS1.3"
}

func TestServerWithoutCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	o := Options{Logger: slog.New(slog.DiscardHandler)}
	f := issue(t, dir, "x", ca, serverLeaf("x"), ca)
	caOnly := load(t, Files{CAFile: f.CAFile}, o)
	srv := serve(t, caOnly.ServerConfig(tls.NoClientCert))
	if _, r, _ := srv.dial(t, caOnly.ClientConfig("localhost")); r.err == nil || !strings.Contains(r.err.Error(), "no certificate to serve") {
		t.Errorf("server without a certificate: %v", r.err)
	}
}

func TestPeerLeaf(t *testing.T) {
	a := &x509.Certificate{Raw: []byte{1}}
	b := &x509.Certificate{Raw: []byte{2}}
	if PeerLeaf(tls.ConnectionState{}) != nil {
		t.Error("no certificates: not nil")
	}
	if PeerLeaf(tls.ConnectionState{PeerCertificates: []*x509.Certificate{b}}) != b {
		t.Error("peer certificate not returned")
	}
	if PeerLeaf(tls.ConnectionState{PeerCertificates: []*x509.Certificate{b}, VerifiedChains: [][]*x509.Certificate{{a}}}) != a {
		t.Error("verified chain not preferred")
	}
}
