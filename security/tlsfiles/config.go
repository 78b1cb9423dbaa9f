package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// ServerConfig returns a config for a TLS listener: TLS 1.2 at least, the
// current certificate on every handshake, and client certificates as
// clientAuth asks, verified against the current CA pool with the extended
// key usage clientAuth (see the package documentation; RequestClientCert
// and RequireAnyClientCert verify too). Handshakes check the files, at most
// once per MinReloadInterval. A handshake fails if the source has no
// certificate.
func (s *Source) ServerConfig(clientAuth tls.ClientAuthType) *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			s.maybeCheck()
			m := s.cur.Load()
			if m.cert == nil {
				return nil, errors.New("tlsfiles: no certificate to serve: the source has no CertFile")
			}
			return m.cert, nil
		},
	}
	var required bool
	switch clientAuth {
	case tls.NoClientCert:
		return cfg
	case tls.RequestClientCert, tls.VerifyClientCertIfGiven:
		cfg.ClientAuth = tls.RequestClientCert
	default: // RequireAnyClientCert, RequireAndVerifyClientCert
		cfg.ClientAuth = tls.RequireAnyClientCert
		required = true
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		// A resumed session calls no GetCertificate: check here too.
		s.maybeCheck()
		if len(cs.PeerCertificates) == 0 {
			if required {
				return errors.New("tlsfiles: the client sent no certificate")
			}
			return nil
		}
		return s.verify(cs.PeerCertificates, x509.ExtKeyUsageClientAuth, "")
	}
	return cfg
}

// ClientConfig returns a config for dialling a TLS server: TLS 1.2 at
// least, the current certificate when the server asks for one (none when
// the source has no CertFile), and the server's certificate verified
// against the current CA pool, for the extended key usage serverAuth and
// for the server's name. ServerName is set to serverName; see the package
// documentation for how the name is found when serverName is empty, and
// why a server dialled by IP address needs its address as serverName.
//
// The config sets InsecureSkipVerify because tls.Config.RootCAs cannot
// change after the config is in use; its VerifyConnection does the whole
// verification instead, and must not be replaced.
func (s *Source) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		// Verification is VerifyConnection's, against the current pool.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			s.maybeCheck()
			if m := s.cur.Load(); m.cert != nil {
				return m.cert, nil
			}
			return &tls.Certificate{}, nil // no certificate to send
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			s.maybeCheck()
			name := cs.ServerName
			if name == "" {
				name = serverName
			}
			if name == "" {
				return errors.New("tlsfiles: no server name to verify the server's certificate against (a server dialled by IP address needs the address as serverName)")
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tlsfiles: the server sent no certificate")
			}
			return s.verify(cs.PeerCertificates, x509.ExtKeyUsageServerAuth, name)
		},
	}
}

// verify checks that the peer's chain (leaf first, then intermediates in
// any order) reaches the current CA pool, that the leaf allows usage, and,
// when name is not empty, that the leaf is valid for name (a DNS name or
// an IP address).
func (s *Source) verify(chain []*x509.Certificate, usage x509.ExtKeyUsage, name string) error {
	m := s.cur.Load()
	role := "client"
	if usage == x509.ExtKeyUsageServerAuth {
		role = "server"
	}
	if m.pool == nil {
		return fmt.Errorf("tlsfiles: cannot verify the %s's certificate: no CA file", role)
	}
	opts := x509.VerifyOptions{
		Roots:         m.pool,
		Intermediates: x509.NewCertPool(),
		DNSName:       name,
		KeyUsages:     []x509.ExtKeyUsage{usage},
	}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := chain[0].Verify(opts); err != nil {
		return fmt.Errorf("tlsfiles: %s certificate %q refused: %w", role, chain[0].Subject.String(), err)
	}
	return nil
}

// PeerLeaf returns the peer's leaf certificate of a connection: the first
// certificate of the first verified chain when crypto/tls verified the
// peer, else the first certificate the peer sent, or nil when it sent
// none. On connections made with this package's configs crypto/tls does
// not verify (VerifyConnection does, and a connection exists only if that
// succeeded), so the result is the peer's verified leaf. On a connection
// whose config verified nothing it is whatever the peer claimed.
func PeerLeaf(cs tls.ConnectionState) *x509.Certificate {
	if len(cs.VerifiedChains) > 0 && len(cs.VerifiedChains[0]) > 0 {
		return cs.VerifiedChains[0][0]
	}
	if len(cs.PeerCertificates) > 0 {
		return cs.PeerCertificates[0]
	}
	return nil
}
