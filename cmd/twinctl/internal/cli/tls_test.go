package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/twinlog/twinlog/broker/brokertest"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/pki"
	"github.com/twinlog/twinlog/security/tlsfiles"
	"github.com/twinlog/twinlog/security/transport"
)

// TestTLSFlags: --tls-cert and --tls-key go together and need --tls-ca.
func TestTLSFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", "a.crt", "--tls-ca", "ca.crt"}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", "a.crt", "--tls-key", "a.key"}, "--tls-cert needs --tls-ca"},
	} {
		var out, errb bytes.Buffer
		code := Execute(context.Background(), append(tc.args, "brokers", "list"), Options{Stdout: &out, Stderr: &errb, HomeDir: t.TempDir()})
		if code != ExitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	code := Execute(context.Background(), []string{"--tls-ca", filepath.Join(t.TempDir(), "none.crt"), "brokers", "list"}, Options{Stdout: &out, Stderr: &errb, HomeDir: t.TempDir()})
	if code != ExitError || !strings.Contains(errb.String(), "none.crt") {
		t.Errorf("missing CA file: exit %d, stderr %q", code, errb.String())
	}
}

// TestTLSErrorHints: the transport errors of a TLS mismatch, as gRPC
// reports them over TCP, name the flags to fix.
func TestTLSErrorHints(t *testing.T) {
	for msg, want := range map[string]string{
		`connection error: desc = "error reading server preface: remote error: tls: certificate required"`:                     "pass --tls-cert and --tls-key",
		`connection error: desc = "transport: authentication handshake failed: tlsfiles: server certificate \"CN=x\" refused"`: "check --tls-ca",
		`connection error: desc = "error reading server preface: EOF"`:                                                         "if it runs TLS, pass --tls-ca",
		`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`:         "is the server running?",
	} {
		if err := rpcError(status.Error(codes.Unavailable, msg), "127.0.0.1:1", "list brokers"); !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", msg, err, want)
		}
	}
}

// TestTLSAgainstCluster: twinctl with a client certificate manages a
// cluster that runs mutual TLS and the authorizer: as the super user it
// creates a topic and an ACL; as a principal without ACLs it is refused
// with the authorization error; without a certificate it gets nowhere.
func TestTLSAgainstCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c, caFile, issue := secureCLICluster(t, tls.RequireAndVerifyClientCert)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cli := clusterCLIWith(ctx, t, c, "5s")
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return cli("", c.ControllerAddr(), args...)
	}
	adminCert, adminKey := issue("admin", "admin")
	admin := []string{"--tls-ca", caFile, "--tls-cert", adminCert, "--tls-key", adminKey}
	if out, errb, code := run(append(admin, "topics", "create", "orders", "--partitions", "1", "--replication-factor", "3")...); code != ExitOK {
		t.Fatalf("admin topics create: exit %d\n%s%s", code, out, errb)
	}
	if out, errb, code := run(append(admin, "acls", "add", "--allow-principal", "User:bob", "--operation", "Describe", "--topic", "orders")...); code != ExitOK {
		t.Fatalf("admin acls add: exit %d\n%s%s", code, out, errb)
	}
	out, errb, code := run(append(admin, "acls", "list", "--principal", "User:bob")...)
	if code != ExitOK || !strings.Contains(out, "User:bob") || !strings.Contains(out, "orders") {
		t.Fatalf("admin acls list: exit %d\n%s%s", code, out, errb)
	}
	bobCert, bobKey := issue("bob", "bob")
	bob := []string{"--tls-ca", caFile, "--tls-cert", bobCert, "--tls-key", bobKey}
	if out, errb, code := run(append(bob, "topics", "delete", "orders")...); code == ExitOK || !strings.Contains(out+errb, "AUTHORIZATION_FAILED") {
		t.Fatalf("bob topics delete: exit %d\n%s%s", code, out, errb)
	}
	if _, errb, code := run("brokers", "list"); code == ExitOK || !strings.Contains(errb, "--tls-ca") {
		t.Fatalf("plaintext twinctl against a TLS cluster: exit %d, %s", code, errb)
	}
	if _, errb, code := run("--tls-ca", caFile, "brokers", "list"); code == ExitOK {
		t.Fatalf("twinctl without a certificate: exit %d, %s", code, errb)
	}
}

