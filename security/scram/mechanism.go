package scram

import (
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"strconv"
)

// Mechanism is a SCRAM mechanism: the hash function that a credential and
// a conversation use. Its values are this package's own; Kafka's wire codes
// are given by KafkaCode and MechanismFromKafka.
type Mechanism int8

const (
	// SHA256 is SCRAM-SHA-256 (RFC 7677).
	SHA256 Mechanism = 0
	// SHA512 is SCRAM-SHA-512, defined by Kafka (KIP-84) by analogy with
	// RFC 7677.
	SHA512 Mechanism = 1
)

// Kafka's bounds on the iteration count of a SCRAM credential, inclusive.
// Kafka refuses to store a credential outside them, and so do
// NewCredential, FromSaltedPassword and Credential.Validate.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// String returns the SASL mechanism name, "SCRAM-SHA-256" or
// "SCRAM-SHA-512", or "Mechanism(N)" for a value that is neither.
func (m Mechanism) String() string {
	switch m {
	case SHA256:
		return "SCRAM-SHA-256"
	case SHA512:
		return "SCRAM-SHA-512"
	}
	return "Mechanism(" + strconv.Itoa(int(m)) + ")"
}

// KafkaCode returns the code Kafka uses for m in the ScramMechanism fields
// of DescribeUserScramCredentials, AlterUserScramCredentials and
// UserScramCredentialRecord: 1 for SCRAM-SHA-256, 2 for SCRAM-SHA-512. It
// returns 0, Kafka's UNKNOWN, for a value that is neither.
func (m Mechanism) KafkaCode() int8 {
	switch m {
	case SHA256:
		return 1
	case SHA512:
		return 2
	}
	return 0
}

// MechanismFromKafka returns the mechanism that Kafka's ScramMechanism code
// names, and false for any code other than 1 and 2.
func MechanismFromKafka(code int8) (Mechanism, bool) {
	switch code {
	case 1:
		return SHA256, true
	case 2:
		return SHA512, true
	}
	return 0, false
}

// ParseMechanism returns the mechanism named s, which must be exactly
// "SCRAM-SHA-256" or "SCRAM-SHA-512" (SASL mechanism names are upper case,
// and Kafka compares them exactly).
func ParseMechanism(s string) (Mechanism, error) {
	switch s {
	case "SCRAM-SHA-256":
		return SHA256, nil
	case "SCRAM-SHA-512":
		return SHA512, nil
	}
	return 0, fmt.Errorf("scram: unknown mechanism %q", s)
}

// valid reports whether m is SHA256 or SHA512.
func (m Mechanism) valid() bool { return m == SHA256 || m == SHA512 }

// newHash returns the constructor of m's hash function. m must be valid.
func (m Mechanism) newHash() func() hash.Hash {
	if m == SHA512 {
		return sha512.New
	}
	return sha256.New
}

// size returns the output size in bytes of m's hash function, which is also
// the length of every key of a credential for m. m must be valid.
func (m Mechanism) size() int {
	if m == SHA512 {
		return sha512.Size
	}
	return sha256.Size
}
