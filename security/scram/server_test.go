package scram

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"
)

// RFC 7677, section 3: SCRAM-SHA-256 for user "user", password "pencil".
const (
	rfcClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
	rfcServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	rfcServerFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	rfcClientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	rfcServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
	rfcSaltBase64  = "W22ZaJ0SNY7soEsUEjb6gQ=="
	rfcPassword    = "pencil"
	rfcIterations  = 4096
	rfcUser        = "user"
	wrongRFCPasswd = "pencil!"
)

func rfcStore(t testing.TB) store {
	t.Helper()
	salt, err := base64.StdEncoding.DecodeString(rfcSaltBase64)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCredential(SHA256, rfcPassword, salt, rfcIterations)
	if err != nil {
		t.Fatal(err)
	}
	return store{rfcUser: {SHA256: c}}
}

func TestRFC7677Vector(t *testing.T) {
	s := NewServer(SHA256, rfcStore(t).lookup, strings.NewReader(rfcServerNonce))
	resp, done, user, err := s.Step([]byte(rfcClientFirst))
	if err != nil || done || user != "" {
		t.Fatalf("first step: %q, %t, %q, %v", resp, done, user, err)
	}
	if string(resp) != rfcServerFirst {
		t.Fatalf("server-first-message\n got %s\nwant %s", resp, rfcServerFirst)
	}
	resp, done, user, err = s.Step([]byte(rfcClientFinal))
	if err != nil || !done || user != rfcUser {
		t.Fatalf("final step: %q, %t, %q, %v", resp, done, user, err)
	}
	if string(resp) != rfcServerFinal {
		t.Fatalf("server-final-message\n got %s\nwant %s", resp, rfcServerFinal)
	}
	_, _, _, err = s.Step([]byte(rfcClientFinal))
	checkErr(t, err, ErrMalformed)
}

// TestRFC7677VectorTestClient checks the test's own client against the
// RFC, so that the tests built on it rest on something known.
func TestRFC7677VectorTestClient(t *testing.T) {
	gs2, bare := gs2AndBare(t, []byte(rfcClientFirst))
	final, sfin := clientFinal(t, SHA256, rfcPassword, gs2, bare, []byte(rfcServerFirst), "")
	if string(final) != rfcClientFinal || string(sfin) != rfcServerFinal {
		t.Fatalf("test client: %s / %s", final, sfin)
	}
}

// TestSHA512KnownAnswer runs a SCRAM-SHA-512 exchange whose every message is
// computed by the test's own client from the formulas, and also checks the
// stored keys against them.
func TestSHA512KnownAnswer(t *testing.T) {
	const (
		password    = "pencil"
		clientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
		serverNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
		iter        = 4096
	)
	salt := []byte("a salt of some length")
	c, err := NewCredential(SHA512, password, salt, iter)
	if err != nil {
		t.Fatal(err)
	}
	_, sk, srv := testKeys(SHA512, password, salt, iter)
	if !bytes.Equal(c.StoredKey, sk) || !bytes.Equal(c.ServerKey, srv) || c.Iterations != iter || !bytes.Equal(c.Salt, salt) || c.Mechanism != SHA512 {
		t.Fatalf("credential %+v differs from the formulas: StoredKey %x ServerKey %x", c, sk, srv)
	}
	s := NewServer(SHA512, store{"user": {SHA512: c}}.lookup, strings.NewReader(serverNonce))
	resp, _, _, err := s.Step([]byte(clientFirst))
	if err != nil {
		t.Fatal(err)
	}
	wantFirst := "r=rOprNGfwEbeRWgbNEkqO" + serverNonce + ",s=" + base64.StdEncoding.EncodeToString(salt) + ",i=4096"
	if string(resp) != wantFirst {
		t.Fatalf("server-first-message\n got %s\nwant %s", resp, wantFirst)
	}
	gs2, bare := gs2AndBare(t, []byte(clientFirst))
	final, wantFinal := clientFinal(t, SHA512, password, gs2, bare, resp, "")
	resp, done, user, err := s.Step(final)
	if err != nil || !done || user != "user" {
		t.Fatalf("final step: %q, %t, %q, %v", resp, done, user, err)
	}
	if !bytes.Equal(resp, wantFinal) {
		t.Fatalf("server-final-message\n got %s\nwant %s", resp, wantFinal)
	}
}

