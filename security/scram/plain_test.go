package scram

import (
	"strings"
	"testing"
)

func TestVerifyPlain(t *testing.T) {
	st := store{}
	st.add(t, "alice", "secret", SHA256, SHA512)
	// A user whose two credentials have different passwords, as during a
	// rotation: either password is accepted.
	st.add(t, "rot", "old", SHA256)
	st.add(t, "rot", "new", SHA512)
	// A user with a broken SHA-512 credential and a good SHA-256 one.
	st.add(t, "broken512", "secret", SHA256, SHA512)
	bad := st["broken512"][SHA512]
	bad.ServerKey = nil
	st["broken512"][SHA512] = bad
	// A user whose only credential is broken.
	st.add(t, "broken", "secret", SHA256)
	b := st["broken"][SHA256]
	b.Iterations = MaxIterations + 1
	st["broken"][SHA256] = b
	// A lookup that answers with the wrong mechanism.
	st.add(t, "mixed", "secret", SHA256)
	mixedLookup := func(user string, m Mechanism) (Credential, bool) {
		if user == "mixed" {
			return st["mixed"][SHA256], true
		}
		return st.lookup(user, m)
	}

	for _, tc := range []struct {
		name, msg, user string
		lookup          Lookup
		want            error
	}{
		{"ok", "\x00alice\x00secret", "alice", nil, nil},
		{"authzid equal", "alice\x00alice\x00secret", "alice", nil, nil},
		{"old password", "\x00rot\x00old", "rot", nil, nil},
		{"new password", "\x00rot\x00new", "rot", nil, nil},
		{"broken sha512 skipped", "\x00broken512\x00secret", "broken512", nil, nil},
		{"only credential broken", "\x00broken\x00secret", "", nil, ErrAuthenticationFailed},
		{"mechanism mismatch skipped", "\x00mixed\x00secret", "mixed", mixedLookup, nil},
		{"wrong password", "\x00alice\x00secreT", "", nil, ErrAuthenticationFailed},
		{"unknown user", "\x00bob\x00secret", "", nil, ErrAuthenticationFailed},
		{"names are not folded", "\x00Alice\x00secret", "", nil, ErrAuthenticationFailed},
		{"empty", "", "", nil, ErrMalformed},
		{"one field", "alice", "", nil, ErrMalformed},
		{"two fields", "alice\x00secret", "", nil, ErrMalformed},
		{"four fields", "\x00alice\x00secret\x00", "", nil, ErrMalformed},
		{"NUL in password", "\x00alice\x00sec\x00ret", "", nil, ErrMalformed},
		{"empty user", "\x00\x00secret", "", nil, ErrMalformed},
		{"empty password", "\x00alice\x00", "", nil, ErrMalformed},
		{"authzid other", "admin\x00alice\x00secret", "", nil, ErrMalformed},
		{"user not utf-8", "\x00al\xffice\x00secret", "", nil, ErrMalformed},
		{"password not utf-8", "\x00alice\x00secret\xff", "", nil, ErrMalformed},
		{"authzid not utf-8", "\xff\x00alice\x00secret", "", nil, ErrMalformed},
		{"too long", "\x00alice\x00" + strings.Repeat("x", maxMessageLen), "", nil, ErrMalformed},
		{"no lookup", "\x00alice\x00secret", "", Lookup(nil), ErrAuthenticationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := tc.lookup
			if lookup == nil && tc.name != "no lookup" {
				lookup = st.lookup
			}
			user, err := VerifyPlain([]byte(tc.msg), lookup)
			if tc.want != nil {
				checkErr(t, err, tc.want)
				if user != "" {
					t.Fatalf("user %q with an error", user)
				}
				return
			}
			if err != nil || user != tc.user {
				t.Fatalf("user %q, %v; want %q", user, err, tc.user)
			}
		})
	}
}

// TestVerifyPlainOrder checks that the SHA-512 credential is tried first
// and that the SHA-256 one is not looked up once it matched.
func TestVerifyPlainOrder(t *testing.T) {
	st := store{}
	st.add(t, "alice", "secret", SHA256, SHA512)
	var asked []Mechanism
	lookup := func(user string, m Mechanism) (Credential, bool) {
		asked = append(asked, m)
		return st.lookup(user, m)
	}
	if _, err := VerifyPlain([]byte("\x00alice\x00secret"), lookup); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0] != SHA512 {
		t.Fatalf("asked %v", asked)
	}
	asked = nil
	_, err := VerifyPlain([]byte("\x00alice\x00wrong"), lookup)
	checkErr(t, err, ErrAuthenticationFailed)
	if len(asked) != 2 || asked[0] != SHA512 || asked[1] != SHA256 {
		t.Fatalf("asked %v", asked)
	}
}
