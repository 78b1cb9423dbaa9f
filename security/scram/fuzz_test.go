package scram

import (
	"bytes"
	"context"
	"testing"

	fscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// fuzzRandomSeed seeds the server's random source in FuzzServerStep, so
// that a valid conversation recorded with it stays valid.
const fuzzRandomSeed = 11

// validFranzPair records a successful franz-go SCRAM-SHA-256 conversation
// for user "user", password "pencil", against a server whose random source
// is testRandom(fuzzRandomSeed).
func validFranzPair(t testing.TB, lookup Lookup) (first, final []byte) {
	mech := fscram.Auth{User: "user", Pass: "pencil", Nonce: []byte("fuzz nonce")}.AsSha256Mechanism()
	sess, first, err := mech.Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(SHA256, lookup, testRandom(fuzzRandomSeed))
	sf, _, _, err := s.Step(first)
	if err != nil {
		t.Fatal(err)
	}
	_, final, err = sess.Challenge(sf)
	if err != nil {
		t.Fatal(err)
	}
	return first, final
}

func FuzzServerStep(f *testing.F) {
	lookup := rfcStore(f).lookup
	validFirst, validFinal := validFranzPair(f, lookup)
	f.Add(validFirst, validFinal)
	f.Add([]byte(rfcClientFirst), []byte(rfcClientFinal))
	f.Add([]byte("n,a=user,n=user,r=abc,ext=1"), []byte("c=bixhPXVzZXIs,r=abc,p=AAAA"))
	f.Add([]byte("y,,n=us=2Cer,r=x"), []byte("c=eSws,r=x,x=y,p="))
	f.Add([]byte("p=tls-unique,,n=user,r=abc"), []byte(""))
	f.Add([]byte("n,,m=x,n=user,r=abc"), []byte("c=biws"))
	f.Add([]byte(""), []byte("\x00"))
	f.Fuzz(func(t *testing.T, first, second []byte) {
		valid := bytes.Equal(first, validFirst) && bytes.Equal(second, validFinal)
		s := NewServer(SHA256, lookup, testRandom(fuzzRandomSeed))
		sf, done, user, err := s.Step(first)
		if err != nil {
			checkErr(t, err, nil)
			if sf != nil || done || user != "" {
				t.Fatalf("first step: %q, %t, %q with error %v", sf, done, user, err)
			}
			_, _, _, err = s.Step(second)
			checkErr(t, err, ErrMalformed)
			return
		}
		if done || user != "" || !bytes.HasPrefix(sf, []byte("r=")) {
			t.Fatalf("first step: %q, %t, %q", sf, done, user)
		}
		parseServerFirst(t, sf)
		resp, done, user, err := s.Step(second)
		if err != nil {
			checkErr(t, err, nil)
			if resp != nil || done || user != "" {
				t.Fatalf("final step: %q, %t, %q with error %v", resp, done, user, err)
			}
			if valid {
				t.Fatalf("recorded conversation refused: %v", err)
			}
		} else {
			if !done || user != rfcUser || !bytes.HasPrefix(resp, []byte("v=")) {
				t.Fatalf("final step: %q, %t, %q", resp, done, user)
			}
		}
		_, _, _, err = s.Step(second)
		checkErr(t, err, ErrMalformed)
	})
}

func FuzzVerifyPlain(f *testing.F) {
	lookup := rfcStore(f).lookup
	f.Add([]byte("\x00user\x00pencil"))
	f.Add([]byte("user\x00user\x00pencil"))
	f.Add([]byte("\x00user\x00pencil!"))
	f.Add([]byte("x\x00user\x00pencil"))
	f.Add([]byte("\x00\x00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		user, err := VerifyPlain(msg, lookup)
		if err != nil {
			checkErr(t, err, nil)
			if user != "" {
				t.Fatalf("user %q with error %v", user, err)
			}
			return
		}
		if user != rfcUser || (string(msg) != "\x00user\x00pencil" && string(msg) != "user\x00user\x00pencil") {
			t.Fatalf("accepted %q as %q", msg, user)
		}
	})
}
