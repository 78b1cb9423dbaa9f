package tlsfiles

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/twinlog/twinlog/security/pki"
)

// material is one loaded set of files. It is never changed once built.
type material struct {
	cert    *tls.Certificate  // nil without CertFile
	leaf    *x509.Certificate // cert's leaf
	pool    *x509.CertPool    // nil without CAFile
	caCount int
	digest  [32]byte
}

// parse builds material from the contents of f's files.
func parse(f Files, data [3][]byte) (*material, error) {
	m := &material{digest: digest(data)}
	if f.CertFile != "" {
		chain, err := parseCerts(data[0])
		if err != nil {
			return nil, fmt.Errorf("tlsfiles: cert file %s: %w", f.CertFile, err)
		}
		key, err := pki.ParsePrivateKey(data[1])
		if err != nil {
			return nil, fmt.Errorf("tlsfiles: key file %s: %w", f.KeyFile, err)
		}
		pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
		if !ok || !pub.Equal(chain[0].PublicKey) {
			return nil, fmt.Errorf("tlsfiles: key file %s does not hold the key of the certificate in %s (%q)", f.KeyFile, f.CertFile, chain[0].Subject.String())
		}
		raw := make([][]byte, len(chain))
		for i, c := range chain {
			raw[i] = c.Raw
		}
		m.cert = &tls.Certificate{Certificate: raw, PrivateKey: key, Leaf: chain[0]}
		m.leaf = chain[0]
	}
	if f.CAFile != "" {
		cas, err := parseCerts(data[2])
		if err != nil {
			return nil, fmt.Errorf("tlsfiles: CA file %s: %w", f.CAFile, err)
		}
		m.pool = x509.NewCertPool()
		for _, c := range cas {
			m.pool.AddCert(c)
		}
		m.caCount = len(cas)
	}
	return m, nil
}

// parseCerts returns the CERTIFICATE blocks of data, in order; other blocks
// are skipped. It fails if there is none or one does not parse.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	blocks := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		blocks++
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", blocks, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		if blocks == 0 {
			return nil, errors.New("no PEM data")
		}
		return nil, errors.New("no CERTIFICATE PEM block")
	}
	return certs, nil
}