// exchange runs a whole conversation with the test client: the first
// message as given, the final one with extra before the proof.
func exchange(t testing.TB, m Mechanism, lookup Lookup, first, password, extra string) (user string, err error) {
	t.Helper()
	s := NewServer(m, lookup, testRandom(1))
	sf, _, _, err := s.Step([]byte(first))
	if err != nil {
		return "", err
	}
	gs2, bare := gs2AndBare(t, []byte(first))
	final, want := clientFinal(t, m, password, gs2, bare, sf, extra)
	resp, done, user, err := s.Step(final)
	if err != nil {
		return "", err
	}
	if !done || !bytes.Equal(resp, want) {
		t.Fatalf("final step: %q, %t; want %q", resp, done, want)
	}
	return user, nil
}

func TestAcceptedVariants(t *testing.T) {
	st := store{}
	st.add(t, "user", "pw", SHA256, SHA512)
	st.add(t, "a,b", "pw", SHA256)
	st.add(t, "x=y", "pw", SHA256)
	st.add(t, "=,=", "pw", SHA256)
	st.add(t, "jérôme", "pw", SHA256)
	for _, tc := range []struct {
		name, first, extra, user string
		m                        Mechanism
	}{
		{"plain", "n,,n=user,r=abc", "", "user", SHA256},
		{"sha512", "n,,n=user,r=abc", "", "user", SHA512},
		{"y flag", "y,,n=user,r=abc", "", "user", SHA256},
		{"authzid equal", "n,a=user,n=user,r=abc", "", "user", SHA256},
		{"unknown extension ignored", "n,,n=user,r=abc,foo=bar,Zz=a=b", "", "user", SHA256},
		{"tokenauth false", "n,,n=user,r=abc,tokenauth=false", "", "user", SHA256},
		{"final extension ignored", "n,,n=user,r=abc", ",x=y", "user", SHA256},
		{"escaped comma", "n,,n=a=2Cb,r=abc", "", "a,b", SHA256},
		{"escaped equals", "n,,n=x=3Dy,r=abc", "", "x=y", SHA256},
		{"escapes only", "n,,n==3D=2C=3D,r=abc", "", "=,=", SHA256},
		{"escaped authzid", "n,a=a=2Cb,n=a=2Cb,r=abc", "", "a,b", SHA256},
		{"utf-8 name", "n,,n=jérôme,r=abc", "", "jérôme", SHA256},
		{"printable nonce", "n,,n=user,r=!\"#$%&'()*+-./09:;<=>?@AZ[\\]^_`az{|}~", "", "user", SHA256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user, err := exchange(t, tc.m, st.lookup, tc.first, "pw", tc.extra)
			if err != nil {
				t.Fatal(err)
			}
			if user != tc.user {
				t.Fatalf("user %q, want %q", user, tc.user)
			}
		})
	}
}

func TestLookupGetsUnescapedName(t *testing.T) {
	var got []string
	lookup := func(user string, m Mechanism) (Credential, bool) {
		got = append(got, user+"/"+m.String())
		return Credential{}, false
	}
	s := NewServer(SHA512, lookup, testRandom(2))
	if _, _, _, err := s.Step([]byte("n,,n=a=2Cb=3Dc,r=abc")); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "a,b=c/SCRAM-SHA-512" {
		t.Fatalf("lookups %q", got)
	}
}

