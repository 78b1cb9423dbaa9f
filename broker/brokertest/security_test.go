package brokertest

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	saslplain "github.com/twmb/franz-go/pkg/sasl/plain"
	saslscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/pki"
	"github.com/twinlog/twinlog/security/scram"
	"github.com/twinlog/twinlog/security/tlsfiles"
	"github.com/twinlog/twinlog/security/transport"
)

// securePKI issues a certificate per node name (CN = the name after the
// cluster prefix, e.g. "controller", "1", "client", or any other name) from
// one CA, valid for the node's name as a DNS name.
type securePKI struct {
	t     *testing.T
	dir   string
	ca    *pki.CA
	caFil string
}

func newSecurePKI(t *testing.T) *securePKI {
	dir := t.TempDir()
	ca, err := pki.NewCA("twinlog test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "ca.crt")
	if err := ca.WriteFiles(f, filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	return &securePKI{t: t, dir: dir, ca: ca, caFil: f}
}

// principalRules map "CN=<name>" to "<name>".
const principalRules = `RULE:^CN=([^,]+)$/$1/,DEFAULT`

func (p *securePKI) transport(node, cn string) *transport.Transport {
	p.t.Helper()
	cert, key, err := p.ca.Issue(pki.LeafOptions{CommonName: cn, DNSNames: []string{node}, Server: true, Client: true})
	if err != nil {
		p.t.Fatal(err)
	}
	cf, kf, err := pki.WriteLeaf(p.dir, node, cert, key)
	if err != nil {
		p.t.Fatal(err)
	}
	tr, err := transport.New(transport.Config{Files: tlsfiles.Files{CertFile: cf, KeyFile: kf, CAFile: p.caFil},
		ClientAuth: tls.RequireAndVerifyClientCert, PrincipalRules: principalRules})
	if err != nil {
		p.t.Fatal(err)
	}
	return tr
}

// TestSecureCluster: a cluster with mutual TLS on every hop and the
// authorizer on forms (brokers register, heartbeat and replicate as
// themselves, super users by broker.principal.template's names), and a
// client principal gets exactly what its ACLs grant: nothing before,
// produce after Write, fetch after Read, only describable topics in
// Metadata and DescribeTopicPartitions. A client without a certificate
// does not connect, and one broker's certificate cannot act as another.
func TestSecureCluster(t *testing.T) {
	p := newSecurePKI(t)
	c := secureCluster(t, p)
	c.CreateTopic("orders", 1, 3, nil)
	c.CreateTopic("secret", 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.MustProduce(ctx, "orders", 0, -1, []byte("by admin"))
	c.WaitFor("ISR full", func() bool {
		_, _, isr, _, ok := c.PartitionInfo("orders", 0)
		return ok && len(isr) == 3
	})

	// alice dials from her own node with her own certificate.
	c.Net.SetTransport("alice", p.transport("alice", "alice"))
	leader, _ := c.Leader("orders", 0)
	dial := func(from, addr string) *grpc.ClientConn {
		cc, err := c.Net.Dial(from)(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	alice := dial("alice", c.Addr(leader))
	produce := func() error {
		resp, err := pb.NewProduceServiceClient(alice).Produce(ctx, &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000,
			Partitions: []*pb.ProducePartitionData{{Topic: "orders", Partition: 0, Records: EncodeValues([]byte("by alice"))}}})
		if err == nil && resp.GetPartitions()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("alice's produce: %v", resp.GetPartitions()[0].GetError())
		}
		return err
	}
	fetch := func() error {
		_, err := pb.NewFetchServiceClient(alice).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, FetcherType: pb.FetcherType_FETCHER_TYPE_CONSUMER,
			MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{{Topic: "orders", FetchOffset: 0, CurrentLeaderEpoch: -1, PartitionMaxBytes: 1 << 20}}, LeaderEpochOptional: true})
		return err
	}
	denied := func(what string, err error) {
		t.Helper()
		if grpcstatus.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "TOPIC_AUTHORIZATION_FAILED") {
			t.Fatalf("%s: %v, want PermissionDenied TOPIC_AUTHORIZATION_FAILED", what, err)
		}
	}
	denied("produce without ACLs", produce())
	denied("fetch without ACLs", fetch())

	grant := func(name string, op pb.AclOperation) {
		resp, err := c.Admin().CreateAcls(ctx, &pb.CreateAclsRequest{Creations: []*pb.AclBinding{{
			ResourceType: pb.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, ResourceName: name, PatternType: pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL,
			Principal: "User:alice", Host: "*", Operation: op, Permission: pb.AclPermission_ACL_PERMISSION_ALLOW}}})
		if err != nil || resp.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("CreateAcls: %v %v", resp, err)
		}
	}
	grant("orders", pb.AclOperation_ACL_OPERATION_WRITE)
	pollFor(t, "alice may produce", func() bool { return produce() == nil })
	denied("fetch with Write only", fetch())
	grant("orders", pb.AclOperation_ACL_OPERATION_READ)
	pollFor(t, "alice may fetch", func() bool { return fetch() == nil })

	// Metadata and DescribeTopicPartitions show alice only "orders"
	// (Write implies Describe); "secret" listed is an authorization error.
	md, err := pb.NewFetchServiceClient(alice).Metadata(ctx, &pb.MetadataRequest{})
	if err != nil || len(md.GetTopics()) != 1 || md.GetTopics()[0].GetName() != "orders" {
		t.Fatalf("alice's Metadata: %v %v", md.GetTopics(), err)
	}
	md, err = pb.NewFetchServiceClient(alice).Metadata(ctx, &pb.MetadataRequest{Topics: []string{"secret", "orders"}})
	if err != nil || md.GetTopics()[0].GetError() != pb.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED || md.GetTopics()[0].GetTopicId() != "" ||
		md.GetTopics()[1].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("alice's Metadata of secret and orders: %v %v", md.GetTopics(), err)
	}
	dtp, err := pb.NewAdminServiceClient(alice).DescribeTopicPartitions(ctx, &pb.DescribeTopicPartitionsRequest{ResponsePartitionLimit: 100})
	if err != nil || len(dtp.GetTopics()) != 1 || dtp.GetTopics()[0].GetName() != "orders" {
		t.Fatalf("alice's DescribeTopicPartitions: %v %v", dtp.GetTopics(), err)
	}
	// Admin RPCs: alice may not create topics or ACLs.
	if _, err := pb.NewAdminServiceClient(dial("alice", c.ctlAddr)).CreateAcls(ctx, &pb.CreateAclsRequest{}); grpcstatus.Code(err) != codes.PermissionDenied {
		t.Fatalf("alice's CreateAcls at the controller: %v", err)
	}

	// broker-1's certificate heartbeating as broker 2 is refused.
	c.Net.SetTransport("impostor", p.transport("impostor", "broker-1"))
	_, err = pb.NewControllerServiceClient(dial("impostor", c.ctlAddr)).BrokerHeartbeat(ctx, &pb.BrokerHeartbeatRequest{BrokerId: 2, BrokerEpoch: 1})
	if grpcstatus.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "may not act as broker 2") {
		t.Fatalf("broker-1 heartbeating as broker 2: %v", err)
	}
	// No certificate (a plaintext client, and a TLS client without a
	// certificate): no RPC gets through.
	for name, creds := range map[string]grpc.DialOption{
		"plaintext":      grpc.WithTransportCredentials(insecure.NewCredentials()),
		"no certificate": grpc.WithTransportCredentials(noCertCreds(t, p.caFil)),
	} {
		cc, err := grpc.NewClient("passthrough:///"+c.Addr(leader), creds,
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
				return c.Net.DialConn(ctx, "anon", c.Addr(leader))
			}))
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = pb.NewFetchServiceClient(cc).Metadata(short, &pb.MetadataRequest{})
		cancel()
		cc.Close()
		if grpcstatus.Code(err) != codes.Unavailable {
			t.Fatalf("%s client: %v, want Unavailable (no connection)", name, err)
		}
	}
}

