// Package transport puts TLS and identity on a daemon's connections: gRPC
// server and client credentials and the Kafka listener, all from one
// reloading tlsfiles.Source, with the peer's principal worked out once per
// connection (from its certificate, by Kafka's ssl.principal.mapping.rules)
// and carried in the connection's AuthInfo.
//
// A nil *Transport is plaintext: its credentials are insecure ones, its
// listener is the one given, and every peer is principal.Anonymous. So a
// daemon holds one *Transport whatever its configuration, and the code that
// authorizes asks Principal(ctx) the same way for both.
package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"

	"github.com/twinlog/twinlog/security/principal"
	"github.com/twinlog/twinlog/security/tlsfiles"
)

// Config is a daemon's TLS settings.
type Config struct {
	Files tlsfiles.Files
	// ClientAuth is what servers ask of callers: tls.RequireAndVerifyClientCert,
	// tls.VerifyClientCertIfGiven (no certificate: principal.Anonymous) or
	// tls.NoClientCert.
	ClientAuth tls.ClientAuthType
	// PrincipalRules is ssl.principal.mapping.rules ("" is DEFAULT).
	PrincipalRules string
	Logger         *slog.Logger
}

// ParseClientAuth maps tls.client.auth's values to crypto/tls's.
func ParseClientAuth(s string) (tls.ClientAuthType, error) {
	switch s {
	case "required":
		return tls.RequireAndVerifyClientCert, nil
	case "requested":
		return tls.VerifyClientCertIfGiven, nil
	case "none":
		return tls.NoClientCert, nil
	}
	return 0, fmt.Errorf("transport: tls.client.auth %q: allowed values are required, requested, none", s)
}

// Transport is a daemon's TLS material and principal rules. Its methods are
// safe for concurrent use; nil is plaintext.
type Transport struct {
	src        *tlsfiles.Source
	rules      principal.Rules
	clientAuth tls.ClientAuthType
}

// New loads the material and parses the rules; an error names the file or
// the rule at fault.
func New(c Config) (*Transport, error) {
	rules, err := principal.ParseRules(c.PrincipalRules)
	if err != nil {
		return nil, fmt.Errorf("transport: ssl.principal.mapping.rules: %w", err)
	}
	src, err := tlsfiles.Load(c.Files, tlsfiles.Options{Logger: c.Logger})
	if err != nil {
		return nil, err
	}
	return &Transport{src: src, rules: rules, clientAuth: c.ClientAuth}, nil
}

// Source returns the material (for the expiry and reload metrics); nil for
// a plaintext transport.
func (t *Transport) Source() *tlsfiles.Source {
	if t == nil {
		return nil
	}
	return t.src
}

// Enabled reports whether t is TLS.
func (t *Transport) Enabled() bool { return t != nil }

// ServerCredentials returns the gRPC server credentials: TLS, with each
// connection's principal in its AuthInfo. A client certificate whose
// subject no mapping rule matches fails the handshake, as in Kafka.
func (t *Transport) ServerCredentials() credentials.TransportCredentials {
	if t == nil {
		return insecure.NewCredentials()
	}
	return &serverCreds{TransportCredentials: credentials.NewTLS(t.src.ServerConfig(t.clientAuth)), t: t}
}

// ClientCredentials returns the credentials for dialling another daemon:
// this daemon's certificate as its identity, the server verified against
// the CA bundle for the dialled host, name or IP address (the target's
// host part).
func (t *Transport) ClientCredentials() credentials.TransportCredentials {
	if t == nil {
		return insecure.NewCredentials()
	}
	return &clientCreds{TransportCredentials: credentials.NewTLS(t.src.ClientConfig("")), t: t}
}

// clientCreds verifies each server against the host it was dialled by.
// crypto/tls sends no server name for an IP address, so the name to verify
// is taken from the authority for every handshake instead of from the
// connection.
type clientCreds struct {
	credentials.TransportCredentials
	t *Transport
}

