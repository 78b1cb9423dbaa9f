package scram

import (
	"bytes"
	"crypto/pbkdf2"
	"testing"
)

func TestFromSaltedPasswordEqualsNewCredential(t *testing.T) {
	for _, m := range []Mechanism{SHA256, SHA512} {
		for _, iter := range []int{MinIterations, 5000, MaxIterations} {
			salt := []byte("some salt")
			want, err := NewCredential(m, "pass word", salt, iter)
			if err != nil {
				t.Fatal(err)
			}
			salted, err := pbkdf2.Key(hashFor(m), "pass word", salt, iter, hashFor(m)().Size())
			if err != nil {
				t.Fatal(err)
			}
			got, err := FromSaltedPassword(m, salted, salt, iter)
			if err != nil {
				t.Fatal(err)
			}
			if !credEqual(got, want) {
				t.Fatalf("%s %d: FromSaltedPassword %+v, NewCredential %+v", m, iter, got, want)
			}
			if err := got.Validate(); err != nil {
				t.Fatal(err)
			}
			// And both match the test's own derivation.
			_, sk, srv := testKeys(m, "pass word", salt, iter)
			if !bytes.Equal(got.StoredKey, sk) || !bytes.Equal(got.ServerKey, srv) {
				t.Fatalf("%s %d: keys differ from the formulas", m, iter)
			}
		}
	}
}

func credEqual(a, b Credential) bool {
	return a.Mechanism == b.Mechanism && a.Iterations == b.Iterations &&
		bytes.Equal(a.Salt, b.Salt) && bytes.Equal(a.StoredKey, b.StoredKey) && bytes.Equal(a.ServerKey, b.ServerKey)
}

func TestCredentialCopiesSalt(t *testing.T) {
	salt := []byte("salt")
	c, err := NewCredential(SHA256, "pw", salt, MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	salted := make([]byte, 32)
	d, err := FromSaltedPassword(SHA256, salted, salt, MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	salt[0] = 'X'
	if string(c.Salt) != "salt" || string(d.Salt) != "salt" {
		t.Fatalf("salts %q, %q follow the caller's slice", c.Salt, d.Salt)
	}
}

func TestCredentialErrors(t *testing.T) {
	salt := []byte("salt")
	for _, tc := range []struct {
		name string
		m    Mechanism
		pw   string
		salt []byte
		iter int
	}{
		{"too few iterations", SHA256, "pw", salt, MinIterations - 1},
		{"too many iterations", SHA512, "pw", salt, MaxIterations + 1},
		{"zero iterations", SHA256, "pw", salt, 0},
		{"negative iterations", SHA256, "pw", salt, -1},
		{"huge iterations", SHA256, "pw", salt, 1 << 40},
		{"empty salt", SHA256, "pw", nil, MinIterations},
		{"unknown mechanism", Mechanism(2), "pw", salt, MinIterations},
		{"empty password", SHA256, "", salt, MinIterations},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := NewCredential(tc.m, tc.pw, tc.salt, tc.iter); err == nil {
				t.Fatalf("NewCredential accepted: %+v", c)
			}
			if tc.pw == "" {
				return
			}
			salted := make([]byte, 64)
			if tc.m == SHA256 {
				salted = salted[:32]
			}
			if c, err := FromSaltedPassword(tc.m, salted, tc.salt, tc.iter); err == nil {
				t.Fatalf("FromSaltedPassword accepted: %+v", c)
			}
		})
	}
	for _, tc := range []struct {
		m Mechanism
		n int
	}{{SHA256, 0}, {SHA256, 31}, {SHA256, 64}, {SHA512, 32}, {SHA512, 63}, {SHA512, 65}} {
		if _, err := FromSaltedPassword(tc.m, make([]byte, tc.n), salt, MinIterations); err == nil {
			t.Errorf("FromSaltedPassword accepted a %d-byte salted password for %s", tc.n, tc.m)
		}
	}
}

func TestValidate(t *testing.T) {
	good, err := NewCredential(SHA512, "pw", []byte("salt"), MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Credential)
	}{
		{"zero value", func(c *Credential) { *c = Credential{} }},
		{"unknown mechanism", func(c *Credential) { c.Mechanism = 5 }},
		{"other mechanism's key lengths", func(c *Credential) { c.Mechanism = SHA256 }},
		{"empty salt", func(c *Credential) { c.Salt = nil }},
		{"too few iterations", func(c *Credential) { c.Iterations = MinIterations - 1 }},
		{"too many iterations", func(c *Credential) { c.Iterations = MaxIterations + 1 }},
		{"negative iterations", func(c *Credential) { c.Iterations = -4096 }},
		{"short stored key", func(c *Credential) { c.StoredKey = c.StoredKey[:63] }},
		{"long stored key", func(c *Credential) { c.StoredKey = append(c.StoredKey, 0) }},
		{"missing server key", func(c *Credential) { c.ServerKey = nil }},
		{"short server key", func(c *Credential) { c.ServerKey = c.ServerKey[:32] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			c.StoredKey = bytes.Clone(good.StoredKey)
			c.ServerKey = bytes.Clone(good.ServerKey)
			tc.edit(&c)
			if err := c.Validate(); err == nil {
				t.Fatalf("Validate accepted %+v", c)
			}
		})
	}
}

// TestSaltedPasswordRoundTrip: what a client derives and sends gives the
// server the credential the password gives.
func TestSaltedPasswordRoundTrip(t *testing.T) {
	for _, m := range []Mechanism{SHA256, SHA512} {
		salted, err := SaltedPassword(m, "pencil", []byte("salt"), 4096)
		if err != nil {
			t.Fatal(err)
		}
		got, err := FromSaltedPassword(m, salted, []byte("salt"), 4096)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := NewCredential(m, "pencil", []byte("salt"), 4096)
		if !bytes.Equal(got.StoredKey, want.StoredKey) || !bytes.Equal(got.ServerKey, want.ServerKey) {
			t.Fatalf("%v: %+v, want %+v", m, got, want)
		}
		if _, err := SaltedPassword(m, "", []byte("salt"), 4096); err == nil {
			t.Fatal("empty password accepted")
		}
	}
}
