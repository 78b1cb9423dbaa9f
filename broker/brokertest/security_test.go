package brokertest

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/pki"
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
	supers := []string{"User:controller", "User:broker-1", "User:broker-2", "User:broker-3", "User:admin"}
	c := NewCluster(t, Options{Brokers: 3,
		Transport: func(node string) *transport.Transport {
			cn := strings.TrimPrefix(node, "a-")
			switch {
			case cn == "client":
				cn = "admin"
			case cn != "controller":
				cn = "broker-" + cn
			}
			return p.transport(node, cn)
		},
		Authz: authz.Config{Enabled: true, ACL: acl.Config{SuperUsers: supers}, BrokerPrincipalTemplate: "User:broker-{id}"},
	})
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
