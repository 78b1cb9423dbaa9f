package kafka

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/twinlog/twinlog/security/scram"
)

// SASL authentication (issue 17; Kafka's KIP-43 and KIP-152). With
// Config.SASL, a connection authenticates with SaslHandshake v1 and then
// SaslAuthenticate, which carries the mechanism's messages; before it
// succeeds only ApiVersions, SaslHandshake and SaslAuthenticate are
// answered, any other request closes the connection. The exchanges
// themselves are package scram's (SCRAM-SHA-256, SCRAM-SHA-512, and PLAIN
// checked against the same stored credentials). On success the
// connection's principal becomes "User:" and the SASL user, whatever
// Authorizer.Principal (the TLS certificate) said.
//
// Re-authentication (KIP-368): with SASL.MaxSessionLifetime, a session
// lasts that long. SaslAuthenticate v1+ tells the client, which must then
// re-authenticate on the same connection (SaslHandshake and
// SaslAuthenticate again, with the same mechanism, as the same user) before
// it ends; a request other than that handshake after the end closes the
// connection, as does a failed re-authentication. So a user whose
// credentials are deleted or changed keeps no connection past the
// lifetime. As in Kafka, a re-authentication may begin at most once a
// second, and while one is under way only its SaslAuthenticate may follow.

// The SASL mechanisms the listener can serve.
const (
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismPlain       = "PLAIN"
)

// SASL configures SASL authentication on the listener (Config.SASL; nil:
// none, the TLS or anonymous principal stands).
type SASL struct {
	// Mechanisms are the enabled mechanisms, in the server's preference
	// order: MechanismSCRAMSHA512, MechanismSCRAMSHA256, MechanismPlain.
	// Empty: the two SCRAM mechanisms. Names are compared exactly, as
	// Kafka does; NewServer ignores any other name (Validate reports it).
	Mechanisms []string
	// Lookup finds users' credentials (the broker's metadata image). It is
	// called concurrently, from every connection authenticating.
	Lookup scram.Lookup
	// Random is the nonce source (nil: crypto/rand.Reader; a test's must
	// be safe for concurrent use).
	Random io.Reader
	// PlainWithoutTLS allows PLAIN on connections that are not TLS (tests
	// only; PLAIN sends the password).
	PlainWithoutTLS bool
	// MaxSessionLifetime is Kafka's connections.max.reauth.ms: how long a
	// SASL authentication is good for before the client must
	// re-authenticate (KIP-368). 0: sessions do not expire (Kafka's
	// default). A principal from a client certificate does not expire.
	MaxSessionLifetime time.Duration
	// Now is the clock sessions expire by (nil: time.Now).
	Now func() time.Time
}

// Validate reports a configuration that does not mean what it says: an
// unknown or repeated mechanism name, or no Lookup (every authentication
// would fail).
func (c *SASL) Validate() error {
	seen := map[string]bool{}
	for _, m := range c.Mechanisms {
		if !knownMechanism(m) {
			return fmt.Errorf("kafka: unknown SASL mechanism %q (want %s, %s or %s)", m, MechanismSCRAMSHA512, MechanismSCRAMSHA256, MechanismPlain)
		}
		if seen[m] {
			return fmt.Errorf("kafka: SASL mechanism %s listed twice", m)
		}
		seen[m] = true
	}
	if c.Lookup == nil {
		return errors.New("kafka: SASL without a credential lookup")
	}
	if c.MaxSessionLifetime < 0 {
		return fmt.Errorf("kafka: negative SASL session lifetime %v", c.MaxSessionLifetime)
	}
	return nil
}

func knownMechanism(m string) bool {
	return m == MechanismSCRAMSHA512 || m == MechanismSCRAMSHA256 || m == MechanismPlain
}

// normalize returns a copy of c as the server uses it: known mechanisms
// only, each once (the SCRAM ones for an empty list), and a random source.
func (c *SASL) normalize() *SASL {
	n := *c
	n.Mechanisms = nil
	for _, m := range c.Mechanisms {
		if knownMechanism(m) && !slices.Contains(n.Mechanisms, m) {
			n.Mechanisms = append(n.Mechanisms, m)
		}
	}
	if len(c.Mechanisms) == 0 {
		n.Mechanisms = []string{MechanismSCRAMSHA512, MechanismSCRAMSHA256}
	}
	if n.Random == nil {
		n.Random = rand.Reader
	}
	if n.Now == nil {
		n.Now = time.Now
	}
	n.MaxSessionLifetime = max(n.MaxSessionLifetime, 0)
	return &n
}

// Kafka's SASL codes.
const (
	unsupportedSASLMechanism int16 = 33
	illegalSASLState         int16 = 34
	saslAuthenticationFailed int16 = 58
)

const (
	saslHandshakeKey    int16 = 17
	saslAuthenticateKey int16 = 36

	// maxSASLMessageBytes bounds the bytes of one SaslAuthenticate, as
	// package scram bounds a client message.
	maxSASLMessageBytes = 16 << 10
	// maxUnauthenticatedRequestBytes bounds a frame before the connection
	// has authenticated, instead of MaxRequestBytes: Kafka's
	// sasl.server.max.receive.size (512 KiB).
	maxUnauthenticatedRequestBytes = 512 << 10
)

