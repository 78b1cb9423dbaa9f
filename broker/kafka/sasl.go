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
// written, unless it has authenticated (a late SaslHandshake or
// SaslAuthenticate is only refused then, as in Kafka).
func (sc *saslConn) closeAfter(reason string, err error) {
	if sc.pending() && sc.closeReason == "" {
		sc.closeReason, sc.closeErr = reason, err
	}
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
	case sc.mechanism != "":
		resp.ErrorCode = illegalSASLState
		sc.closeAfter("SaslHandshake after a successful one", nil)
	case !slices.Contains(sc.offered, req.Mechanism):
		resp.ErrorCode = unsupportedSASLMechanism
	default:
		sc.mechanism = req.Mechanism
		if m, err := scram.ParseMechanism(req.Mechanism); err == nil {
			sc.conv = scram.NewServer(m, sc.cfg.Lookup, sc.cfg.Random)
		}
	}
	return resp, nil
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
// Kafka. The session does not expire (session_lifetime_ms 0: no
// re-authentication, KIP-368).
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
	case sc.principal != "":
		return refuse(illegalSASLState, "already authenticated")
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
		sc.closeAfter("SASL authentication failed", fmt.Errorf("%s: %w", sc.mechanism, err))
		return refuse(saslAuthenticationFailed, safeMessage(err))
	}
	resp.SASLAuthBytes = out
	if done {
		sc.principal = "User:" + user
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
