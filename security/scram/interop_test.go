package scram

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	fscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// These tests run franz-go's client mechanisms, code nobody here wrote,
// against the server in memory.

// runFranz drives a franz-go SCRAM session against a ServerConversation
// and returns the user the server authenticated. The client must accept
// the server's final message.
func runFranz(t *testing.T, mech sasl.Mechanism, m Mechanism, lookup Lookup) (string, error) {
	t.Helper()
	if mech.Name() != m.String() {
		t.Fatalf("franz-go mechanism %s, server %s", mech.Name(), m)
	}
	sess, first, err := mech.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(m, lookup, testRandom(10))
	sf, done, _, err := s.Step(first)
	if err != nil {
		return "", err
	}
	if done {
		t.Fatal("done after the first message")
	}
	cdone, final, err := sess.Challenge(sf)
	if err != nil || cdone {
		t.Fatalf("client refused server-first-message %q: %t, %v", sf, cdone, err)
	}
	resp, done, user, err := s.Step(final)
	if err != nil {
		return "", err
	}
	if !done {
		t.Fatal("not done after the final message")
	}
	cdone, last, err := sess.Challenge(resp)
	if err != nil || !cdone || last != nil {
		t.Fatalf("client refused server-final-message %q: %t, %q, %v", resp, cdone, last, err)
	}
	return user, nil
}

func TestFranzSCRAM(t *testing.T) {
	st := store{}
	st.add(t, "alice", "secret", SHA256, SHA512)
	st.add(t, "a,b=c", "p,=ss", SHA256, SHA512)
	st.add(t, "only256", "secret", SHA256)
	for _, m := range []Mechanism{SHA256, SHA512} {
		asMech := func(a fscram.Auth) sasl.Mechanism {
			if m == SHA512 {
				return a.AsSha512Mechanism()
			}
			return a.AsSha256Mechanism()
		}
		t.Run(m.String(), func(t *testing.T) {
			for _, tc := range []struct {
				name string
				auth fscram.Auth
				user string // "" when the server must refuse
				want error
			}{
				{"right password", fscram.Auth{User: "alice", Pass: "secret"}, "alice", nil},
				{"fixed nonce", fscram.Auth{User: "alice", Pass: "secret", Nonce: []byte("0123456789")}, "alice", nil},
				{"authzid equal", fscram.Auth{Zid: "alice", User: "alice", Pass: "secret"}, "alice", nil},
				{"escaped names", fscram.Auth{Zid: "a,b=c", User: "a,b=c", Pass: "p,=ss"}, "a,b=c", nil},
				{"wrong password", fscram.Auth{User: "alice", Pass: "Secret"}, "", ErrAuthenticationFailed},
				{"unknown user", fscram.Auth{User: "mallory", Pass: "secret"}, "", ErrAuthenticationFailed},
				{"authzid other", fscram.Auth{Zid: "admin", User: "alice", Pass: "secret"}, "", ErrMalformed},
				{"delegation token", fscram.Auth{User: "alice", Pass: "secret", IsToken: true}, "", ErrMalformed},
			} {
				t.Run(tc.name, func(t *testing.T) {
					user, err := runFranz(t, asMech(tc.auth), m, st.lookup)
					if tc.want != nil {
						checkErr(t, err, tc.want)
						return
					}
					if err != nil || user != tc.user {
						t.Fatalf("user %q, %v; want %q", user, err, tc.user)
					}
				})
			}
		})
	}
	// A user with only a SCRAM-SHA-256 credential fails SCRAM-SHA-512 as
	// an unknown user would.
	_, err := runFranz(t, fscram.Auth{User: "only256", Pass: "secret"}.AsSha512Mechanism(), SHA512, st.lookup)
	checkErr(t, err, ErrAuthenticationFailed)
}

// TestFranzSCRAMFromSaltedPassword stores the credential the way an
// AlterUserScramCredentials request would: from a salt and SaltedPassword.
func TestFranzSCRAMFromSaltedPassword(t *testing.T) {
	for _, m := range []Mechanism{SHA256, SHA512} {
		salt := []byte("0123456789abcdef01234567")
		salted := testPBKDF2(hashFor(m), "hunter2", salt, 8192)
		c, err := FromSaltedPassword(m, salted, salt, 8192)
		if err != nil {
			t.Fatal(err)
		}
		a := fscram.Auth{User: "bob", Pass: "hunter2"}
		mech := a.AsSha256Mechanism()
		if m == SHA512 {
			mech = a.AsSha512Mechanism()
		}
		user, err := runFranz(t, mech, m, store{"bob": {m: c}}.lookup)
		if err != nil || user != "bob" {
			t.Fatalf("%s: %q, %v", m, user, err)
		}
	}
}

func TestFranzPlain(t *testing.T) {
	st := store{}
	st.add(t, "alice", "secret", SHA256, SHA512)
	st.add(t, "sha256only", "secret", SHA256)
	st.add(t, "sha512only", "secret", SHA512)
	st.add(t, "a,b=c\u00e9", "p\u00e4ss", SHA256)
	for _, tc := range []struct {
		name string
		auth plain.Auth
		want error
	}{
		{"right password", plain.Auth{User: "alice", Pass: "secret"}, nil},
		{"authzid equal", plain.Auth{Zid: "alice", User: "alice", Pass: "secret"}, nil},
		{"sha256 only", plain.Auth{User: "sha256only", Pass: "secret"}, nil},
		{"sha512 only", plain.Auth{User: "sha512only", Pass: "secret"}, nil},
		{"odd names", plain.Auth{User: "a,b=c\u00e9", Pass: "p\u00e4ss"}, nil},
		{"wrong password", plain.Auth{User: "alice", Pass: "secret "}, ErrAuthenticationFailed},
		{"unknown user", plain.Auth{User: "mallory", Pass: "secret"}, ErrAuthenticationFailed},
		{"authzid other", plain.Auth{Zid: "admin", User: "alice", Pass: "secret"}, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess, msg, err := tc.auth.AsMechanism().Authenticate(context.Background(), "broker:9092")
			if err != nil {
				t.Fatal(err)
			}
			user, err := VerifyPlain(msg, st.lookup)
			if tc.want != nil {
				checkErr(t, err, tc.want)
				if user != "" {
					t.Fatalf("user %q with an error", user)
				}
				return
			}
			if err != nil || user != tc.auth.User {
				t.Fatalf("user %q, %v", user, err)
			}
			if done, _, err := sess.Challenge(nil); !done || err != nil {
				t.Fatalf("client: %t, %v", done, err)
			}
		})
	}
}