func TestMalformedFirst(t *testing.T) {
	st := store{}
	st.add(t, "user", "pw", SHA256)
	for _, tc := range []struct{ name, msg string }{
		{"empty", ""},
		{"bad flag", "x,,n=user,r=abc"},
		{"flag without comma", "nn=user,r=abc"},
		{"channel binding", "p=tls-unique,,n=user,r=abc"},
		{"channel binding exporter", "p=tls-exporter,a=user,n=user,r=abc"},
		{"missing authzid field", "n,n=user,r=abc"},
		{"gs2 header not ended", "n,a=user"},
		{"empty authzid", "n,a=,n=user,r=abc"},
		{"authzid mismatch", "n,a=admin,n=user,r=abc"},
		{"authzid bad escape", "n,a=us=er,n=user,r=abc"},
		{"wrong order", "n,,r=abc,n=user"},
		{"missing user", "n,,r=abc"},
		{"missing nonce", "n,,n=user"},
		{"nonce not second", "n,,n=user,x=y,r=abc"},
		{"empty user", "n,,n=,r=abc"},
		{"bad escape", "n,,n=a=2Xb,r=abc"},
		{"lower-case escape", "n,,n=a=2cb,r=abc"},
		{"truncated escape", "n,,n=ab=2,r=abc"},
		{"bare equals", "n,,n=a=b,r=abc"},
		{"empty nonce", "n,,n=user,r="},
		{"space in nonce", "n,,n=user,r=a c"},
		{"non-ASCII nonce", "n,,n=user,r=abcé"},
		{"extension without value", "n,,n=user,r=abc,c"},
		{"empty extension value", "n,,n=user,r=abc,x="},
		{"extension bad key", "n,,n=user,r=abc,1x=y"},
		{"trailing comma", "n,,n=user,r=abc,"},
		{"mandatory extension", "n,,m=foo,n=user,r=abc"},
		{"tokenauth", "n,,n=user,r=abc,tokenauth=true"},
		{"tokenauth upper", "n,,n=user,r=abc,tokenauth=TRUE"},
		{"tokenauth after other", "n,,n=user,r=abc,foo=bar,tokenauth=true"},
		{"not utf-8", "n,,n=\xff,r=abc"},
		{"NUL", "n,,n=us\x00er,r=abc"},
		{"too long", "n,,n=user,r=abc,x=" + strings.Repeat("y", maxMessageLen)},
		{"final message first", rfcClientFinal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(SHA256, st.lookup, testRandom(3))
			resp, done, user, err := s.Step([]byte(tc.msg))
			if resp != nil || done || user != "" {
				t.Fatalf("got %q, %t, %q with the error", resp, done, user)
			}
			checkErr(t, err, ErrMalformed)
			_, _, _, err = s.Step([]byte("n,,n=user,r=abc"))
			checkErr(t, err, ErrMalformed)
		})
	}
}