// noCertCreds trusts the CA but presents no certificate.
func noCertCreds(t *testing.T, caFile string) credentials.TransportCredentials {
	src, err := tlsfiles.Load(tlsfiles.Files{CAFile: caFile}, tlsfiles.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return credentials.NewTLS(src.ClientConfig("a-1"))
}

// secureCluster starts a cluster with mutual TLS and the authorizer: the
// controller, brokers ("broker-N", bound by the template) and the test
// client ("admin") are super users.
func secureCluster(t *testing.T, p *securePKI) *Cluster { return NewCluster(t, secureOptions(p)) }

// secureOptions are secureCluster's: each node's certificate named by
// nodeCN, and the authorizer with the daemons and admin as super users.
func secureOptions(p *securePKI) Options {
	supers := []string{"User:controller", "User:broker-1", "User:broker-2", "User:broker-3", "User:admin"}
	return Options{Brokers: 3,
		Transport: func(node string) *transport.Transport { return p.transport(node, nodeCN(node)) },
		Authz:     authz.Config{Enabled: true, ACL: acl.Config{SuperUsers: supers}, BrokerPrincipalTemplate: "User:broker-{id}"},
	}
}

// nodeCN is the common name (and so the User) of a node's certificate in
// the secure tests: "controller", "broker-N", and "admin" for the test
// client.
func nodeCN(node string) string {
	cn := strings.TrimPrefix(node, "a-")
	switch {
	case cn == "client":
		return "admin"
	case cn != "controller":
		return "broker-" + cn
	}
	return cn
}

// kafkaTLSDialer dials the cluster's Kafka listeners with TLS as cn (a
// certificate of the cluster's CA), verifying each broker for its name.
func (p *securePKI) kafkaTLSDialer(c *Cluster, cn string) func(ctx context.Context, network, host string) (net.Conn, error) {
	cert, key, err := p.ca.Issue(pki.LeafOptions{CommonName: cn, Client: true})
	if err != nil {
		p.t.Fatal(err)
	}
	cf, kf, err := pki.WriteLeaf(p.dir, "kafka-"+cn, cert, key)
	if err != nil {
		p.t.Fatal(err)
	}
	src, err := tlsfiles.Load(tlsfiles.Files{CertFile: cf, KeyFile: kf, CAFile: p.caFil}, tlsfiles.Options{})
	if err != nil {
		p.t.Fatal(err)
	}
	return src.TLSDialer(c.KafkaDialer())
}

// TestSecureKafka: the Kafka listener over mutual TLS with the authorizer:
// a franz-go client's principal is its certificate's; without ACLs its
// produce is TOPIC_AUTHORIZATION_FAILED and Metadata shows no topic; with
// Write and Read it produces and consumes, and still does not see the topic
// it may not describe; a plaintext Kafka client gets no answer.
func TestSecureKafka(t *testing.T) {
	p := newSecurePKI(t)
	c := secureCluster(t, p)
	c.CreateTopic("orders", 1, 3, nil)
	c.CreateTopic("secret", 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	dialAlice := p.kafkaTLSDialer(c, "alice")
	alice, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.Dialer(dialAlice),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequestRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	err = alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("no")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	topics, err := kadm.NewClient(alice).ListTopics(ctx)
	if err != nil || len(topics.Names()) != 0 {
		t.Fatalf("alice's topics without ACLs: %v %v", topics.Names(), err)
	}

	for _, op := range []pb.AclOperation{pb.AclOperation_ACL_OPERATION_WRITE, pb.AclOperation_ACL_OPERATION_READ} {
		resp, err := c.Admin().CreateAcls(ctx, &pb.CreateAclsRequest{Creations: []*pb.AclBinding{{
			ResourceType: pb.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, ResourceName: "orders", PatternType: pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL,
			Principal: "User:alice", Host: "*", Operation: op, Permission: pb.AclPermission_ACL_PERMISSION_ALLOW}}})
		if err != nil || resp.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("CreateAcls: %v %v", resp, err)
		}
	}
	pollFor(t, "alice may produce over Kafka", func() bool {
		return alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("yes")}).FirstErr() == nil
	})
	reader, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.Dialer(dialAlice),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	fetches := reader.PollRecords(ctx, 10)
	if err := fetches.Err(); err != nil || fetches.NumRecords() == 0 || string(fetches.Records()[0].Value) != "yes" {
		t.Fatalf("alice's fetch: %d records, %v", fetches.NumRecords(), err)
	}
	topics, err = kadm.NewClient(alice).ListTopics(ctx)
	if err != nil || !slices.Equal(topics.Names(), []string{"orders"}) {
		t.Fatalf("alice's topics: %v %v", topics.Names(), err)
	}

	// A plaintext Kafka client: the listener wants a TLS handshake.
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.Dialer(c.KafkaDialer()), kgo.RequestRetries(0),
		kgo.RetryTimeout(2*time.Second), kgo.RequestTimeoutOverhead(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	if _, err := kadm.NewClient(plain).ListTopics(short); err == nil {
		t.Fatal("a plaintext Kafka client got an answer")
	}
}

