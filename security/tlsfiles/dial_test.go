package tlsfiles

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// TLSDialer verifies the server for the host it dialled, an IP address
// included: a server whose certificate names 127.0.0.1 is accepted at
// 127.0.0.1 and refused at 127.0.0.2 (the same listener, another name).
func TestTLSDialerVerifiesDialledHost(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	srv := load(t, issue(t, dir, "server", ca, serverLeaf("server"), ca), Options{})
	cli := load(t, Files{CAFile: issue(t, dir, "client", ca, clientLeaf("client"), ca).CAFile}, Options{})
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv.ServerConfig(tls.NoClientCert))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	var d net.Dialer
	dial := cli.TLSDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, ln.Addr().String()) // any name reaches the listener
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		t.Fatalf("dialled as 127.0.0.1: %v", err)
	}
	c.Close()
	if c, err := dial(ctx, "tcp", net.JoinHostPort("127.0.0.2", port)); err == nil {
		c.Close()
		t.Fatal("dialled as 127.0.0.2, a name the certificate lacks: accepted")
	}
}