func TestMalformedFinal(t *testing.T) {
	st := store{}
	st.add(t, "user", "pw", SHA256)
	const first = "n,,n=user,r=abc"
	gs2, bare := gs2AndBare(t, []byte(first))
	for _, tc := range []struct {
		name string
		// edit turns the server-first-message and a valid
		// client-final-message into the message to send.
		edit func(nonce, valid string) string
		want error
	}{
		{"empty", func(n, v string) string { return "" }, ErrMalformed},
		{"missing proof", func(n, v string) string { return "c=biws,r=" + n }, ErrMalformed},
		{"missing nonce", func(n, v string) string { return "c=biws," + proofOf(v) }, ErrMalformed},
		{"wrong order", func(n, v string) string { return "r=" + n + ",c=biws," + proofOf(v) }, ErrMalformed},
		{"proof not last", func(n, v string) string { return "c=biws,r=" + n + "," + proofOf(v) + ",x=y" }, ErrMalformed},
		{"bad channel base64", func(n, v string) string { return "c=bi*s,r=" + n + "," + proofOf(v) }, ErrMalformed},
		{"channel binding y", func(n, v string) string { return "c=eSws,r=" + n + "," + proofOf(v) }, ErrMalformed},
		{"channel binding empty", func(n, v string) string { return "c=,r=" + n + "," + proofOf(v) }, ErrMalformed},
		{"channel binding data", func(n, v string) string {
			return "c=" + base64.StdEncoding.EncodeToString([]byte("p=tls-unique,,xxxx")) + ",r=" + n + "," + proofOf(v)
		}, ErrMalformed},
		{"wrong nonce", func(n, v string) string { return "c=biws,r=" + n + "x," + proofOf(v) }, ErrMalformed},
		{"client nonce only", func(n, v string) string { return "c=biws,r=abc," + proofOf(v) }, ErrMalformed},
		{"empty nonce", func(n, v string) string { return "c=biws,r=," + proofOf(v) }, ErrMalformed},
		{"bad extension", func(n, v string) string { return "c=biws,r=" + n + ",," + proofOf(v) }, ErrMalformed},
		{"bad proof base64", func(n, v string) string { return "c=biws,r=" + n + ",p=%%%%" }, ErrMalformed},
		{"proof with line break", func(n, v string) string {
			p := proofOf(v)
			return "c=biws,r=" + n + "," + p[:10] + "\n" + p[10:]
		}, ErrMalformed},
		{"proof unpadded", func(n, v string) string { return "c=biws,r=" + n + "," + strings.TrimRight(proofOf(v), "=") }, ErrMalformed},
		{"proof too short", func(n, v string) string {
			return "c=biws,r=" + n + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 16))
		}, ErrMalformed},
		{"proof too long", func(n, v string) string {
			return "c=biws,r=" + n + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 64))
		}, ErrMalformed},
		{"empty proof", func(n, v string) string { return "c=biws,r=" + n + ",p=" }, ErrMalformed},
		{"not utf-8", func(n, v string) string { return "c=biws,r=" + n + ",x=\xff," + proofOf(v) }, ErrMalformed},
		{"wrong proof", func(n, v string) string {
			return "c=biws,r=" + n + ",p=" + base64.StdEncoding.EncodeToString(make([]byte, 32))
		}, ErrAuthenticationFailed},
		{"proof for other messages", func(n, v string) string { return "c=biws,r=" + n + ",x=y," + proofOf(v) }, ErrAuthenticationFailed},
		{"first message again", func(n, v string) string { return first }, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(SHA256, st.lookup, testRandom(4))
			sf, _, _, err := s.Step([]byte(first))
			if err != nil {
				t.Fatal(err)
			}
			valid, _ := clientFinal(t, SHA256, "pw", gs2, bare, sf, "")
			msg := tc.edit(parseServerFirst(t, sf).nonce, string(valid))
			resp, done, user, err := s.Step([]byte(msg))
			if resp != nil || done || user != "" {
				t.Fatalf("got %q, %t, %q with the error", resp, done, user)
			}
			checkErr(t, err, tc.want)
			// A conversation is single-use: even the valid message is
			// refused now.
			_, _, _, err = s.Step(valid)
			checkErr(t, err, ErrMalformed)
		})
	}
}

// proofOf returns the "p=..." attribute of a client-final-message.
func proofOf(final string) string { return final[strings.LastIndexByte(final, ',')+1:] }

func TestWrongPassword(t *testing.T) {
	_, err := exchange(t, SHA256, rfcStore(t).lookup, rfcClientFirst, wrongRFCPasswd, "")
	checkErr(t, err, ErrAuthenticationFailed)
}

