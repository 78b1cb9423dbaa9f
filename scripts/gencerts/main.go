// Command gencerts writes the certificates of the docker-compose deployment
// (deploy/docker-compose.yml): a CA and, for each daemon, a certificate
// whose CN is its principal name (cluster-a-controller, cluster-a-broker-1,
// ...; ssl.principal.mapping.rules maps CN=name to User:name) and whose
// DNS names are its compose service name (a-controller, a-broker-1, ...)
// plus localhost, with IP 127.0.0.1, so that both the in-network names and
// the host's published ports verify. It also issues client certificates for
// admin (twinctl, healthchecks; a super user), intruder (a principal
// without ACLs, for make e2e's negative check) and the chaos driver's
// metadata observers (cluster-a-broker--1, cluster-b-broker--1; see clients).
//
//	go run ./scripts/gencerts --dir deploy/tls   # make compose-up / make e2e do this
//
// Idempotent: when every file is already there and the certificates are
// valid for at least another --min-valid, it changes nothing (so running
// containers keep their material); otherwise it regenerates everything
// with a new CA (--force always does). The keys are written readable by
// everyone (0644) so that the containers read them whatever user (or user
// namespace) they run as: this is a local test CA, not for production.
package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/twinlog/twinlog/security/pki"
)

// daemon is one container of deploy/docker-compose.yml.
type daemon struct{ service, principal string }

func daemons() []daemon {
	var out []daemon
	for _, c := range []string{"a", "b"} {
		for _, n := range []string{"controller", "broker-1", "broker-2", "broker-3"} {
			out = append(out, daemon{service: c + "-" + n, principal: "cluster-" + c + "-" + n})
		}
	}
	return out
}

// clients get client-only certificates: admin, intruder, and the chaos
// driver's metadata observers (make chaos): FetchMetadata as broker -1,
// which broker.principal.template (User:cluster-X-broker-{id}) names
// cluster-X-broker--1. They have no rights until granted (chaos.sh grants
// them ClusterAction on their cluster).
var clients = []string{"admin", "intruder", "cluster-a-broker--1", "cluster-b-broker--1"}

func main() {
	dir := flag.String("dir", "deploy/tls", "directory for ca.crt, ca.key and <principal>.crt/.key")
	force := flag.Bool("force", false, "regenerate everything even if valid material exists")
	validity := flag.Duration("validity", 365*24*time.Hour, "validity of the CA and the certificates")
	minValid := flag.Duration("min-valid", 7*24*time.Hour, "regenerate when a certificate expires sooner than this")
	flag.Parse()
	if !*force && upToDate(*dir, *minValid) {
		fmt.Printf("gencerts: %s is up to date (--force regenerates)\n", *dir)
		return
	}
	if err := generate(*dir, *validity); err != nil {
		fmt.Fprintf(os.Stderr, "gencerts: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("gencerts: wrote a new CA and %d certificates in %s\n", len(daemons())+len(clients), *dir)
}

func names() []string {
	var out []string
	for _, d := range daemons() {
		out = append(out, d.principal)
	}
	return append(out, clients...)
}

// upToDate says whether every file exists, every certificate parses, is
// signed by ca.crt and is valid for at least minValid.
func upToDate(dir string, minValid time.Duration) bool {
	ca, err := readCert(filepath.Join(dir, "ca.crt"))
	if err != nil || time.Until(ca.NotAfter) < minValid {
		return false
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); err != nil {
		return false
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, n := range names() {
		c, err := readCert(filepath.Join(dir, n+".crt"))
		if err != nil || time.Until(c.NotAfter) < minValid || c.Subject.CommonName != n {
			return false
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			return false
		}
		if _, err := os.Stat(filepath.Join(dir, n+".key")); err != nil {
			return false
		}
	}
	return true
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New(path + ": no PEM certificate")
	}
	return x509.ParseCertificate(blk.Bytes)
}

func generate(dir string, validity time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ca, err := pki.NewCA("twinlog docker-compose CA", validity)
	if err != nil {
		return err
	}
	caKey := filepath.Join(dir, "ca.key")
	if err := ca.WriteFiles(filepath.Join(dir, "ca.crt"), caKey); err != nil {
		return err
	}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	issue := func(name string, o pki.LeafOptions) error {
		o.CommonName, o.Validity, o.IPAddresses = name, validity, loopback
		cert, key, err := ca.Issue(o)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		_, keyFile, err := pki.WriteLeaf(dir, name, cert, key)
		if err != nil {
			return err
		}
		// Readable by the containers whatever uid they map to (see above).
		return os.Chmod(keyFile, 0o644)
	}
	for _, d := range daemons() {
		if err := issue(d.principal, pki.LeafOptions{DNSNames: []string{d.service, "localhost"}, Server: true, Client: true}); err != nil {
			return err
		}
	}
	for _, n := range clients {
		if err := issue(n, pki.LeafOptions{DNSNames: []string{"localhost"}, Client: true}); err != nil {
			return err
		}
	}
	return nil
}
