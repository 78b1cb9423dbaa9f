// Command chartcerts writes test TLS material for releases of the twinlog
// Helm chart: one CA, and per release the controller's and the brokers'
// certificates with the Kubernetes names the chart gives them (pod names
// under the headless Services, the ClusterIP Services, localhost and
// 127.0.0.1 for port-forwards), CNs the chart's default principals, plus
// an admin client certificate. Each directory it writes becomes one Secret:
//
//	cd deploy/helm/chartcheck
//	go run ./cmd/chartcerts --dir /tmp/k8s-tls --cluster a/twinlog-a/cluster-a --cluster b/twinlog-b/cluster-b
//	kubectl -n twinlog-a create secret generic a-twinlog-controller-tls --from-file=/tmp/k8s-tls/a/controller
//	kubectl -n twinlog-a create secret generic a-twinlog-broker-tls --from-file=/tmp/k8s-tls/a/broker
//	kubectl -n twinlog-a create secret tls twinlog-admin-tls --cert=/tmp/k8s-tls/admin/tls.crt --key=/tmp/k8s-tls/admin/tls.key
//
// The CA is reused when --dir holds ca.crt and ca.key (so clusters added
// later trust the same CA). Keys are written 0600. A test CA, not for
// production: use your PKI or cert-manager there (chart README, "TLS").
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twinlog/twinlog/deploy/helm/chartcheck"
	"github.com/twinlog/twinlog/security/pki"
)

type clusters []chartcheck.Cluster

func (c *clusters) String() string { return fmt.Sprint(*c) }

func (c *clusters) Set(s string) error {
	p := strings.Split(s, "/")
	if len(p) != 3 || p[0] == "" || p[1] == "" || p[2] == "" {
		return fmt.Errorf("want RELEASE/NAMESPACE/CLUSTER_ID, e.g. a/twinlog-a/cluster-a")
	}
	*c = append(*c, chartcheck.Cluster{Release: p[0], Namespace: p[1], ClusterID: p[2]})
	return nil
}

func main() {
	var cs clusters
	dir := flag.String("dir", "k8s-tls", "output directory")
	flag.Var(&cs, "cluster", "RELEASE/NAMESPACE/CLUSTER_ID of a release (repeat for each)")
	brokers := flag.Int("brokers", 3, "broker.replicas of every release")
	domain := flag.String("cluster-domain", "cluster.local", "clusterDomain")
	admin := flag.String("admin", "admin", "CN of the client certificate (tls.adminPrincipal User:<CN>); empty: none")
	validity := flag.Duration("validity", 365*24*time.Hour, "validity of new certificates and of a new CA")
	flag.Parse()
	if len(cs) == 0 {
		fmt.Fprintln(os.Stderr, "chartcerts: give at least one --cluster RELEASE/NAMESPACE/CLUSTER_ID")
		os.Exit(2)
	}
	if err := run(*dir, cs, *brokers, *domain, *admin, *validity); err != nil {
		fmt.Fprintf(os.Stderr, "chartcerts: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string, cs clusters, brokers int, domain, admin string, validity time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	caCrt, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	ca, err := pki.LoadCA(caCrt, caKey)
	if err != nil {
		if ca, err = pki.NewCA("twinlog Kubernetes test CA", validity); err != nil {
			return err
		}
		if err := ca.WriteFiles(caCrt, caKey); err != nil {
			return err
		}
	}
	for _, c := range cs {
		c.Brokers, c.Domain = brokers, domain
		if err := chartcheck.WriteCerts(dir, ca, c, validity); err != nil {
			return err
		}
		fmt.Printf("chartcerts: %s: %s/%s/controller, %s/%s/broker (%d brokers)\n", c.Release, dir, c.Release, dir, c.Release, brokers)
	}
	if admin != "" {
		if err := chartcheck.WriteClient(dir, ca, admin, validity); err != nil {
			return err
		}
		fmt.Printf("chartcerts: client %s: %s/%s\n", admin, dir, admin)
	}
	return nil
}