// TestUnknownUserLooksLikeKnown checks that the first answer for a user
// without a usable credential has the shape of a real one, and that the
// failure comes at the proof with the same error as a wrong password.
func TestUnknownUserLooksLikeKnown(t *testing.T) {
	good, err := NewCredential(SHA256, "pw", []byte("salt"), MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	short := good
	short.StoredKey = short.StoredKey[:8]
	lowIter := good
	lowIter.Iterations = 1000
	other := good
	other.Mechanism = SHA512
	for _, tc := range []struct {
		name   string
		lookup Lookup
	}{
		{"unknown user", func(string, Mechanism) (Credential, bool) { return Credential{}, false }},
		{"only other mechanism", store{"user": {SHA512: good}}.lookup},
		{"short stored key", store{"user": {SHA256: short}}.lookup},
		{"too few iterations", store{"user": {SHA256: lowIter}}.lookup},
		{"credential of other mechanism", store{"user": {SHA256: other}}.lookup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(SHA256, tc.lookup, testRandom(5))
			sf, done, _, err := s.Step([]byte("n,,n=user,r=abc"))
			if err != nil || done {
				t.Fatalf("first step refused: %v", err)
			}
			p := parseServerFirst(t, sf)
			if len(p.nonce) != len("abc")+nonceLen || !strings.HasPrefix(p.nonce, "abc") || !validNonce([]byte(p.nonce)) {
				t.Fatalf("nonce %q", p.nonce)
			}
			if len(p.salt) != fakeSaltLen || p.iter != MinIterations {
				t.Fatalf("salt %x, iterations %d", p.salt, p.iter)
			}
			gs2, bare := gs2AndBare(t, []byte("n,,n=user,r=abc"))
			final, _ := clientFinal(t, SHA256, "pw", gs2, bare, sf, "")
			_, _, _, err = s.Step(final)
			checkErr(t, err, ErrAuthenticationFailed)
		})
	}
}

// TestUnknownUserSaltVaries documents the limit of the pretence: the
// made-up salt is fresh for every conversation.
func TestUnknownUserSaltVaries(t *testing.T) {
	none := func(string, Mechanism) (Credential, bool) { return Credential{}, false }
	a, _, _, err := NewServer(SHA256, none, testRandom(6)).Step([]byte("n,,n=ghost,r=abc"))
	if err != nil {
		t.Fatal(err)
	}
	b, _, _, err := NewServer(SHA256, none, testRandom(7)).Step([]byte("n,,n=ghost,r=abc"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(parseServerFirst(t, a).salt, parseServerFirst(t, b).salt) {
		t.Fatal("two random sources gave the same made-up salt")
	}
}

func TestServerNonceSkipsUnusableBytes(t *testing.T) {
	random := io.MultiReader(strings.NewReader(", \x00\xff"), strings.NewReader(rfcServerNonce))
	s := NewServer(SHA256, rfcStore(t).lookup, random)
	resp, _, _, err := s.Step([]byte(rfcClientFirst))
	if err != nil {
		t.Fatal(err)
	}
	if string(resp) != rfcServerFirst {
		t.Fatalf("server-first-message %s", resp)
	}
}

func TestServerNonceDistinct(t *testing.T) {
	r := testRandom(8)
	seen := map[string]bool{}
	for range 100 {
		s := NewServer(SHA256, rfcStore(t).lookup, r)
		sf, _, _, err := s.Step([]byte(rfcClientFirst))
		if err != nil {
			t.Fatal(err)
		}
		n := parseServerFirst(t, sf).nonce
		if seen[n] || !validNonce([]byte(n)) {
			t.Fatalf("nonce %q repeated or invalid", n)
		}
		seen[n] = true
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("no entropy") }

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestRandomSourceFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		random io.Reader
		lookup Lookup
	}{
		{"error", failingReader{}, rfcStore(t).lookup},
		{"only zeros", zeroReader{}, rfcStore(t).lookup},
		{"short", strings.NewReader("abc"), rfcStore(t).lookup},
		// The nonce is there, but not the made-up salt.
		{"no salt for unknown user", strings.NewReader(rfcServerNonce), store{}.lookup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(SHA256, tc.lookup, tc.random)
			_, _, _, err := s.Step([]byte(rfcClientFirst))
			checkErr(t, err, ErrAuthenticationFailed)
		})
	}
}

