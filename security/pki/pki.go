package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// DefaultLeafValidity is the validity of an issued certificate whose
// LeafOptions.Validity is zero.
const DefaultLeafValidity = 365 * 24 * time.Hour

// clockSkew is how far before now a certificate's validity starts when no
// NotBefore is given, so that a peer whose clock is slightly behind
// accepts it.
const clockSkew = time.Minute

// CA is a certificate authority: its certificate and the key that signs
// with it.
type CA struct {
	// Cert is the parsed CA certificate.
	Cert *x509.Certificate
	// Key is the CA's private key; its public half is Cert's.
	Key crypto.Signer
	// CertPEM is Cert as one PEM "CERTIFICATE" block, the form a trust
	// bundle (tlsfiles.Files.CAFile) takes.
	CertPEM []byte
}

// NewCA makes a new self-signed CA with a fresh ECDSA P-256 key. The
// certificate's subject is CN=commonName, and it is valid from one minute
// ago for validity.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	if commonName == "" {
		return nil, errors.New("pki: CA common name is empty")
	}
	if validity <= 0 {
		return nil, fmt.Errorf("pki: CA validity %v is not positive", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notBefore := time.Now().Add(-clockSkew)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: parse new CA certificate: %w", err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(der)}, nil
}

// LoadCA reads a CA from a PEM certificate file and a PEM private key file.
// The certificate file's first CERTIFICATE block is the CA certificate; it
// must be a CA (basic constraints CA:TRUE). The key file holds a PKCS #8
// ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS #1 ("RSA PRIVATE KEY")
// key, which must be the certificate's. Keys other than ECDSA may sign, but
// NewCA and Issue make only ECDSA keys.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certData, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("pki: read CA certificate: %w", err)
	}
	var der []byte
	for rest := certData; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			der = b.Bytes
			break
		}
	}
	if der == nil {
		return nil, fmt.Errorf("pki: CA certificate file %s: no PEM CERTIFICATE block", certFile)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate file %s: %w", certFile, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("pki: CA certificate file %s: %q is not a CA certificate", certFile, cert.Subject)
	}
	keyData, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("pki: read CA key: %w", err)
	}
	key, err := ParsePrivateKey(keyData)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key file %s: %w", keyFile, err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("pki: CA key file %s does not hold the key of the certificate in %s", keyFile, certFile)
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(der)}, nil
}

// WriteFiles writes the CA certificate to certFile (mode 0644) and its key,
// PKCS #8 in a PEM "PRIVATE KEY" block, to keyFile (mode 0600), each
// atomically (see the package documentation). Missing directories are not
// created.
func (ca *CA) WriteFiles(certFile, keyFile string) error {
	keyPEM, err := encodeKey(ca.Key)
	if err != nil {
		return err
	}
	if err := writeAtomic(certFile, ca.CertPEM, 0o644); err != nil {
		return err
	}
	return writeAtomic(keyFile, keyPEM, 0o600)
}

// LeafOptions says what certificate Issue makes.
type LeafOptions struct {
	// CommonName, Organization and OrganizationalUnit make the subject.
	// The subject's distinguished name is what security/principal maps
	// to a Kafka principal (User:<name>); in RFC 2253 form it reads
	// "CN=<CommonName>,OU=<unit>,O=<organization>".
	CommonName         string
	Organization       []string
	OrganizationalUnit []string
	// DNSNames and IPAddresses are the subject alternative names. A
	// server certificate needs at least one: TLS clients check the name
	// they dialled against these, never against the common name.
	DNSNames    []string
	IPAddresses []net.IP
	// Server and Client set the extended key usages serverAuth and
	// clientAuth. At least one must be set; both may be.
	Server, Client bool
	// Validity is how long the certificate is valid from NotBefore;
	// zero means DefaultLeafValidity.
	Validity time.Duration
	// NotBefore is the start of the validity; zero means one minute
	// before now, to allow for peers whose clocks are slightly behind.
	NotBefore time.Time
}

// Issue makes a new ECDSA P-256 key and a certificate for it signed by the
// CA, and returns the certificate as a PEM "CERTIFICATE" block and the key
// as a PKCS #8 PEM "PRIVATE KEY" block. The certificate PEM holds the leaf
// alone; peers that trust the CA need nothing else.
func (ca *CA) Issue(o LeafOptions) (certPEM, keyPEM []byte, err error) {
	if !o.Server && !o.Client {
		return nil, nil, errors.New("pki: leaf options set neither Server nor Client")
	}
	if o.Server && len(o.DNSNames) == 0 && len(o.IPAddresses) == 0 {
		return nil, nil, errors.New("pki: a server certificate needs DNSNames or IPAddresses")
	}
	if o.CommonName == "" && len(o.DNSNames) == 0 && len(o.IPAddresses) == 0 {
		return nil, nil, errors.New("pki: leaf options name no subject: set CommonName or a subject alternative name")
	}
	if o.Validity < 0 {
		return nil, nil, fmt.Errorf("pki: leaf validity %v is negative", o.Validity)
	}
	validity := o.Validity
	if validity == 0 {
		validity = DefaultLeafValidity
	}
	notBefore := o.NotBefore
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-clockSkew)
	}
	var eku []x509.ExtKeyUsage
	if o.Server {
		eku = append(eku, x509.ExtKeyUsageServerAuth)
	}
	if o.Client {
		eku = append(eku, x509.ExtKeyUsageClientAuth)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generate key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         o.CommonName,
			Organization:       o.Organization,
			OrganizationalUnit: o.OrganizationalUnit,
		},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(validity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           eku,
		BasicConstraintsValid: true,
		DNSNames:              o.DNSNames,
		IPAddresses:           o.IPAddresses,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: create certificate: %w", err)
	}
	kp, err := encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), kp, nil
}

// randomSerial returns a uniformly random serial number in [1, 2^128).
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("pki: serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParsePrivateKey returns the first private key PEM block of data (PKCS #8,
// SEC 1 EC or PKCS #1 RSA; ECDSA, RSA or Ed25519): the one parser of key
// files, for LoadCA and security/tlsfiles. Encrypted keys are refused.
func ParsePrivateKey(data []byte) (crypto.Signer, error) {
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
