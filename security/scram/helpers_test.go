package scram

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"hash"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// This file holds a SCRAM client written for the tests from RFC 5802's
// formulas, independent of the package's code (it even has its own
// PBKDF2), so that the tests can build messages the franz-go client never
// sends.

// hashFor returns the hash constructor for m, chosen here rather than with
// the package's helper.
func hashFor(m Mechanism) func() hash.Hash {
	if m == SHA512 {
		return sha512.New
	}
	return sha256.New
}

func testHMAC(h func() hash.Hash, key, msg []byte) []byte {
	mac := hmac.New(h, key)
	mac.Write(msg)
	return mac.Sum(nil)
}

// testPBKDF2 is RFC 2898's PBKDF2 with HMAC-H, for an output of exactly one
// block: U1 = HMAC(P, S || INT(1)), Ui = HMAC(P, Ui-1), result U1 ^ ... ^ Ui.
func testPBKDF2(h func() hash.Hash, password string, salt []byte, iter int) []byte {
	u := testHMAC(h, []byte(password), append(append([]byte(nil), salt...), 0, 0, 0, 1))
	out := append([]byte(nil), u...)
	for i := 1; i < iter; i++ {
		u = testHMAC(h, []byte(password), u)
		for j := range out {
			out[j] ^= u[j]
		}
	}
	return out
}

// testKeys returns ClientKey, StoredKey and ServerKey for the password.
func testKeys(m Mechanism, password string, salt []byte, iter int) (ck, sk, srv []byte) {
	h := hashFor(m)
	salted := testPBKDF2(h, password, salt, iter)
	ck = testHMAC(h, salted, []byte("Client Key"))
	d := h()
	d.Write(ck)
	sk = d.Sum(nil)
	srv = testHMAC(h, salted, []byte("Server Key"))
	return ck, sk, srv
}

// parsedServerFirst is a server-first-message taken apart.
type parsedServerFirst struct {
	nonce string
	salt  []byte
	iter  int
}

func parseServerFirst(t testing.TB, sf []byte) parsedServerFirst {
	t.Helper()
	parts := strings.Split(string(sf), ",")
	if len(parts) != 3 || !strings.HasPrefix(parts[0], "r=") || !strings.HasPrefix(parts[1], "s=") || !strings.HasPrefix(parts[2], "i=") {
		t.Fatalf("server-first-message %q is not r=,s=,i=", sf)
	}
	salt, err := base64.StdEncoding.DecodeString(parts[1][2:])
	if err != nil {
		t.Fatalf("salt in %q: %v", sf, err)
	}
	iter, err := strconv.Atoi(parts[2][2:])
	if err != nil {
		t.Fatalf("iterations in %q: %v", sf, err)
	}
	return parsedServerFirst{nonce: parts[0][2:], salt: salt, iter: iter}
}

// clientFinal builds client-final-message for the given password, with
// extra (such as ",x=y", or "") between the nonce and the proof, and
// returns it with the server-final-message the server should answer.
func clientFinal(t testing.TB, m Mechanism, password string, gs2, bare, sf []byte, extra string) (final, wantServerFinal []byte) {
	t.Helper()
	return clientFinalNonce(t, m, password, gs2, bare, sf, parseServerFirst(t, sf).nonce, extra)
}

// clientFinalNonce is clientFinal with nonce sent as the nonce.
func clientFinalNonce(t testing.TB, m Mechanism, password string, gs2, bare, sf []byte, nonce, extra string) (final, wantServerFinal []byte) {
	t.Helper()
	p := parseServerFirst(t, sf)
	ck, sk, srv := testKeys(m, password, p.salt, p.iter)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString(gs2) + ",r=" + nonce + extra
	authMsg := string(bare) + "," + string(sf) + "," + withoutProof
	sig := testHMAC(hashFor(m), sk, []byte(authMsg))
	proof := make([]byte, len(ck))
	for i := range proof {
		proof[i] = ck[i] ^ sig[i]
	}
	final = []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof))
	wantServerFinal = []byte("v=" + base64.StdEncoding.EncodeToString(testHMAC(hashFor(m), srv, []byte(authMsg))))
	return final, wantServerFinal
}

// store is an in-memory credential store.
type store map[string]map[Mechanism]Credential

func (s store) lookup(user string, m Mechanism) (Credential, bool) {
	c, ok := s[user][m]
	return c, ok
}

// add stores a credential for password under every mechanism in ms.
func (s store) add(t testing.TB, user, password string, ms ...Mechanism) {
	t.Helper()
	for _, m := range ms {
		c, err := NewCredential(m, password, []byte("salt-of-"+user+"-"+m.String()), MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if s[user] == nil {
			s[user] = map[Mechanism]Credential{}
		}
		s[user][m] = c
	}
}

// testRandom returns a deterministic random source.
func testRandom(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	s[0] = byte(seed)
	s[1] = byte(seed >> 8)
	return rand.NewChaCha8(s)
}

// checkErr checks the error contract: err is an *Error matching exactly
// one sentinel, the wanted one.
func checkErr(t testing.TB, err, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", want)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	isAuth, isMal := errors.Is(err, ErrAuthenticationFailed), errors.Is(err, ErrMalformed)
	if isAuth == isMal {
		t.Fatalf("error %v matches ErrAuthenticationFailed %t, ErrMalformed %t: want exactly one", err, isAuth, isMal)
	}
	if want != nil && !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
	if isAuth && e.SafeMessage() != "authentication failed" {
		t.Fatalf("SafeMessage of %v is %q: must not say more than that authentication failed", err, e.SafeMessage())
	}
	if isMal && !strings.Contains(e.SafeMessage(), e.Reason) {
		t.Fatalf("SafeMessage of %v is %q: should give the reason", err, e.SafeMessage())
	}
}

// gs2AndBare splits a client-first-message after its GS2 header.
func gs2AndBare(t testing.TB, first []byte) (gs2, bare []byte) {
	t.Helper()
	i := bytes.IndexByte(first, ',')
	j := bytes.IndexByte(first[i+1:], ',')
	if i < 0 || j < 0 {
		t.Fatalf("no GS2 header in %q", first)
	}
	return first[:i+j+2], first[i+j+2:]
}