func TestMisconfiguredServer(t *testing.T) {
	for _, s := range []*ServerConversation{
		NewServer(Mechanism(2), rfcStore(t).lookup, testRandom(9)),
		NewServer(Mechanism(-1), rfcStore(t).lookup, testRandom(9)),
		NewServer(SHA256, nil, testRandom(9)),
		NewServer(SHA256, rfcStore(t).lookup, nil),
	} {
		_, _, _, err := s.Step([]byte(rfcClientFirst))
		checkErr(t, err, ErrAuthenticationFailed)
	}
}

// TestServerKeepsCopies checks that the server does not keep the caller's
// buffers, nor share its own with the caller.
func TestServerKeepsCopies(t *testing.T) {
	s := NewServer(SHA256, rfcStore(t).lookup, strings.NewReader(rfcServerNonce))
	first := []byte(rfcClientFirst)
	sf, _, _, err := s.Step(first)
	if err != nil {
		t.Fatal(err)
	}
	clear(first)
	clear(sf)
	resp, done, _, err := s.Step([]byte(rfcClientFinal))
	if err != nil || !done || string(resp) != rfcServerFinal {
		t.Fatalf("%q, %t, %v", resp, done, err)
	}
}

func TestUnescapeName(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		ok      bool
	}{
		{"user", "user", true},
		{"a=2Cb", "a,b", true},
		{"a=3Db", "a=b", true},
		{"=2C=3D", ",=", true},
		{"=3D2C", "=2C", true},
		{"", "", false},
		{"=", "", false},
		{"a=", "", false},
		{"a=2", "", false},
		{"a=2c", "", false},
		{"a=20", "", false},
		{"a==2C", "", false},
	} {
		out, ok := unescapeName([]byte(tc.in))
		if out != tc.out || ok != tc.ok {
			t.Errorf("unescapeName(%q) = %q, %t; want %q, %t", tc.in, out, ok, tc.out, tc.ok)
		}
	}
}

func TestErrorText(t *testing.T) {
	e := failed("unknown user")
	if !strings.Contains(e.Error(), "unknown user") || strings.Contains(e.SafeMessage(), "unknown") {
		t.Fatalf("Error %q, SafeMessage %q", e.Error(), e.SafeMessage())
	}
	m := malformed("channel binding is not supported")
	if !strings.Contains(m.SafeMessage(), "channel binding is not supported") {
		t.Fatalf("SafeMessage %q", m.SafeMessage())
	}
}

// TestLibrdkafkaNonce: librdkafka (kcat, confluent-kafka-python) repeats
// the server-first nonce after its own client nonce; Kafka accepts a final
// nonce that ends with the server-first one, and so does the server. One
// that does not end with it is refused.
func TestLibrdkafkaNonce(t *testing.T) {
	st := store{}
	st.add(t, "user", "pencil", SHA512)
	for _, tc := range []struct {
		name  string
		nonce func(serverFirst string) string
		want  error
	}{
		{"exact", func(n string) string { return n }, nil},
		{"client nonce repeated first", func(n string) string { return "abc" + n }, nil},
		{"server nonce cut", func(n string) string { return "abc" + n[:len(n)-1] }, ErrMalformed},
	} {
		s := NewServer(SHA512, st.lookup, testRandom(1))
		first := []byte("n,,n=user,r=abc")
		sf, done, _, err := s.Step(first)
		if err != nil || done {
			t.Fatalf("%s: first step: %v", tc.name, err)
		}
		gs2, bare := gs2AndBare(t, first)
		final, wantServerFinal := clientFinalNonce(t, SHA512, "pencil", gs2, bare, sf, tc.nonce(parseServerFirst(t, sf).nonce), "")
		resp, done, user, err := s.Step(final)
		if tc.want != nil {
			checkErr(t, err, tc.want)
			continue
		}
		if err != nil || !done || user != "user" || string(resp) != string(wantServerFinal) {
			t.Errorf("%s: %q %v %q %v", tc.name, resp, done, user, err)
		}
	}
}
