package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// --inprocess --tls: the cluster comes up with TLS on every hop, the load
// goes through over TLS on both APIs without an error, and a plaintext
// client gets nothing from it.
func TestInProcessTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	o := options{inprocess: true, tls: true, brokers: 3, partitions: 2, rf: 3, minISR: 2, acks: -1,
		recordSize: 1024, batchRecords: 16, inflight: 2, warmup: time.Second, duration: 300 * time.Millisecond,
		consume: true, dataDir: t.TempDir()}
	ip, err := startInProcess(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer ip.stop()
	if ip.client == nil {
		t.Fatal("--tls gave the bench's clients no TLS")
	}
	for _, kafka := range []bool{false, true} {
		ro := o
		ro.inprocess, ro.tls, ro.kafka = false, false, kafka
		ro.bootstrap, ro.kafkaBootstrap, ro.client = ip.bootstrap, ip.kafkaBootstrap, ip.client
		res, err := runOnce(ctx, ro)
		if err != nil {
			t.Fatal(err)
		}
		if res.Records == 0 || len(res.Errors) != 0 || res.Config["tls"] != true {
			t.Fatalf("kafka=%v: %d records, errors %v, tls %v", kafka, res.Records, res.Errors, res.Config["tls"])
		}
	}
	plain, err := dial(ip.bootstrap, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if _, err := pb.NewFetchServiceClient(plain).Metadata(short, &pb.MetadataRequest{}); err == nil {
		t.Fatal("a plaintext client got an answer from the --tls cluster")
	}
}

// BenchmarkHandshake is the cost of a fresh connection on loopback: a
// plain TCP connect, and a TCP connect with the TLS handshake the daemons
// make (TLS 1.3, mutual, ECDSA P-256 certificates of one CA, verified both
// ways by security/tlsfiles, no session resumption), the server being a
// security/transport listener as a broker's Kafka listener is. Each
// iteration ends when the client has read one byte the server writes after
// its side of the handshake (so after it verified the client), and both
// sides run in this process: ns/op is the latency of one connection, and
// the CPU of both ends.
//
//	go test -run '^$' -bench Handshake -benchtime 2000x ./cmd/twinbench/
func BenchmarkHandshake(b *testing.B) {
	p, err := newBenchPKI(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := p.transport("server")
	if err != nil {
		b.Fatal(err)
	}
	cli, err := p.transport("client")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name   string
		listen func(net.Listener) net.Listener
		client func(net.Conn) (net.Conn, error)
	}{
		{"tcp", func(l net.Listener) net.Listener { return l }, func(c net.Conn) (net.Conn, error) { return c, nil }},
		{"tls-mutual", srv.Listen, func(c net.Conn) (net.Conn, error) {
			tc := tls.Client(c, cli.Source().ClientConfig("127.0.0.1"))
			return tc, tc.Handshake()
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			lis := bc.listen(raw)
			defer lis.Close()
			go func() {
				for {
					c, err := lis.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						// A TLS connection handshakes on its first write.
						if _, err := c.Write([]byte{1}); err != nil {
							return
						}
						_, _ = io.Copy(io.Discard, c)
					}()
				}
			}()
			addr := raw.Addr().String()
			var one [1]byte
			b.ReportAllocs()
			for b.Loop() {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				cc, err := bc.client(c)
				if err == nil {
					_, err = io.ReadFull(cc, one[:])
				}
				cc.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
		})
	}
}