// saslCluster starts a secure cluster whose Kafka listeners take SCRAM and
// PLAIN, with sessions of lifetime (connections.max.reauth.ms; 0: none),
// topic orders (1 partition, RF 3), user alice (SCRAM-SHA-512, password
// s3cret) allowed to Write it, and returns it with a maker of franz-go
// clients that dial over TLS without a client certificate (only SASL
// authenticates them).
func saslCluster(t *testing.T, lifetime time.Duration) (*Cluster, func(...kgo.Opt) *kgo.Client) {
	t.Helper()
	p := newSecurePKI(t)
	opts := secureOptions(p)
	opts.Configure = func(cfg *broker.Config) {
		cfg.SASLMechanisms = []string{"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"}
		cfg.SASLMaxSessionLifetime = lifetime
	}
	c := NewCluster(t, opts)
	c.CreateTopic("orders", 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	salt := []byte("0123456789abcdefghijklmn")
	salted, err := scram.SaltedPassword(scram.SHA512, "s3cret", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Admin().AlterUserScramCredentials(ctx, &pb.AlterUserScramCredentialsRequest{Upsertions: []*pb.ScramCredentialUpsertion{{
		Name: "alice", Mechanism: pb.ScramMechanism_SCRAM_MECHANISM_SCRAM_SHA_512, Iterations: 4096, Salt: salt, SaltedPassword: salted}}})
	if err != nil || resp.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("AlterUserScramCredentials: %v %v", resp, err)
	}
	r, err := c.Admin().CreateAcls(ctx, &pb.CreateAclsRequest{Creations: []*pb.AclBinding{{
		ResourceType: pb.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, ResourceName: "orders", PatternType: pb.AclPatternType_ACL_PATTERN_TYPE_LITERAL,
		Principal: "User:alice", Host: "*", Operation: pb.AclOperation_ACL_OPERATION_WRITE, Permission: pb.AclPermission_ACL_PERMISSION_ALLOW}}})
	if err != nil || r.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("CreateAcls: %v %v", r, err)
	}

	src, err := tlsfiles.Load(tlsfiles.Files{CAFile: p.caFil}, tlsfiles.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dialTLS := src.TLSDialer(c.KafkaDialer())
	return c, func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.Dialer(dialTLS),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequestRetries(1), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
}

// TestSecureKafkaSASLSessionLifetime (KIP-368): with
// connections.max.reauth.ms, franz-go re-authenticates on its connections
// and keeps producing across several lifetimes; once alice's credential is
// deleted, her next re-authentication fails and her producer loses access
// without a new connection being needed to notice.
func TestSecureKafkaSASLSessionLifetime(t *testing.T) {
	const lifetime = 2500 * time.Millisecond
	c, client := saslCluster(t, lifetime)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alice := client(kgo.SASL(saslscram.Auth{User: "alice", Pass: "s3cret"}.AsSha512Mechanism()))
	pollFor(t, "alice may produce with SCRAM", func() bool {
		return alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("first")}).FirstErr() == nil
	})
	// Produce a record every 20 ms for two lifetimes: every one is
	// acknowledged (the sessions are renewed, not ended).
	tick := time.NewTicker(20 * time.Millisecond) // a steady producer, not a spin
	defer tick.Stop()
	n, start := 0, time.Now()
	for ; time.Since(start) < 2*lifetime; <-tick.C {
		if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("renewed")}).FirstErr(); err != nil {
			t.Fatalf("produce %d, %v after the first: %v", n, time.Since(start), err)
		}
		n++
	}
	t.Logf("%d records produced over %v of sessions lasting %v", n, 2*lifetime, lifetime)

	resp, err := c.Admin().AlterUserScramCredentials(ctx, &pb.AlterUserScramCredentialsRequest{Deletions: []*pb.ScramCredentialDeletion{{
		Name: "alice", Mechanism: pb.ScramMechanism_SCRAM_MECHANISM_SCRAM_SHA_512}}})
	if err != nil || resp.GetResults()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("delete alice's credential: %v %v", resp, err)
	}
	deleted := time.Now()
	pollFor(t, "alice's producer refused SASL_AUTHENTICATION_FAILED", func() bool {
		err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("after deletion")}).FirstErr()
		return errors.Is(err, kerr.SaslAuthenticationFailed)
	})
	t.Logf("alice's producer lost access %v after her credential was deleted (session lifetime %v)", time.Since(deleted).Round(time.Millisecond), lifetime)
}

