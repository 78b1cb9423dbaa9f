package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// transportCredentials are the client's gRPC credentials: plaintext when
// caFile is empty, else TLS trusting caFile and, with certFile and keyFile,
// presenting that certificate (the secured deployment requires one; the
// driver uses admin's, a super user of both clusters).
func transportCredentials(caFile, certFile, keyFile string) (credentials.TransportCredentials, error) {
	if caFile == "" {
		if certFile != "" || keyFile != "" {
			return nil, errors.New("--tls-cert and --tls-key need --tls-ca")
		}
		return insecure.NewCredentials(), nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", caFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, errors.New("--tls-cert and --tls-key go together")
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}
