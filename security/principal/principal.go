package principal

import (
	"crypto/x509"
	"errors"
	"fmt"
)

// Anonymous is Kafka's principal of a peer that did not authenticate
// (PLAINTEXT, or TLS without a client certificate). FromCert never returns
// it: a caller without a verified client certificate decides to use it.
const Anonymous = "User:ANONYMOUS"

// userPrefix is the principal type of a TLS peer, Kafka's
// KafkaPrincipal.USER_TYPE.
const userPrefix = "User:"

// FromCert returns the principal of a TLS peer whose verified leaf
// certificate is cert: "User:" followed by the name the rules map its
// subject DN (SubjectDN) to. It fails for a nil certificate, a subject that
// cannot be decoded, a DN no rule maps (the error wraps
// ErrNoMatchingRule), and, unlike Kafka, an empty name (a certificate with
// an empty subject under DEFAULT), which would be a principal no ACL can
// name unambiguously.
//
// cert must be a certificate the TLS handshake verified (for example
// tlsfiles.PeerLeaf of a connection accepted with a tlsfiles ServerConfig);
// the name is only as trustworthy as that verification.
func FromCert(r Rules, cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", errors.New("principal: no client certificate")
	}
	dn, err := subjectDN(cert)
	if err != nil {
		return "", err
	}
	name, err := r.Apply(dn)
	if err != nil {
		return "", err
	}
	if name == "" {
		return "", fmt.Errorf("principal: the mapping rules map the subject %q to an empty name", dn)
	}
	return userPrefix + name, nil
}