// TestSecureKafkaSASL: with sasl.enabled.mechanisms, a Kafka client
// without a certificate authenticates with SCRAM (a user set through
// AlterUserScramCredentials, as twinctl users set-password does) and gets
// its user's ACLs; a wrong password and no SASL at all get nothing.
func TestSecureKafkaSASL(t *testing.T) {
	_, client := saslCluster(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alice := client(kgo.SASL(saslscram.Auth{User: "alice", Pass: "s3cret"}.AsSha512Mechanism()))
	pollFor(t, "alice may produce with SCRAM", func() bool {
		return alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("scram")}).FirstErr() == nil
	})
	plainAlice := client(kgo.SASL(saslplain.Auth{User: "alice", Pass: "s3cret"}.AsMechanism()))
	if err := plainAlice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("plain")}).FirstErr(); err != nil {
		t.Fatalf("alice with PLAIN over TLS: %v", err)
	}

	short, cancelShort := context.WithTimeout(ctx, 10*time.Second)
	defer cancelShort()
	wrong := client(kgo.SASL(saslscram.Auth{User: "alice", Pass: "guess"}.AsSha512Mechanism()))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(short, wrong); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	anonymous := client()
	if _, err := kadm.NewClient(anonymous).ListTopics(short); err == nil {
		t.Fatal("a client without certificate or SASL got an answer")
	}
}
