package principal

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/twinlog/twinlog/security/pki"
)

// issue returns a client certificate issued by a fresh pki CA.
func issue(t *testing.T, o pki.LeafOptions) *x509.Certificate {
	t.Helper()
	ca, err := pki.NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	o.Client = true
	certPEM, _, err := ca.Issue(o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withSubject returns a parsed self-signed certificate whose subject is
// the DER encoding rawSubject, to try encodings pki does not make, or,
// when crypto/x509 refuses to parse that subject, a certificate with only
// RawSubject set.
func withSubject(t *testing.T, rawSubject []byte) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		RawSubject:   rawSubject,
		NotBefore:    time.Now(),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		// crypto/x509 refuses some string types (GeneralString) that
		// other tools accept; SubjectDN needs only RawSubject.
		t.Logf("crypto/x509 does not parse this subject (%v); using RawSubject alone", err)
		return &x509.Certificate{RawSubject: rawSubject}
	}
	return c
}

// value is one attribute of a subject built by hand: its OID and the
// universal tag and content of its value.
type value struct {
	oid     string
	tag     int
	content []byte
}

func oid(t *testing.T, s string) asn1.ObjectIdentifier {
	t.Helper()
	var o asn1.ObjectIdentifier
	for _, p := range strings.Split(s, ".") {
		n := 0
		for _, c := range p {
			n = n*10 + int(c-'0')
		}
		o = append(o, n)
	}
	return o
}

// rawSubject encodes RDNs (outermost, least specific first, as in DER).
func rawSubject(t *testing.T, rdns ...[]value) []byte {
	t.Helper()
	var seq []rdnSET
	for _, rdn := range rdns {
		var set rdnSET
		for _, v := range rdn {
			set = append(set, attribute{Type: oid(t, v.oid), Value: asn1.RawValue{Class: asn1.ClassUniversal, Tag: v.tag, Bytes: v.content}})
		}
		seq = append(seq, set)
	}
	der, err := asn1.Marshal(seq)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func tlv(tag byte, content []byte) string {
	return hex.EncodeToString(append([]byte{tag, byte(len(content))}, content...))
}

func TestSubjectDNOfIssuedCertificates(t *testing.T) {
	for _, tc := range []struct {
		o    pki.LeafOptions
		want string
	}{
		{pki.LeafOptions{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"acme"}}, "CN=alice,OU=eng,O=acme"},
		{pki.LeafOptions{CommonName: "alice"}, "CN=alice"},
		{pki.LeafOptions{CommonName: "Sue, Grabbit and Runn"}, `CN=Sue\, Grabbit and Runn`},
		{pki.LeafOptions{CommonName: `a,b+c=d<e>f;g"h\i#j`}, `CN=a\,b\+c\=d\<e\>f\;g\"h\\i\#j`},
		{pki.LeafOptions{CommonName: "#admin"}, `CN=\#admin`},
		{pki.LeafOptions{CommonName: "  bob "}, `CN=\ \ bob\ `},
		{pki.LeafOptions{CommonName: " "}, `CN=\ `},
		{pki.LeafOptions{CommonName: "a b"}, `CN=a b`},
		{pki.LeafOptions{CommonName: "x\r"}, "CN=x\\\r"},
		{pki.LeafOptions{CommonName: "nul\x00byte"}, `CN=nul\00byte`},
		{pki.LeafOptions{CommonName: "Jürgen Müller", Organization: []string{"Ünïcode AG"}}, "CN=Jürgen Müller,O=Ünïcode AG"},
		// Several OUs make one multi-valued RDN in Go's encoding.
		{pki.LeafOptions{CommonName: "carol", OrganizationalUnit: []string{"eng", "ops"}}, "CN=carol,OU=eng+OU=ops"},
	} {
		c := issue(t, tc.o)
		if got := SubjectDN(c); got != tc.want {
			t.Errorf("subject %+v: SubjectDN %q, want %q", tc.o, got, tc.want)
		}
	}
}

func TestSubjectDNMultiValuedOrder(t *testing.T) {
	// pkix.Name puts all the values of one type in one RDN: the subject
	// of the multi-valued case above is two RDNs, OU+OU then CN.
	c := issue(t, pki.LeafOptions{CommonName: "carol", OrganizationalUnit: []string{"eng", "ops"}})
	var seq []rdnSET
	if _, err := asn1.Unmarshal(c.RawSubject, &seq); err != nil {
		t.Fatal(err)
	}
	if len(seq) != 2 || len(seq[0]) != 2 || len(seq[1]) != 1 {
		t.Fatalf("subject shape %v, want [[OU OU] [CN]]", seq)
	}
}