// TestPasswordAgainstCluster: with tls.client.auth requested, twinctl
// without a certificate authenticates every RPC as a SCRAM user with
// --user and a password (set by the super user with users set-password)
// and gets that user's ACLs; a wrong password is refused as an
// authentication failure; --user needs TLS and excludes --tls-cert.
func TestPasswordAgainstCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c, caFile, issue := secureCLICluster(t, tls.VerifyClientCertIfGiven)
	dir := filepath.Dir(caFile)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cli := clusterCLIWith(ctx, t, c, "5s")
	run := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		return cli(stdin, c.ControllerAddr(), args...)
	}
	adminCert, adminKey := issue("admin", "admin")
	admin := []string{"--tls-ca", caFile, "--tls-cert", adminCert, "--tls-key", adminKey}
	pwFile := filepath.Join(dir, "alice.pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// set-password's own --password-file is not the global --user-password-file.
	if out, errb, code := run("", append(admin, "users", "set-password", "alice", "--password-file", pwFile)...); code != ExitOK {
		t.Fatalf("set-password: exit %d\n%s%s", code, out, errb)
	}
	alice := []string{"--tls-ca", caFile, "--user", "alice", "--user-password-file", pwFile}
	create := append(slices.Clone(alice), "topics", "create", "orders", "--partitions", "1", "--replication-factor", "3")
	if out, errb, code := run("", create...); code == ExitOK || !strings.Contains(out+errb, "TOPIC_AUTHORIZATION_FAILED") || !strings.Contains(out+errb, "User:alice") {
		t.Fatalf("alice without ACLs: exit %d\n%s%s", code, out, errb)
	}
	if out, errb, code := run("", append(admin, "acls", "add", "--allow-principal", "User:alice", "--operation", "Create", "--topic", "orders")...); code != ExitOK {
		t.Fatalf("acls add: exit %d\n%s%s", code, out, errb)
	}
	// The controller rebuilds its authorizer as it commits the ACL, before
	// CreateAcls answers.
	if out, errb, code := run("", create...); code != ExitOK {
		t.Fatalf("alice with Create: exit %d\n%s%s", code, out, errb)
	}
	wrong := filepath.Join(dir, "wrong.pw")
	if err := os.WriteFile(wrong, []byte("guess\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errb, code := run("", "--tls-ca", caFile, "--user", "alice", "--user-password-file", wrong, "topics", "list"); code == ExitOK || !strings.Contains(out+errb, "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("a wrong password: exit %d\n%s%s", code, out, errb)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--user", "alice", "--user-password-file", pwFile, "topics", "list"}, "needs TLS"},
		{append(slices.Clone(admin), "--user", "alice", "--user-password-file", pwFile, "topics", "list"), "two identities"},
		{[]string{"--tls-ca", caFile, "--user-password-file", pwFile, "topics", "list"}, "--user-password-file needs --user"},
	} {
		if _, errb, code := run("", tc.args...); code != ExitUsage || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: exit %d, %s", tc.args, code, errb)
		}
	}
}

// secureCLICluster starts an in-process cluster whose every node runs
// mutual TLS (clientAuth on its listeners) with a test CA's certificates
// (CN=controller, client, broker-N; a certificate's CN is its User) and the
// authorizer (those daemons and User:admin super users). It returns the
// cluster, the CA file, and issue, which writes a certificate and key for
// name with common name cn and returns their files.
func secureCLICluster(t *testing.T, clientAuth tls.ClientAuthType) (*brokertest.Cluster, string, func(name, cn string) (string, string)) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := ca.WriteFiles(caFile, filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	issue := func(name, cn string) (string, string) {
		cert, key, err := ca.Issue(pki.LeafOptions{CommonName: cn, DNSNames: []string{name}, Server: true, Client: true})
		if err != nil {
			t.Fatal(err)
		}
		cf, kf, err := pki.WriteLeaf(dir, name, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return cf, kf
	}
	c := brokertest.NewCluster(t, brokertest.Options{
		Transport: func(node string) *transport.Transport {
			cn := "broker-" + strings.TrimPrefix(node, "a-")
			if node == "a-controller" || node == "a-client" {
				cn = strings.TrimPrefix(node, "a-")
			}
			cf, kf := issue(node, cn)
			tr, err := transport.New(transport.Config{Files: tlsfiles.Files{CertFile: cf, KeyFile: kf, CAFile: caFile},
				ClientAuth: clientAuth, PrincipalRules: `RULE:^CN=([^,]+)$/$1/`})
			if err != nil {
				t.Fatal(err)
			}
			return tr
		},
		Authz: authz.Config{Enabled: true, BrokerPrincipalTemplate: "User:broker-{id}",
			ACL: acl.Config{SuperUsers: []string{"User:controller", "User:client", "User:broker-1", "User:broker-2", "User:broker-3", "User:admin"}}},
	})
	return c, caFile, issue
}
