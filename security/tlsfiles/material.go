package tlsfiles

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
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
		key, err := parseKey(data[1])
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

// parseKey returns the first private key block of data.
func parseKey(data []byte) (crypto.Signer, error) {
	blocks := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			if blocks == 0 {
				return nil, errors.New("no PEM data")
			}
			return nil, errors.New("no private key PEM block")
		}
		blocks++
		var (
			key any
			err error
		)
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("encrypted private keys are not supported")
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s PEM block: %w", b.Type, err)
		}
		switch k := key.(type) {
		case *ecdsa.PrivateKey:
			return k, nil
		case *rsa.PrivateKey:
			return k, nil
		case ed25519.PrivateKey:
			return k, nil
		}
		return nil, fmt.Errorf("unsupported private key type %T", key)
	}
}
