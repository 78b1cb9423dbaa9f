package transport

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/twinlog/twinlog/security/pki"
	"github.com/twinlog/twinlog/security/principal"
	"github.com/twinlog/twinlog/security/tlsfiles"
)

// material issues a leaf for cn from ca into dir and returns its files.
func material(t *testing.T, ca *pki.CA, caFile, dir, cn string) tlsfiles.Files {
	t.Helper()
	cert, key, err := ca.Issue(pki.LeafOptions{CommonName: cn, OrganizationalUnit: []string{"twinlog"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	cf, kf, err := pki.WriteLeaf(dir, cn, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return tlsfiles.Files{CertFile: cf, KeyFile: kf, CAFile: caFile}
}

func newCA(t *testing.T, dir, name string) (*pki.CA, string) {
	t.Helper()
	ca, err := pki.NewCA(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, name+".crt")
	if err := ca.WriteFiles(f, filepath.Join(dir, name+".key")); err != nil {
		t.Fatal(err)
	}
	return ca, f
}

// principalServer records the principal of each Check.
type principalServer struct {
	healthpb.UnimplementedHealthServer
	got chan string
}

func (s *principalServer) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	p, _ := Principal(ctx)
	s.got <- p
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// TestMutualTLS: a client with a certificate of the cluster's CA reaches
// the server dialled by IP address, and the handler sees its principal
// through the mapping rules; a client without a certificate, or with one
// of another CA, does not get through, nor does a client that trusts
// another CA.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caFile := newCA(t, dir, "ca")
	other, otherFile := newCA(t, dir, "other")
	rules := `RULE:^CN=([^,]+),OU=twinlog$/$1/,DEFAULT`
	srvT, err := New(Config{Files: material(t, ca, caFile, dir, "controller"), ClientAuth: tls.RequireAndVerifyClientCert, PrincipalRules: rules})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ps := &principalServer{got: make(chan string, 1)}
	srv := grpc.NewServer(grpc.Creds(srvT.ServerCredentials()))
	healthpb.RegisterHealthServer(srv, ps)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	call := func(c *Transport) error {
		cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(c.ClientCredentials()))
		if err != nil {
			return err
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(false))
		return err
	}
	broker, err := New(Config{Files: material(t, ca, caFile, dir, "broker-1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := call(broker); err != nil {
		t.Fatalf("broker-1: %v", err)
	}
	if got := <-ps.got; got != "User:broker-1" {
		t.Fatalf("principal %q, want User:broker-1", got)
	}

	// No certificate: the handshake fails.
	noCert, err := tlsfiles.Load(tlsfiles.Files{CAFile: caFile}, tlsfiles.Options{})
	if err != nil {
		t.Fatal(err)
	}
	anon := &Transport{src: noCert}
	if err := call(anon); err == nil {
		t.Fatal("a client without a certificate got through")
	}
	// A certificate of another CA, and a client trusting another CA.
	foreign, err := New(Config{Files: material(t, other, caFile, dir, "intruder")})
	if err != nil {
		t.Fatal(err)
	}
	if err := call(foreign); err == nil {
		t.Fatal("a certificate of another CA got through")
	}
	distrust, err := New(Config{Files: material(t, ca, otherFile, dir, "broker-2")})
	if err != nil {
		t.Fatal(err)
	}
	if err := call(distrust); err == nil {
		t.Fatal("a client trusting another CA accepted the server")
	}
	select {
	case p := <-ps.got:
		t.Fatalf("a refused client reached the handler as %q", p)
	default:
	}
}

// TestPlaintext: a nil Transport is insecure credentials and the listener
// as given; callers are principal.Anonymous.
func TestPlaintext(t *testing.T) {
	var tr *Transport
	if tr.Enabled() || tr.ServerCredentials().Info().SecurityProtocol != "insecure" || tr.Source() != nil {
		t.Fatal("nil transport is not plaintext")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	if tr.Listen(lis) != lis {
		t.Fatal("nil transport wrapped the listener")
	}
	srv := grpc.NewServer(grpc.Creds(tr.ServerCredentials()))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	if p, authed := Principal(context.Background()); p != principal.Anonymous || authed {
		t.Fatalf("no peer: %q %v", p, authed)
	}
	srv.Stop()
}