func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	host, _, err := net.SplitHostPort(authority)
	if err != nil {
		host = authority
	}
	return credentials.NewTLS(c.t.src.ClientConfig(host)).ClientHandshake(ctx, authority, raw)
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	return &clientCreds{TransportCredentials: c.TransportCredentials.Clone(), t: c.t}
}

// Listen wraps a Kafka listener: TLS handshakes on accept (each connection
// handshakes on its first read, in its own goroutine); plaintext for nil.
func (t *Transport) Listen(l net.Listener) net.Listener {
	if t == nil {
		return l
	}
	return tls.NewListener(l, t.src.ServerConfig(t.clientAuth))
}

// ListenClientAuth is Listen with another client certificate policy than
// the daemon's (the Kafka listener with SASL asks for a certificate
// without requiring one).
func (t *Transport) ListenClientAuth(l net.Listener, auth tls.ClientAuthType) net.Listener {
	if t == nil {
		return l
	}
	return tls.NewListener(l, t.src.ServerConfig(auth))
}

// PrincipalOf returns the principal of a verified TLS connection: its
// certificate's subject through the mapping rules, or principal.Anonymous
// when the peer sent no certificate (only possible when ClientAuth allows
// it).
func (t *Transport) PrincipalOf(cs tls.ConnectionState) (string, error) {
	leaf := tlsfiles.PeerLeaf(cs)
	if leaf == nil {
		return principal.Anonymous, nil
	}
	return principal.FromCert(t.rules, leaf)
}

// ConnPrincipal returns the principal of a Kafka connection accepted
// through Listen, completing its handshake (bounded by ctx) if it has not
// happened yet; principal.Anonymous on a plaintext connection.
func (t *Transport) ConnPrincipal(ctx context.Context, c net.Conn) (string, error) {
	tc, ok := c.(*tls.Conn)
	if t == nil || !ok {
		return principal.Anonymous, nil
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		return "", err
	}
	return t.PrincipalOf(tc.ConnectionState())
}

// AuthInfo is a TLS connection's gRPC AuthInfo with the peer's principal.
type AuthInfo struct {
	credentials.TLSInfo
	Principal string
}

// principalKey carries a principal authenticated for one request (a
// password checked by security/authz) in its context.
type principalKey struct{}

// WithPrincipal returns ctx carrying principal as its caller's, which
// Principal then returns: for a caller that authenticated per request
// rather than with its connection's certificate.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// IsTLS reports whether the caller of a gRPC request came over TLS.
func IsTLS(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	_, tlsConn := p.AuthInfo.(AuthInfo)
	return tlsConn
}

// Principal returns the principal of the caller of a gRPC request, and
// whether it was authenticated (by its certificate, or per request:
// WithPrincipal). A plaintext connection, or a TLS one without a client
// certificate, is principal.Anonymous.
func Principal(ctx context.Context) (string, bool) {
	if p, ok := ctx.Value(principalKey{}).(string); ok {
		return p, true
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return principal.Anonymous, false
	}
	if ai, ok := p.AuthInfo.(AuthInfo); ok {
		return ai.Principal, ai.Principal != principal.Anonymous
	}
	return principal.Anonymous, false
}

// Host returns the caller's IP address as text ("" if unknown), for ACL
// host matching.
func Host(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if ta, ok := p.Addr.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		return ""
	}
	return host
}

type serverCreds struct {
	credentials.TransportCredentials
	t *Transport
}

func (s *serverCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, ai, err := s.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	info, ok := ai.(credentials.TLSInfo)
	if !ok {
		conn.Close()
		return nil, nil, fmt.Errorf("transport: unexpected auth info %T", ai)
	}
	p, err := s.t.PrincipalOf(info.State)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("transport: client certificate: %w", err)
	}
	return conn, AuthInfo{TLSInfo: info, Principal: p}, nil
}

func (s *serverCreds) Clone() credentials.TransportCredentials {
	return &serverCreds{TransportCredentials: s.TransportCredentials.Clone(), t: s.t}
}
