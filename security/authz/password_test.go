package authz

import (
	"context"
	"encoding/base64"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/scram"
	"github.com/twinlog/twinlog/security/transport"
)

// TestPasswordAuthentication: a request's password (Basic, over TLS,
// checked against the SCRAM credentials) makes it its user's: the ACLs and
// the handler see User:alice. A wrong password, a password in plaintext,
// a password beside a certificate's principal, and a server without users
// are Unauthenticated before anything runs.
func TestPasswordAuthentication(t *testing.T) {
	cred, err := scram.NewCredential(scram.SHA512, "s3cret", []byte("salt"), scram.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	users := func(user string, m scram.Mechanism) (scram.Credential, bool) {
		return cred, user == "alice" && m == scram.SHA512
	}
	basic := func(user, pw string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
	}
	call := func(c *Checker, ctx context.Context, header string) (string, error) {
		if header != "" {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(AuthorizationHeader, header))
		}
		var seen string
		_, err := c.UnaryInterceptor()(ctx, &pb.DeleteTopicsRequest{Names: []string{"t"}},
			&grpc.UnaryServerInfo{FullMethod: pb.AdminService_DeleteTopics_FullMethodName},
			func(ctx context.Context, _ any) (any, error) {
				seen, _ = transport.Principal(ctx)
				return nil, nil
			})
		return seen, err
	}
	tlsAnon := ctxAs("User:ANONYMOUS")
	plaintext := peer.NewContext(context.Background(), &peer.Peer{})
	c := NewChecker(Config{Enabled: true, Users: users})
	c.Update(acl.New(acl.Config{}, []acl.Binding{allow(acl.Topic, "t", acl.Delete)}))

	if seen, err := call(c, tlsAnon, basic("alice", "s3cret")); err != nil || seen != "User:alice" {
		t.Fatalf("alice with her password: %q, %v", seen, err)
	}
	if _, err := call(c, tlsAnon, ""); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("no password, anonymous: %v", err)
	}
	for _, tc := range []struct {
		name   string
		c      *Checker
		ctx    context.Context
		header string
	}{
		{"wrong password", c, tlsAnon, basic("alice", "guess")},
		{"unknown user", c, tlsAnon, basic("mallory", "s3cret")},
		{"plaintext", c, plaintext, basic("alice", "s3cret")},
		{"beside a certificate", c, ctxAs("User:bob"), basic("alice", "s3cret")},
		{"not basic", c, tlsAnon, "Bearer x"},
		{"not base64", c, tlsAnon, "Basic %%%"},
		{"no colon", c, tlsAnon, "Basic " + base64.StdEncoding.EncodeToString([]byte("alice"))},
		{"no users", NewChecker(Config{Enabled: true}), tlsAnon, basic("alice", "s3cret")},
	} {
		seen, err := call(tc.c, tc.ctx, tc.header)
		if status.Code(err) != codes.Unauthenticated || seen != "" {
			t.Errorf("%s: handler saw %q, error %v; want Unauthenticated before the handler", tc.name, seen, err)
		}
	}
}
