package scram

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"unicode/utf8"
)

// plainDummySalt is the salt of the derivation VerifyPlain makes for a user
// without a usable credential, so that such a user costs about as much as
// a user with one.
var plainDummySalt = []byte("twinlog-scram-plain-dummy-salt")

// VerifyPlain verifies a SASL PLAIN message (RFC 4616),
// "authzid NUL authcid NUL passwd", against the user's stored SCRAM
// credentials, and returns the authenticated user, authcid.
//
// The password is checked by deriving SaltedPassword from it with the
// credential's salt and iteration count and comparing H(HMAC(SaltedPassword,
// "Client Key")) with StoredKey in constant time. The user's SCRAM-SHA-512
// credential is tried first, then its SCRAM-SHA-256 one; the password is
// accepted if it matches either, as a SCRAM client could choose either
// mechanism. A user with no valid credential costs one SCRAM-SHA-512
// derivation at MinIterations, about what a user whose stored credential
// uses MinIterations costs.
//
// The message is refused with ErrMalformed if it does not have exactly
// three fields, a field is not UTF-8, authcid or passwd is empty, or
// authzid is neither empty nor equal to authcid. Every other failure is
// ErrAuthenticationFailed. Like Kafka, VerifyPlain applies no SASLprep to
// the names or the password. It is safe for concurrent use if lookup is.
func VerifyPlain(msg []byte, lookup Lookup) (user string, err error) {
	if lookup == nil {
		return "", failed("server misconfigured: no lookup")
	}
	if len(msg) > maxMessageLen {
		return "", malformed(fmt.Sprintf("message longer than %d bytes", maxMessageLen))
	}
	fields := bytes.Split(msg, []byte{0})
	if len(fields) != 3 {
		return "", malformed("PLAIN message must have three fields separated by NUL")
	}
	authzid, authcid, passwd := fields[0], fields[1], fields[2]
	if !utf8.Valid(authzid) || !utf8.Valid(authcid) || !utf8.Valid(passwd) {
		return "", malformed("PLAIN message is not UTF-8")
	}
	if len(authcid) == 0 {
		return "", malformed("empty user name")
	}
	if len(passwd) == 0 {
		return "", malformed("empty password")
	}
	if len(authzid) != 0 && !bytes.Equal(authzid, authcid) {
		return "", malformed("authorization identity differs from the user name")
	}
	user = string(authcid)
	password := string(passwd)

	tried := false
	for _, m := range [...]Mechanism{SHA512, SHA256} {
		cred, ok := lookup(user, m)
		if !ok || cred.Mechanism != m || cred.Validate() != nil {
			continue
		}
		tried = true
		salted, err := saltedPassword(m, password, cred.Salt, int(cred.Iterations))
		if err != nil {
			continue
		}
		if subtle.ConstantTimeCompare(storedKey(m, clientKey(m, salted)), cred.StoredKey) == 1 {
			return user, nil
		}
	}
	if !tried {
		_, _ = saltedPassword(SHA512, password, plainDummySalt, MinIterations)
		return "", failed("unknown user or no valid credential")
	}
	return "", failed("wrong password")
}