// beforeAuthentication reports whether an unauthenticated connection may
// send a request of API key: ApiVersions, SaslHandshake and
// SaslAuthenticate, as in Kafka.
func beforeAuthentication(key int16) bool {
	return key == apiVersionsKey || key == saslHandshakeKey || key == saslAuthenticateKey
}

// saslConn is one connection's SASL state. serveConn and the SASL handlers
// use it in turn (a connection handles one request at a time).
type saslConn struct {
	cfg *SASL
	// offered are the mechanisms this connection may use: the enabled
	// ones, without PLAIN on a connection that is not TLS (unless
	// PlainWithoutTLS).
	offered []string
	// deadline is when authentication must have succeeded by.
	deadline time.Time
	// mechanism is the one a successful SaslHandshake chose ("" before),
	// conv its SCRAM exchange (nil for PLAIN).
	mechanism string
	conv      *scram.ServerConversation
	// principal is "User:" and the user once authenticated, "" before.
	principal string
	// expires is when the session ends (zero: never).
	expires time.Time
	// reauthenticating: a SaslHandshake began a re-authentication whose
	// SaslAuthenticate has not yet succeeded; reauthBegan is when the last
	// one began. badMechanism, when set, is why the re-authentication's
	// SaslAuthenticate fails (its handshake named another mechanism).
	reauthenticating bool
	reauthBegan      time.Time
	badMechanism     string
	// closeReason, when set, closes the connection once the response is
	// written, counted as "authentication"; closeErr is the internal
	// reason, for the log only.
	closeReason string
	closeErr    error
}

// newSASLConn returns the SASL state of a connection accepted at start.
func (s *Server) newSASLConn(c net.Conn, start time.Time) *saslConn {
	sc := &saslConn{cfg: s.cfg.SASL, deadline: start.Add(s.cfg.IdleTimeout)}
	_, isTLS := c.(*tls.Conn)
	for _, m := range s.cfg.SASL.Mechanisms {
		if m == MechanismPlain && !isTLS && !s.cfg.SASL.PlainWithoutTLS {
			continue
		}
		sc.offered = append(sc.offered, m)
	}
	return sc
}

// pending reports whether the connection still has to authenticate (false
// without SASL).
func (sc *saslConn) pending() bool { return sc != nil && sc.principal == "" }

// closeAfter marks the connection to be closed once the response is
// written, unless it has authenticated and is not re-authenticating (a late
// SaslHandshake or SaslAuthenticate is only refused then, as in Kafka).
func (sc *saslConn) closeAfter(reason string, err error) {
	if (sc.pending() || sc.reauthenticating) && sc.closeReason == "" {
		sc.closeReason, sc.closeErr = reason, err
	}
}

// expired reports whether an authenticated connection's session has ended
// (false without SASL or a session lifetime).
func (sc *saslConn) expired() bool {
	return sc != nil && !sc.expires.IsZero() && !sc.cfg.Now().Before(sc.expires)
}

// mayReauthenticate reports whether a SaslHandshake now begins a
// re-authentication: the session has a lifetime, none is under way, and
// the last began at least a second ago (Kafka's bound; otherwise the
// handshake is refused as on any authenticated connection).
func (sc *saslConn) mayReauthenticate() bool {
	return sc.principal != "" && !sc.expires.IsZero() && !sc.reauthenticating &&
		(sc.reauthBegan.IsZero() || sc.cfg.Now().Sub(sc.reauthBegan) >= time.Second)
}

// refuses reports whether a request of API key closes an authenticated
// connection instead of being handled, with the closed-connection reason
// (Observer) and why: after the session ended only a SaslHandshake
// (re-authenticating) is handled ("expired"), and during a
// re-authentication only its SaslAuthenticate ("authentication").
func (sc *saslConn) refuses(key int16) (reason, why string) {
	switch {
	case sc == nil || sc.pending():
	case sc.reauthenticating && key != saslAuthenticateKey:
		return "authentication", "request during SASL re-authentication"
	case !sc.reauthenticating && sc.expired() && key != saslHandshakeKey:
		return "expired", "SASL session expired without re-authentication"
	}
	return "", ""
}

