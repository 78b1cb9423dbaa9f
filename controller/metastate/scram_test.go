package metastate

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/sha512"
	"strings"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

const (
	sha256m = twinlogv1.ScramMechanism_SCRAM_MECHANISM_SCRAM_SHA_256
	sha512m = twinlogv1.ScramMechanism_SCRAM_MECHANISM_SCRAM_SHA_512
)

func upsert(user string, m twinlogv1.ScramMechanism, iterations int32, password string) *twinlogv1.ScramCredentialUpsertion {
	salt := []byte("salt-of-" + user)
	size := 64
	if m == sha256m {
		size = 32
	}
	// The salted password as a client derives it (Kafka's AdminClient does
	// the same PBKDF2); SHA-512 for both sizes is fine for a length check.
	salted, err := pbkdf2.Key(sha512.New, password, salt, int(iterations), size)
	if err != nil {
		panic(err)
	}
	return &twinlogv1.ScramCredentialUpsertion{Name: user, Mechanism: m, Iterations: iterations, Salt: salt, SaltedPassword: salted}
}

// TestAlterUserScramCredentials: per-user results, a user with any refused
// alteration keeps its credentials, the record holds keys derived from the
// salted password (never the salted password itself), deletions of missing
// credentials are RESOURCE_NOT_FOUND, describe shows mechanisms and
// iterations only.
func TestAlterUserScramCredentials(t *testing.T) {
	s := New(Config{ClusterID: "a"})
	d, resp := s.AlterUserScramCredentials(&twinlogv1.AlterUserScramCredentialsRequest{Upsertions: []*twinlogv1.ScramCredentialUpsertion{
		upsert("alice", sha512m, 8192, "pw"), upsert("alice", sha256m, 4096, "pw"), upsert("bob", sha512m, 4096, "pw"),
		upsert("carol", sha512m, 100, "pw"),                                       // too few iterations
		upsert("dave", sha512m, 4096, "pw"), upsert("dave", sha512m, 4096, "pw2"), // twice
		upsert("", sha512m, 4096, "pw"),
		{Name: "erin", Mechanism: 7, Iterations: 4096, Salt: []byte("s"), SaltedPassword: make([]byte, 64)},
		{Name: "frank", Mechanism: sha512m, Iterations: 4096, Salt: []byte("s"), SaltedPassword: make([]byte, 3)}, // wrong length
		upsert(strings.Repeat("x", MaxUserName+1), sha512m, 4096, "pw"),
	}})
	got := map[string]twinlogv1.ErrorCode{}
	for _, r := range resp.GetResults() {
		got[r.GetUser()] = r.GetError()
		if r.GetError() != ecNone && r.GetErrorMessage() == "" {
			t.Errorf("%s: %v without a message", r.GetUser(), r.GetError())
		}
	}
	want := map[string]twinlogv1.ErrorCode{"alice": ecNone, "bob": ecNone, "carol": ecUnacceptableCredential, "dave": ecInvalid,
		"": ecInvalid, "erin": ecInvalid, "frank": ecUnacceptableCredential, strings.Repeat("x", MaxUserName+1): ecInvalid}
	for u, ec := range want {
		if got[u] != ec {
			t.Errorf("user %.10q: %v, want %v", u, got[u], ec)
		}
	}
	if len(d.GetScramCredentials()) != 3 {
		t.Fatalf("delta %v", d)
	}
	for _, r := range d.GetScramCredentials() {
		if len(r.GetStoredKey()) == 0 || len(r.GetServerKey()) == 0 || bytes.Equal(r.GetStoredKey(), upsert(r.GetName(), r.GetMechanism(), r.GetIterations(), "pw").GetSaltedPassword()) {
			t.Errorf("record %v", r)
		}
	}
	applyACL(t, s, d)

	// A user with one refused alteration keeps everything.
	d, resp = s.AlterUserScramCredentials(&twinlogv1.AlterUserScramCredentialsRequest{
		Deletions:  []*twinlogv1.ScramCredentialDeletion{{Name: "alice", Mechanism: sha256m}, {Name: "bob", Mechanism: sha256m}},
		Upsertions: []*twinlogv1.ScramCredentialUpsertion{upsert("alice", sha512m, 1, "new")},
	})
	if d != nil || resp.GetResults()[0].GetError() != ecUnacceptableCredential || resp.GetResults()[1].GetError() != ecResourceNotFound {
		t.Fatalf("refused alterations: delta %v, %v", d, resp)
	}
	d, _ = s.AlterUserScramCredentials(&twinlogv1.AlterUserScramCredentialsRequest{
		Deletions: []*twinlogv1.ScramCredentialDeletion{{Name: "alice", Mechanism: sha256m}}})
	applyACL(t, s, d)
	desc := s.DescribeUserScramCredentials(&twinlogv1.DescribeUserScramCredentialsRequest{})
	if len(desc.GetResults()) != 2 || desc.GetResults()[0].GetUser() != "alice" || len(desc.GetResults()[0].GetCredentials()) != 1 ||
		desc.GetResults()[0].GetCredentials()[0].GetIterations() != 8192 {
		t.Fatalf("describe all: %v", desc)
	}
	desc = s.DescribeUserScramCredentials(&twinlogv1.DescribeUserScramCredentialsRequest{Users: []string{"nobody", "bob"}})
	if desc.GetResults()[0].GetError() != ecResourceNotFound || desc.GetResults()[1].GetError() != ecNone {
		t.Fatalf("describe listed: %v", desc)
	}
	if desc := s.DescribeUserScramCredentials(&twinlogv1.DescribeUserScramCredentialsRequest{Users: []string{"bob", "bob"}}); desc.GetError() != ecInvalid {
		t.Fatalf("describe twice: %v", desc)
	}
}
