package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"errors"
	"fmt"
)

// Credential is what the controller stores for one user and one mechanism,
// Kafka's UserScramCredentialRecord: enough to verify a SCRAM client proof
// and to prove the server to the client, but not the password, nor the
// SaltedPassword or ClientKey from which a client proof could be made.
//
// With H the mechanism's hash function and HMAC its HMAC (RFC 5802):
//
//	SaltedPassword = PBKDF2-HMAC-H(password, Salt, Iterations)
//	ClientKey      = HMAC(SaltedPassword, "Client Key")
//	StoredKey      = H(ClientKey)
//	ServerKey      = HMAC(SaltedPassword, "Server Key")
//
// A Credential is a value; the functions of this package never modify the
// slices of one they are given.
type Credential struct {
	Mechanism  Mechanism
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// NewCredential derives the credential for password under mechanism m with
// the given salt and iteration count. The password is used as its UTF-8
// bytes, without SASLprep, as Kafka does. It returns an error if m is not a
// mechanism, the password or the salt is empty, or iterations is outside
// [MinIterations, MaxIterations]. The salt is copied.
func NewCredential(m Mechanism, password string, salt []byte, iterations int) (Credential, error) {
	if err := checkParams(m, salt, iterations); err != nil {
		return Credential{}, err
	}
	if password == "" {
		return Credential{}, errors.New("scram: empty password")
	}
	salted, err := saltedPassword(m, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return fromSalted(m, salted, salt, iterations), nil
}

// FromSaltedPassword derives the credential from a SaltedPassword, the
// PBKDF2 output that Kafka's AlterUserScramCredentials request carries
// together with the salt and iteration count instead of the password. It
// gives the same Credential as NewCredential with the password that
// produced salted. It returns an error if m is not a mechanism, the salt is
// empty, iterations is outside [MinIterations, MaxIterations], or salted is
// not as long as m's hash output (32 bytes for SHA256, 64 for SHA512). The
// salt is copied.
func FromSaltedPassword(m Mechanism, salted, salt []byte, iterations int) (Credential, error) {
	if err := checkParams(m, salt, iterations); err != nil {
		return Credential{}, err
	}
	if len(salted) != m.size() {
		return Credential{}, fmt.Errorf("scram: salted password is %d bytes, %s needs %d", len(salted), m, m.size())
	}
	return fromSalted(m, salted, salt, iterations), nil
}

// Validate reports whether c is a credential this package can use: its
// mechanism is SHA256 or SHA512, its salt is not empty, StoredKey and
// ServerKey are as long as the mechanism's hash output, and Iterations is
// within [MinIterations, MaxIterations]. It cannot tell whether the keys
// were derived from any password.
func (c Credential) Validate() error {
	if err := checkParams(c.Mechanism, c.Salt, int(c.Iterations)); err != nil {
		return err
	}
	if len(c.StoredKey) != c.Mechanism.size() {
		return fmt.Errorf("scram: stored key is %d bytes, %s needs %d", len(c.StoredKey), c.Mechanism, c.Mechanism.size())
	}
	if len(c.ServerKey) != c.Mechanism.size() {
		return fmt.Errorf("scram: server key is %d bytes, %s needs %d", len(c.ServerKey), c.Mechanism, c.Mechanism.size())
	}
	return nil
}

// checkParams checks what NewCredential, FromSaltedPassword and Validate
// share: the mechanism, the salt and the iteration count.
func checkParams(m Mechanism, salt []byte, iterations int) error {
	if !m.valid() {
		return fmt.Errorf("scram: unknown mechanism %d", int(m))
	}
	if len(salt) == 0 {
		return errors.New("scram: empty salt")
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return fmt.Errorf("scram: %d iterations, outside [%d, %d]", iterations, MinIterations, MaxIterations)
	}
	return nil
}

// saltedPassword computes PBKDF2-HMAC-H(password, salt, iterations) with an
// output as long as H's.
func saltedPassword(m Mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	salted, err := pbkdf2.Key(m.newHash(), password, salt, iterations, m.size())
	if err != nil {
		return nil, fmt.Errorf("scram: pbkdf2: %w", err)
	}
	return salted, nil
}

// fromSalted builds the credential from a SaltedPassword of the right
// length; the parameters have been checked.
func fromSalted(m Mechanism, salted, salt []byte, iterations int) Credential {
	serverKey := hmacSum(m, salted, []byte("Server Key"))
	return Credential{
		Mechanism:  m,
		Salt:       append([]byte(nil), salt...),
		StoredKey:  storedKey(m, clientKey(m, salted)),
		ServerKey:  serverKey,
		Iterations: int32(iterations),
	}
}

// clientKey returns HMAC(salted, "Client Key").
func clientKey(m Mechanism, salted []byte) []byte {
	return hmacSum(m, salted, []byte("Client Key"))
}

// storedKey returns H(clientKey).
func storedKey(m Mechanism, clientKey []byte) []byte {
	h := m.newHash()()
	h.Write(clientKey)
	return h.Sum(nil)
}

// hmacSum returns HMAC-H(key, msg).
func hmacSum(m Mechanism, key, msg []byte) []byte {
	mac := hmac.New(m.newHash(), key)
	mac.Write(msg)
	return mac.Sum(nil)
}

// SaltedPassword is what a client sends to set a credential without
// sending the password (AlterUserScramCredentials): PBKDF2 of password
// with salt and iterations under m's hash. Parameters are checked as by
// NewCredential.
func SaltedPassword(m Mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	if err := checkParams(m, salt, iterations); err != nil {
		return nil, err
	}
	if password == "" {
		return nil, errors.New("scram: empty password")
	}
	return saltedPassword(m, password, salt, iterations)
}