// saslHandshake answers SaslHandshake (key 17, v1): it chooses the
// mechanism SaslAuthenticate will carry, one of those the connection is
// offered, which every answer lists. An unknown or disabled mechanism is
// UNSUPPORTED_SASL_MECHANISM and the client may ask again; a handshake
// after one succeeded is ILLEGAL_SASL_STATE, and closes the connection if
// it has not authenticated.
func (s *Server) saslHandshake(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	sc := requestHeader(ctx).sasl
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SetVersion(req.GetVersion())
	if sc == nil {
		resp.ErrorCode = illegalSASLState
		return resp, nil
	}
	resp.SupportedMechanisms = slices.Clone(sc.offered)
	switch {
	case sc.mayReauthenticate():
		sc.reauthenticating, sc.reauthBegan = true, sc.cfg.Now()
		switch {
		case !slices.Contains(sc.offered, req.Mechanism):
			resp.ErrorCode = unsupportedSASLMechanism
			sc.closeAfter("SASL re-authentication failed", fmt.Errorf("unsupported mechanism %q", req.Mechanism))
		case req.Mechanism != sc.mechanism:
			// As Kafka: the handshake is answered, the exchange fails.
			sc.badMechanism = fmt.Sprintf("SASL mechanism %s cannot re-authenticate a session of %s", req.Mechanism, sc.mechanism)
		default:
			sc.conv = sc.newConversation(req.Mechanism)
		}
	case sc.mechanism != "":
		resp.ErrorCode = illegalSASLState
		sc.closeAfter("SaslHandshake after a successful one", nil)
	case !slices.Contains(sc.offered, req.Mechanism):
		resp.ErrorCode = unsupportedSASLMechanism
	default:
		sc.mechanism = req.Mechanism
		sc.conv = sc.newConversation(req.Mechanism)
	}
	return resp, nil
}

// newConversation returns a SCRAM exchange for mechanism, nil for PLAIN
// (checked in one message).
func (sc *saslConn) newConversation(mechanism string) *scram.ServerConversation {
	if m, err := scram.ParseMechanism(mechanism); err == nil {
		return scram.NewServer(m, sc.cfg.Lookup, sc.cfg.Random)
	}
	return nil
}

func failSASLHandshake(kreq kmsg.Request, code int16) kmsg.Response {
	resp := kreq.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SetVersion(kreq.GetVersion())
	resp.ErrorCode = code
	return resp
}

// saslAuthenticate answers SaslAuthenticate (key 36, v0-v2): the client's
// message of the mechanism chosen, answered with the server's. A failure is
// SASL_AUTHENTICATION_FAILED with only what package scram says may be told
// (Error.SafeMessage), and closes the connection once answered, as in
// Kafka. On success v1+ answers the session's lifetime
// (SASL.MaxSessionLifetime; 0: it does not expire). A re-authentication's
// exchange must end as the same user, or it fails as above.
func (s *Server) saslAuthenticate(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	sc := requestHeader(ctx).sasl
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.SetVersion(req.GetVersion())
	refuse := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp, nil
	}
	switch {
	case sc == nil:
		return refuse(illegalSASLState, "SASL is not enabled")
	case sc.principal != "" && !sc.reauthenticating:
		return refuse(illegalSASLState, "already authenticated")
	case sc.badMechanism != "":
		sc.closeAfter("SASL re-authentication failed", nil)
		return refuse(saslAuthenticationFailed, sc.badMechanism)
	case sc.mechanism == "":
		sc.closeAfter("SaslAuthenticate before SaslHandshake", nil)
		return refuse(illegalSASLState, "SaslAuthenticate before SaslHandshake")
	case len(req.SASLAuthBytes) > maxSASLMessageBytes:
		msg := fmt.Sprintf("SASL message of %d bytes, the most is %d", len(req.SASLAuthBytes), maxSASLMessageBytes)
		sc.closeAfter("SASL authentication failed", errors.New(msg))
		return refuse(saslAuthenticationFailed, msg)
	}
	var (
		out  []byte
		done = true
		user string
		err  error
	)
	if sc.conv != nil {
		out, done, user, err = sc.conv.Step(req.SASLAuthBytes)
	} else {
		user, err = scram.VerifyPlain(req.SASLAuthBytes, sc.cfg.Lookup)
	}
	if err == nil && done && user == "" {
		err = errors.New("empty user name")
	}
	if err != nil {
		what := "SASL authentication failed"
		if sc.reauthenticating {
			what = "SASL re-authentication failed"
		}
		sc.closeAfter(what, fmt.Errorf("%s: %w", sc.mechanism, err))
		return refuse(saslAuthenticationFailed, safeMessage(err))
	}
	if !done {
		resp.SASLAuthBytes = out
		return resp, nil
	}
	principal := "User:" + user
	if sc.reauthenticating && principal != sc.principal {
		msg := fmt.Sprintf("Cannot change principals during re-authentication from %s: %s", sc.principal, principal)
		sc.closeAfter("SASL re-authentication failed", errors.New(msg))
		return refuse(saslAuthenticationFailed, msg)
	}
	resp.SASLAuthBytes = out
	sc.principal, sc.reauthenticating, sc.conv = principal, false, nil
	if life := sc.cfg.MaxSessionLifetime; life > 0 {
		sc.expires = sc.cfg.Now().Add(life)
		resp.SessionLifetimeMillis = life.Milliseconds() // v0 drops it: that client is closed at the end
	}
	return resp, nil
}

func failSASLAuthenticate(kreq kmsg.Request, code int16) kmsg.Response {
	resp := kreq.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.SetVersion(kreq.GetVersion())
	resp.ErrorCode = code
	return resp
}

// safeMessage is what a client may be told of a failed SASL exchange.
func safeMessage(err error) string {
	if se, ok := errors.AsType[*scram.Error](err); ok {
		return se.SafeMessage()
	}
	return "authentication failed"
}
