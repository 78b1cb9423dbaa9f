package brokertest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/pki"
	"github.com/twinlog/twinlog/security/tlsfiles"
	"github.com/twinlog/twinlog/security/transport"
)

// TestCertificateRotationUnderLoad: a cluster with mutual TLS on every hop
// and the authorizer on keeps serving two producers (acks=all over gRPC,
// re-dialling every few requests, and a franz-go client over the Kafka
// listeners) while every node's certificate is rotated in place, twice:
//
//  1. new leaves from the same CA, written over the same files;
//  2. a CA rotation: the CA file becomes a bundle of the old and a new CA,
//     then every node gets a leaf of the new CA, then the old CA is
//     dropped from the bundle.
//
// It proves that (a) no produce failed: every record was acknowledged,
// retries included (and no attempt failed for a TLS reason); (b) right
// after each step every new handshake, between every pair of nodes and on
// the Kafka listeners, uses the new material (the server's serial and
// issuer, the client certificate accepted by every server, a certificate of
// a CA not yet trusted refused before the bundle and accepted after it, one
// of the dropped CA refused after the drop), each Source's Reloads() counted
// the reload, and both producers' traffic moved onto connections with the
// new certificates; after the drop, the daemons' own connections (follower
// fetches, heartbeats and metadata) are cut and re-made with the new CA
// alone; (c) no daemon restarted: the same Broker and controller values
// run, Run never returned, and every broker kept its registered epoch.
//
// Files are re-read by handshakes at most every tlsfiles.MinReloadInterval
// (5 s; transport.Config does not expose it). The test calls each node's
// Source().Check() after writing its files instead: the same re-read an
// operator's reload (or the daemons' metrics ticker) triggers, and what
// makes the checks right after a step deterministic, without sleeps.
func TestCertificateRotationUnderLoad(t *testing.T) {
	p := newSecurePKI(t)
	var closed atomic.Bool
	t.Cleanup(func() { closed.Store(true) }) // runs after the cluster's Close
	r := &rotation{t: t, p: p, nodes: map[string]*rotNode{},
		log: slog.New(slog.NewTextHandler(testWriter{t, &closed}, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	supers := []string{"User:controller", "User:broker-1", "User:broker-2", "User:broker-3", "User:admin"}
	c := NewCluster(t, Options{Brokers: 3, Transport: r.transport,
		Authz: authz.Config{Enabled: true, ACL: acl.Config{SuperUsers: supers}, BrokerPrincipalTemplate: "User:broker-{id}"}})
	r.c = c
	c.CreateTopic("rot", 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The daemons as they run now, to compare at the end.
	type daemon struct {
		b  *broker.Broker
		ep twinlog.BrokerEpoch
	}
	before := map[twinlog.BrokerID]daemon{}
	for _, id := range c.IDs() {
		b := c.Broker(id)
		before[id] = daemon{b, b.BrokerEpoch()}
	}
	ctl := c.Controller()

	// Probe clients, not daemons: "stale" holds a leaf of the first CA,
	// "fresh" one of the CA that rotation 2 introduces.
	ca2, err := pki.NewCA("twinlog test CA 2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stale := r.probeSource("probe-stale", p.ca)
	fresh := r.probeSource("probe-fresh", ca2)

	r.checkHandshakes("start", p.ca)
	r.refused("a leaf of a CA nobody trusts yet", fresh)

	loadCtx, stopLoad := context.WithCancel(ctx)
	l := newRotationLoad(c, r.nodes[c.Name+"-client"].tr.Source())
	var wg sync.WaitGroup
	wg.Go(func() { l.grpcProducer(loadCtx) })
	wg.Go(func() { l.kafkaProducer(loadCtx) })
	l.waitMoved("producers under way", r)

	// 1: new leaves from the same CA, in place.
	r.step("rotation 1: new leaves of the same CA", func() {
		for _, n := range r.sortedNodes() {
			r.issue(n, p.ca)
		}
	})
	r.checkHandshakes("rotation 1", p.ca)
	l.waitMoved("producers on the rotated certificates", r)

	// 2a: trust both CAs.
	r.step("rotation 2a: CA bundle of the old and the new CA", func() {
		r.writeCAFile(p.ca, ca2)
	})
	r.checkHandshakes("rotation 2a", p.ca)
	r.accepted("a leaf of the new CA, once every node trusts it", fresh)
	r.accepted("a leaf of the old CA, still trusted", stale)
	l.waitMoved("producers with the CA bundle", r)

	// 2b: leaves of the new CA.
	r.step("rotation 2b: new leaves of the new CA", func() {
		for _, n := range r.sortedNodes() {
			r.issue(n, ca2)
		}
	})
	r.checkHandshakes("rotation 2b", ca2)
	l.waitMoved("producers on the new CA's certificates", r)

	// 2c: drop the old CA.
	r.step("rotation 2c: the old CA dropped", func() {
		r.writeCAFile(ca2)
	})
	r.checkHandshakes("rotation 2c", ca2)
	r.refused("a leaf of the dropped CA", stale)
	r.accepted("a leaf of the new CA", fresh)
	l.waitMoved("producers with the old CA dropped", r)

	// The daemons' own connections, re-made with the new CA alone: cut
	// every follower's link to the leader and every broker's link to the
	// controller (closing the connections), heal them, and wait for
	// followers to fetch records appended after the heal, and for every
	// broker to learn and replicate a new topic.
	leader, _ := c.Leader("rot", 0)
	for _, id := range c.IDs() {
		if id != leader {
			c.Cut(leader, id)
			c.Heal(leader, id)
		}
	}
	for _, id := range c.IDs() {
		c.Cut(ControllerNode, id)
		c.Heal(ControllerNode, id)
	}
	l.waitAcked("acknowledged after the links were re-made", 5)
	target := c.LogEndOffset(leader, "rot", 0)
	c.WaitFor(fmt.Sprintf("followers of rot-0 fetch past offset %d over new connections", target), func() bool {
		_, _, isr, _, ok := c.PartitionInfo("rot", 0)
		if !ok || len(isr) != 3 {
			return false
		}
		for _, id := range c.IDs() {
			if c.LogEndOffset(id, "rot", 0) < target {
				return false
			}
		}
		return true
	})
	c.CreateTopic("rot-after", 1, 3, nil)
	c.MustProduce(ctx, "rot-after", 0, -1, []byte("after rotation"))

	stopLoad()
	wg.Wait()

	// (a) Nothing failed.
	l.mu.Lock()
	t.Logf("gRPC producer: %d acknowledged over %d connections, %d failed, %d retried attempts %q",
		l.grpcOK, l.grpcDials, l.grpcFailed, l.retried, l.retryErrs)
	t.Logf("Kafka producer: %d acknowledged over %d connections, %d failed", l.kafkaOK, l.kafkaDials, l.kafkaFailed)
	if l.grpcFailed != 0 || l.kafkaFailed != 0 {
		t.Errorf("produces failed after retries: gRPC %d, Kafka %d: %q", l.grpcFailed, l.kafkaFailed, l.failErrs)
	}
	if len(l.tlsErrs) != 0 {
		t.Errorf("produce attempts failed for TLS reasons (retried or not): %q", l.tlsErrs)
	}
	l.mu.Unlock()
	for _, n := range r.sortedNodes() {
		ok, failed := n.tr.Source().Reloads()
		t.Logf("%s: %d reloads, %d failed reloads", n.name, ok, failed)
	}

	// (c) No daemon restarted.
	for _, id := range c.IDs() {
		b := c.Broker(id)
		if b == nil || b != before[id].b || len(c.node(id).done) != 0 {
			t.Errorf("broker %d was restarted or stopped during the rotation", id)
			continue
		}
		if ep := b.BrokerEpoch(); ep != before[id].ep {
			t.Errorf("broker %d re-registered: epoch %d, was %d", id, ep, before[id].ep)
		}
	}
	if c.Controller() != ctl || len(c.ctlDone) != 0 {
		t.Error("the controller was restarted or stopped during the rotation")
	}
}

// rotation keeps the cluster's nodes' transports and rotates their files.
type rotation struct {
	t     *testing.T
	p     *securePKI
	c     *Cluster
	mu    sync.Mutex
	nodes map[string]*rotNode
	// probes are the probe clients' Sources; step checks them too.
	probes []*tlsfiles.Source
	log    *slog.Logger
}

// rotNode is one node's TLS: its transport (whose Source is the one the
// daemon serves and dials with), its certificate's subject and the serial
// of the leaf its files hold.
type rotNode struct {
	name, cn string
	tr       *transport.Transport
	serial   *big.Int
}

// transport is Options.Transport: a leaf per node named as secureCluster
// names them (securePKI.transport's, with a logger that keeps the reload
// records out of the test's output unless it fails), kept for rotation.
func (r *rotation) transport(node string) *transport.Transport {
	n := &rotNode{name: node, cn: nodeCN(node)}
	r.issue(n, r.p.ca)
	tr, err := transport.New(transport.Config{
		Files:      tlsfiles.Files{CertFile: filepath.Join(r.p.dir, node+".crt"), KeyFile: filepath.Join(r.p.dir, node+".key"), CAFile: r.p.caFil},
		ClientAuth: tls.RequireAndVerifyClientCert, PrincipalRules: principalRules, Logger: r.log,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	n.tr = tr
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes[node] = n
	return tr
}

func (r *rotation) sortedNodes() []*rotNode {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*rotNode
	for _, n := range r.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *rotNode) int { return strings.Compare(a.name, b.name) })
	return out
}

// serial is the serial of the leaf host's files hold now.
func (r *rotation) serial(host string) *big.Int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.nodes[host]; n != nil {
		return n.serial
	}
	return nil
}

func rotLeafOf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM block in a certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// issue writes a new leaf of ca over n's certificate and key files
// (pki.WriteLeaf: each file replaced atomically).
func (r *rotation) issue(n *rotNode, ca *pki.CA) {
	r.t.Helper()
	cert, key, err := ca.Issue(pki.LeafOptions{CommonName: n.cn, DNSNames: []string{n.name}, Server: true, Client: true})
	if err != nil {
		r.t.Fatal(err)
	}
	if _, _, err := pki.WriteLeaf(r.p.dir, n.name, cert, key); err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	n.serial = rotLeafOf(r.t, cert).SerialNumber
	r.mu.Unlock()
}

// writeCAFile replaces the CA file every node reads with a bundle of cas,
// atomically (a temporary file renamed over it).
func (r *rotation) writeCAFile(cas ...*pki.CA) {
	r.t.Helper()
	var bundle []byte
	for _, ca := range cas {
		bundle = append(bundle, ca.CertPEM...)
	}
	f, err := os.CreateTemp(filepath.Dir(r.p.caFil), ".ca-*")
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := f.Write(bundle); err != nil {
		r.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(f.Name(), r.p.caFil); err != nil {
		r.t.Fatal(err)
	}
}

// step runs write (which rewrites files) and then has every node's Source
// check its files, as an operator's reload would: each must load them
// (Check nil) and count one more reload than before the step (a reload by
// a handshake in between counts the same).
func (r *rotation) step(what string, write func()) {
	r.t.Helper()
	nodes := r.sortedNodes()
	before := map[string]uint64{}
	for _, n := range nodes {
		before[n.name], _ = n.tr.Source().Reloads()
	}
	write()
	for _, n := range nodes {
		if err := n.tr.Source().Check(); err != nil {
			r.t.Fatalf("%s: %s: Check: %v", what, n.name, err)
		}
		if ok, _ := n.tr.Source().Reloads(); ok <= before[n.name] {
			r.t.Fatalf("%s: %s: %d reloads, %d before the step: the new files were not loaded", what, n.name, ok, before[n.name])
		}
	}
	for _, s := range r.probes {
		if err := s.Check(); err != nil {
			r.t.Fatalf("%s: probe source: Check: %v", what, err)
		}
	}
}

// tlsEndpoint is a TLS listener of the cluster and the node serving it.
type tlsEndpoint struct {
	addr, node string
	h2         bool // gRPC: offer ALPN h2, as gRPC's server requires
}

func (r *rotation) endpoints() []tlsEndpoint {
	c := r.c
	out := []tlsEndpoint{{c.ctlAddr, c.nodeName(ControllerNode), true}}
	for _, id := range c.IDs() {
		out = append(out, tlsEndpoint{c.Addr(id), c.nodeName(id), true}, tlsEndpoint{c.kafkaAddr(id), c.nodeName(id), false})
	}
	return out
}

// handshake dials e from the network node "probe" and completes a TLS
// handshake presenting src's certificate and verifying the server against
// src's CA bundle, and returns the server's leaf. It is TLS 1.2: there the
// server sends its Finished only after it has verified the client's
// certificate, so a nil error means both sides accepted (in TLS 1.3 the
// client finishes first and learns of a refusal only on its first read).
func (r *rotation) handshake(src *tlsfiles.Source, e tlsEndpoint) (*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := r.c.Net.DialConn(ctx, "probe", e.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	host, _, _ := net.SplitHostPort(e.addr)
	cfg := src.ClientConfig(host)
	cfg.MaxVersion = tls.VersionTLS12
	if e.h2 {
		cfg.NextProtos = []string{"h2"}
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	return tlsfiles.PeerLeaf(tc.ConnectionState()), nil
}

// checkHandshakes: from every node's Source (as that node dials), every
// listener of the cluster accepts the node's current certificate and
// presents its own current one, issued by ca.
func (r *rotation) checkHandshakes(what string, ca *pki.CA) {
	r.t.Helper()
	for _, from := range r.sortedNodes() {
		for _, e := range r.endpoints() {
			leaf, err := r.handshake(from.tr.Source(), e)
			if err != nil {
				r.t.Fatalf("%s: %s → %s: handshake: %v", what, from.name, e.addr, err)
			}
			if want := r.serial(e.node); leaf.SerialNumber.Cmp(want) != 0 {
				r.t.Fatalf("%s: %s → %s: server certificate serial %x, want %x (the rotated file's)", what, from.name, e.addr, leaf.SerialNumber, want)
			}
			if err := leaf.CheckSignatureFrom(ca.Cert); err != nil {
				r.t.Fatalf("%s: %s → %s: server certificate (issuer %q) not signed by %q: %v", what, from.name, e.addr, leaf.Issuer, ca.Cert.Subject, err)
			}
		}
	}
}

// probeSource is a probe client's Source: a client leaf of ca (CN=name)
// and the cluster's CA file.
func (r *rotation) probeSource(name string, ca *pki.CA) *tlsfiles.Source {
	r.t.Helper()
	cert, key, err := ca.Issue(pki.LeafOptions{CommonName: name, Client: true})
	if err != nil {
		r.t.Fatal(err)
	}
	cf, kf, err := pki.WriteLeaf(r.p.dir, name, cert, key)
	if err != nil {
		r.t.Fatal(err)
	}
	src, err := tlsfiles.Load(tlsfiles.Files{CertFile: cf, KeyFile: kf, CAFile: r.p.caFil}, tlsfiles.Options{Logger: r.log})
	if err != nil {
		r.t.Fatal(err)
	}
	r.probes = append(r.probes, src)
	return src
}

// accepted: every listener accepts src's certificate.
func (r *rotation) accepted(what string, src *tlsfiles.Source) {
	r.t.Helper()
	for _, e := range r.endpoints() {
		if _, err := r.handshake(src, e); err != nil {
			r.t.Fatalf("%s: %s refused it: %v", what, e.addr, err)
		}
	}
}

// refused: every listener refuses src's certificate (the server's alert;
// src itself accepts the server).
func (r *rotation) refused(what string, src *tlsfiles.Source) {
	r.t.Helper()
	for _, e := range r.endpoints() {
		_, err := r.handshake(src, e)
		if err == nil {
			r.t.Fatalf("%s: %s accepted it", what, e.addr)
		}
		if !strings.Contains(err.Error(), "remote error: tls: bad certificate") {
			r.t.Fatalf("%s: %s: %v, want the server's bad certificate alert", what, e.addr, err)
		}
	}
}

// rotationLoad is the traffic during the rotation and what it saw.
type rotationLoad struct {
	c       *Cluster
	src     *tlsfiles.Source // the client node's, rotated with the others
	mu      sync.Mutex
	changed chan struct{}

	grpcOK, grpcFailed, grpcDials int
	retried                       int
	retryErrs, failErrs, tlsErrs  []string
	// grpcServer and grpcSerial: the leader and its certificate's serial
	// on the connection of the last acknowledged gRPC produce.
	grpcServer string
	grpcSerial *big.Int

	kafkaOK, kafkaFailed, kafkaDials int
	kafkaConns                       []net.Conn
	// kafkaSeen: the server serials of the Kafka connections dialled
	// since the last closeKafkaConns, by host; kafkaOKGen: the
	// acknowledged Kafka produces when it had closed them all.
	kafkaSeen  map[string][]*big.Int
	kafkaOKGen int
	kafkaGen   int // closeKafkaConns calls
}

func newRotationLoad(c *Cluster, src *tlsfiles.Source) *rotationLoad {
	return &rotationLoad{c: c, src: src, changed: make(chan struct{}), kafkaSeen: map[string][]*big.Int{}}
}

// update changes the load's state under its lock and wakes waiters.
func (l *rotationLoad) update(f func()) {
	l.mu.Lock()
	f()
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// wait blocks until cond (called under the lock) holds, re-checking at
// every change of the load; it fails the test after 30 s.
func (l *rotationLoad) wait(what string, cond func() bool) {
	l.c.T.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		ok, ch := cond(), l.changed
		if !ok && (l.grpcFailed != 0 || l.kafkaFailed != 0) {
			l.c.T.Fatalf("waiting for %s: produces failed: %q", what, l.failErrs)
		}
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			l.mu.Lock()
			defer l.mu.Unlock()
			l.c.T.Fatalf("timed out waiting for %s (gRPC %d acknowledged, last from %s serial %x; Kafka %d acknowledged, dialled %v since the step)",
				what, l.grpcOK, l.grpcServer, l.grpcSerial, l.kafkaOK-l.kafkaOKGen, l.kafkaSeen)
		}
	}
}

// waitAcked waits until both producers had n more records acknowledged.
func (l *rotationLoad) waitAcked(what string, n int) {
	l.c.T.Helper()
	l.mu.Lock()
	g, k := l.grpcOK, l.kafkaOK
	l.mu.Unlock()
	l.wait(what, func() bool { return l.grpcOK >= g+n && l.kafkaOK >= k+n })
}

// waitMoved closes the Kafka client's connections (franz-go re-dials them;
// the gRPC producer re-dials by itself every few records) and waits until
// both producers had records acknowledged over connections made since, to
// servers presenting the certificates their files hold now.
func (l *rotationLoad) waitMoved(what string, r *rotation) {
	l.c.T.Helper()
	l.closeKafkaConns()
	l.wait(what, func() bool {
		if l.grpcSerial == nil || l.grpcSerial.Cmp(r.serial(l.grpcServer)) != 0 {
			return false
		}
		// ProduceSync is one record at a time: the second acknowledgement
		// counted from when every old connection was closed was sent after
		// the first came back, so over a connection dialled since.
		return l.kafkaOK >= l.kafkaOKGen+2
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.kafkaSeen) == 0 {
		l.c.T.Fatalf("%s: franz-go produced without dialling again", what)
	}
	for host, serials := range l.kafkaSeen {
		for _, s := range serials {
			if want := r.serial(host); s.Cmp(want) != 0 {
				l.c.T.Fatalf("%s: a new Kafka connection to %s got server certificate serial %x, want %x", what, host, s, want)
			}
		}
	}
}

// isTLSErr reports a certificate refused or not verified, by either side,
// which rotation must never cause. (A handshake cut short by a timeout or
// a closed connection is not one: gRPC reports those as "authentication
// handshake failed" too.)
func isTLSErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "remote error: tls") || strings.Contains(s, "tlsfiles") || strings.Contains(s, "x509") ||
		strings.Contains(s, "certificate")
}

// grpcProducer produces one record at a time with acks=all to rot-0's
// leader from the client node, as a client would: it retries a failed
// attempt (refreshing the leader, on a new connection) until a delivery
// timeout, and only then counts a failure. Every 10 records it re-dials,
// so new handshakes happen throughout the rotation.
func (l *rotationLoad) grpcProducer(ctx context.Context) {
	const reconnectEvery, deliveryTimeout = 10, 15 * time.Second
	c := l.c
	dial := c.Net.Dial(c.Name + "-client")
	var cc *grpc.ClientConn
	defer func() {
		if cc != nil {
			cc.Close()
		}
	}()
	leaderAddr := ""
	for i := 0; ctx.Err() == nil; i++ {
		deadline := time.Now().Add(deliveryTimeout)
		for attempt := 0; ; attempt++ {
			if leaderAddr == "" {
				if leader, _, _, _, ok := c.PartitionInfo("rot", 0); ok && leader >= 0 {
					leaderAddr = c.Addr(leader)
				}
			}
			var err error
			if leaderAddr != "" && (cc == nil || attempt > 0 || i%reconnectEvery == 0) {
				if cc != nil {
					cc.Close()
				}
				cc, err = dial(leaderAddr)
				if err == nil {
					l.update(func() { l.grpcDials++ })
				}
			}
			if leaderAddr == "" {
				err = errors.New("no leader")
			}
			if err == nil {
				var pr peer.Peer
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				var resp *pb.ProduceResponse
				resp, err = pb.NewProduceServiceClient(cc).Produce(actx, &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000,
					Partitions: []*pb.ProducePartitionData{{Topic: "rot", Partition: 0, Records: EncodeValues(fmt.Appendf(nil, "g%d", i))}}},
					grpc.Peer(&pr))
				cancel()
				if err == nil {
					if code := resp.GetPartitions()[0].GetError(); code != pb.ErrorCode_ERROR_CODE_NONE {
						err = ErrCode{code}
					}
				}
				if err == nil {
					info, _ := pr.AuthInfo.(credentials.TLSInfo)
					leaf := tlsfiles.PeerLeaf(info.State)
					l.update(func() {
						l.grpcOK++
						l.grpcServer = host(leaderAddr)
						if leaf != nil {
							l.grpcSerial = leaf.SerialNumber
						}
					})
					break
				}
			}
			if ctx.Err() != nil {
				return // stopping: an interrupted attempt is no failure
			}
			failed := time.Now().After(deadline)
			l.update(func() {
				l.retried++
				if len(l.retryErrs) < 10 {
					l.retryErrs = append(l.retryErrs, err.Error())
				}
				if isTLSErr(err) {
					l.tlsErrs = append(l.tlsErrs, err.Error())
				}
				if failed {
					l.grpcFailed++
					l.failErrs = append(l.failErrs, "gRPC: "+err.Error())
				}
			})
			if failed {
				break
			}
			leaderAddr = ""
			c.waitChangeOr(ctx, 50*time.Millisecond) // the client's retry backoff
		}
	}
}

// kafkaDial dials a broker's Kafka listener from KafkaClientNode over TLS
// with the client node's (rotating) Source, verifying the broker for its
// name, and records the connection and the server's serial. A dial begun
// before the last closeKafkaConns is closed and fails (franz-go dials
// again): every connection in use after closeKafkaConns began after it.
func (l *rotationLoad) kafkaDial(ctx context.Context, _, addr string) (net.Conn, error) {
	l.mu.Lock()
	gen := l.kafkaGen
	l.mu.Unlock()
	conn, err := l.c.Net.DialConn(ctx, KafkaClientNode, addr)
	if err != nil {
		return nil, err
	}
	name, _, _ := net.SplitHostPort(addr)
	tc := tls.Client(conn, l.src.ClientConfig(name))
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		if isTLSErr(err) {
			l.update(func() { l.tlsErrs = append(l.tlsErrs, "Kafka dial: "+err.Error()) })
		}
		return nil, err
	}
	leaf := tlsfiles.PeerLeaf(tc.ConnectionState())
	stale := false
	l.update(func() {
		if stale = gen != l.kafkaGen; stale {
			return
		}
		l.kafkaDials++
		l.kafkaConns = append(l.kafkaConns, tc)
		l.kafkaSeen[name] = append(l.kafkaSeen[name], leaf.SerialNumber)
	})
	if stale {
		tc.Close()
		return nil, fmt.Errorf("dial of %s begun before the connections were closed", addr)
	}
	return tc, nil
}

// closeKafkaConns closes the Kafka client's connections, as a network
// blip would; franz-go re-dials them (new handshakes) and retries what was
// in flight. Acknowledgements are counted from when every one is closed.
func (l *rotationLoad) closeKafkaConns() {
	var conns []net.Conn
	l.update(func() {
		conns, l.kafkaConns = l.kafkaConns, nil
		l.kafkaSeen = map[string][]*big.Int{}
		l.kafkaGen++
	})
	for _, c := range conns {
		c.Close()
	}
	l.update(func() { l.kafkaOKGen = l.kafkaOK })
}

// kafkaProducer produces one record at a time to rot-0 with franz-go
// (acks=all, idempotent, its own retries), failing a record only after a
// delivery timeout.
func (l *rotationLoad) kafkaProducer(ctx context.Context) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(l.c.KafkaAddrs()...), kgo.Dialer(l.kafkaDial),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(15*time.Second),
		// A lost connection makes franz-go refresh the metadata before it
		// retries, at most every MetadataMinAge (5 s by default).
		kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		l.update(func() { l.kafkaFailed++; l.failErrs = append(l.failErrs, "Kafka client: "+err.Error()) })
		return
	}
	defer cl.Close()
	for i := 0; ctx.Err() == nil; i++ {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "rot", Partition: 0, Value: fmt.Appendf(nil, "k%d", i)}).FirstErr()
		if ctx.Err() != nil {
			return
		}
		l.update(func() {
			if err != nil {
				l.kafkaFailed++
				l.failErrs = append(l.failErrs, "Kafka: "+err.Error())
				if isTLSErr(err) {
					l.tlsErrs = append(l.tlsErrs, err.Error())
				}
				return
			}
			l.kafkaOK++
		})
	}
}