func TestSubjectDNEncodings(t *testing.T) {
	const (
		cn    = "2.5.4.3"
		ou    = "2.5.4.11"
		o     = "2.5.4.10"
		c     = "2.5.4.6"
		l     = "2.5.4.7"
		st    = "2.5.4.8"
		sa    = "2.5.4.9"
		dc    = "0.9.2342.19200300.100.1.25"
		uid   = "0.9.2342.19200300.100.1.1"
		email = "1.2.840.113549.1.9.1"
		sn    = "2.5.4.5"
	)
	bmp := func(s string) []byte {
		var b []byte
		for _, r := range s {
			b = append(b, byte(r>>8), byte(r))
		}
		return b
	}
	for _, tc := range []struct {
		name string
		rdns [][]value
		want string
	}{
		{"all keywords", [][]value{
			{{dc, 22, []byte("com")}}, {{dc, 22, []byte("example")}},
			{{c, 19, []byte("US")}}, {{st, 12, []byte("CA")}}, {{l, 12, []byte("SF")}},
			{{sa, 12, []byte("1 Main St")}}, {{o, 12, []byte("acme")}}, {{ou, 12, []byte("eng")}},
			{{uid, 12, []byte("u1")}}, {{cn, 12, []byte("alice")}},
		}, "CN=alice,UID=u1,OU=eng,O=acme,STREET=1 Main St,L=SF,ST=CA,C=US,DC=example,DC=com"},
		{"other types as OID and hex", [][]value{
			{{o, 19, []byte("acme")}},
			{{cn, 19, []byte("alice")}, {email, 22, []byte("a@b.c")}},
			{{sn, 19, []byte("42")}},
		}, "2.5.4.5=#" + tlv(19, []byte("42")) + ",CN=alice+1.2.840.113549.1.9.1=#" + tlv(22, []byte("a@b.c")) + ",O=acme"},
		{"string types", [][]value{
			{{o, 20, []byte("t61")}}, {{o, 27, []byte("general")}}, {{ou, 30, bmp("bmp é")}}, {{cn, 22, []byte("ia5")}},
		}, "CN=ia5,OU=bmp é,O=general,O=t61"},
		{"non-string value of a known type", [][]value{
			{{cn, 2, []byte{1}}}, // INTEGER 1
		}, "CN=#020101"},
		{"UniversalString is written as hex", [][]value{
			{{cn, 28, []byte{0, 0, 0, 'a'}}},
		}, "CN=#1c0400000061"},
		{"invalid UTF-8", [][]value{
			{{cn, 12, []byte{'a', 0xff, 'b'}}},
		}, "CN=a\uFFFDb"},
		{"empty value", [][]value{
			{{cn, 12, nil}},
		}, "CN="},
	} {
		cert := withSubject(t, rawSubject(t, tc.rdns...))
		if got := SubjectDN(cert); got != tc.want {
			t.Errorf("%s: SubjectDN %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSubjectDNEdgeCases(t *testing.T) {
	if SubjectDN(nil) != "" {
		t.Error("nil certificate")
	}
	// A certificate built in memory, never encoded.
	mem := &x509.Certificate{Subject: pkix.Name{CommonName: "x", Organization: []string{"o"}, Country: []string{"US"}}}
	if got := SubjectDN(mem); got != "CN=x,O=o,C=US" {
		t.Errorf("in-memory certificate: %q", got)
	}
	if got := SubjectDN(withSubject(t, rawSubject(t))); got != "" {
		t.Errorf("empty subject: %q", got)
	}
	if got := SubjectDN(&x509.Certificate{RawSubject: []byte{0x30, 0x03, 0x01}}); got != "" {
		t.Errorf("undecodable subject: %q", got)
	}
}

func TestFromCert(t *testing.T) {
	rules, err := ParseRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, RULE:^CN=([^,]+),OU=eng,.*$/$1@eng/L, DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    pki.LeafOptions
		want string
	}{
		{pki.LeafOptions{CommonName: "svc", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"acme"}}, "User:svc"},
		{pki.LeafOptions{CommonName: "Alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"acme"}}, "User:alice@eng"},
		{pki.LeafOptions{CommonName: "bob", Organization: []string{"acme"}}, "User:CN=bob,O=acme"},
	} {
		got, err := FromCert(rules, issue(t, tc.o))
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q, %v; want %q", tc.o, got, err, tc.want)
		}
	}
	if _, err := FromCert(rules, nil); err == nil {
		t.Error("nil certificate: no error")
	}
	strict, err := ParseRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromCert(strict, issue(t, pki.LeafOptions{CommonName: "bob"})); !errors.Is(err, ErrNoMatchingRule) {
		t.Errorf("no rule: %v", err)
	}
	if _, err := FromCert(Rules{}, withSubject(t, rawSubject(t))); err == nil || !strings.Contains(err.Error(), "empty name") {
		t.Errorf("empty subject: %v", err)
	}
	if _, err := FromCert(Rules{}, &x509.Certificate{RawSubject: []byte{0x30, 0x03, 0x01}}); err == nil {
		t.Error("undecodable subject: no error")
	}
	if Anonymous != "User:ANONYMOUS" {
		t.Error(Anonymous)
	}
}
