package authz

import (
	"context"
	"encoding/base64"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/twinlog/twinlog/security/scram"
	"github.com/twinlog/twinlog/security/transport"
)

// AuthorizationHeader is the gRPC metadata key of a per-request password
// ("Basic " and base64 of "user:password", as HTTP's basic scheme).
const AuthorizationHeader = "authorization"

// authenticate returns ctx with the principal of a password sent with the
// request (AuthorizationHeader), checked against the users' SCRAM
// credentials (Config.Users) as SASL PLAIN checks them on the Kafka
// listener: the gRPC API's alternative to a client certificate, for the
// same SCRAM users. Without the header ctx is returned unchanged. A
// password is refused (Unauthenticated) on a connection without TLS, on
// one whose certificate already names a principal, when the checker has
// no users, or when it does not match; the answer never says which part
// was wrong.
func (c *Checker) authenticate(ctx context.Context) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(AuthorizationHeader)
	if len(vals) == 0 {
		return ctx, nil
	}
	refuse := func(why string) (context.Context, error) {
		c.logDenied(transportAttrs(ctx, why)...)
		return nil, status.Error(codes.Unauthenticated, "SASL_AUTHENTICATION_FAILED: "+why)
	}
	switch p, certified := transport.Principal(ctx); {
	case c.cfg.Users == nil:
		return refuse("this server takes no passwords")
	case !transport.IsTLS(ctx):
		return refuse("a password needs TLS")
	case certified:
		return refuse("a password on a connection whose certificate names " + p)
	case len(vals) != 1 || !strings.HasPrefix(vals[0], "Basic "):
		return refuse(`the authorization header must be one "Basic" credential`)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(vals[0], "Basic "))
	if err != nil {
		return refuse("the credential is not base64")
	}
	user, password, ok := strings.Cut(string(raw), ":")
	if !ok {
		return refuse("the credential is not user:password")
	}
	name, err := scram.VerifyPlain([]byte("\x00"+user+"\x00"+password), c.cfg.Users)
	if err != nil {
		return refuse("authentication failed")
	}
	return transport.WithPrincipal(ctx, "User:"+name), nil
}
