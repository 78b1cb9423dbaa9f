package chartcheck

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twinlog/twinlog/security/pki"
)

// Cluster names one release of the chart for its certificates.
type Cluster struct {
	Release   string // helm release name (a)
	Namespace string // its namespace (twinlog-a)
	ClusterID string // its clusterId value (cluster-a): the principals' prefix
	Brokers   int    // broker.replicas
	Domain    string // clusterDomain (cluster.local)
}

// Fullname is the chart's twinlog.fullname without overrides.
func (c Cluster) Fullname() string {
	n := c.Release
	if !strings.Contains(c.Release, "twinlog") {
		n += "-twinlog"
	}
	if len(n) > 40 {
		n = n[:40]
	}
	return strings.TrimSuffix(n, "-")
}

// ControllerDNSNames are the names the controller is dialled by: its pod's
// stable name (brokers), its ClusterIP Service (twinctl, the mirror Job)
// and localhost (kubectl port-forward).
func (c Cluster) ControllerDNSNames() []string {
	f := c.Fullname()
	return []string{
		fmt.Sprintf("%s-controller-0.%s-controller-headless.%s.svc.%s", f, f, c.Namespace, c.Domain),
		fmt.Sprintf("%s-controller.%s.svc.%s", f, c.Namespace, c.Domain),
		fmt.Sprintf("%s-controller.%s.svc", f, c.Namespace),
		fmt.Sprintf("%s-controller", f),
		"localhost",
	}
}

// BrokerDNSNames are broker id's names: its pod's stable name (advertised,
// a mirror's --source), the brokers' ClusterIP Service, localhost.
func (c Cluster) BrokerDNSNames(id int) []string {
	f := c.Fullname()
	return []string{
		fmt.Sprintf("%s-broker-%d.%s-broker-headless.%s.svc.%s", f, id, f, c.Namespace, c.Domain),
		fmt.Sprintf("%s-broker.%s.svc.%s", f, c.Namespace, c.Domain),
		fmt.Sprintf("%s-broker.%s.svc", f, c.Namespace),
		"localhost",
	}
}

// WriteCerts issues, with ca, the certificates of cluster c into
// dir/<release>/controller (tls.crt, tls.key, ca.crt: the controller's
// Secret) and dir/<release>/broker (ca.crt, broker-<id>.crt/.key: the
// brokers' Secret), so that each directory becomes its Secret with
// `kubectl create secret generic NAME --from-file=DIR`. CNs are the chart's
// default principals: <clusterId>-controller, <clusterId>-broker-<id>.
func WriteCerts(dir string, ca *pki.CA, c Cluster, validity time.Duration) error {
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	write := func(sub, certName, keyName string, o pki.LeafOptions) error {
		d := filepath.Join(dir, c.Release, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		o.Server, o.Client, o.Validity, o.IPAddresses = true, true, validity, loopback
		cert, key, err := ca.Issue(o)
		if err != nil {
			return fmt.Errorf("%s: %w", o.CommonName, err)
		}
		for name, data := range map[string][]byte{certName: cert, keyName: key, "ca.crt": ca.CertPEM} {
			mode := os.FileMode(0o644)
			if name == keyName {
				mode = 0o600
			}
			if err := os.WriteFile(filepath.Join(d, name), data, mode); err != nil {
				return err
			}
		}
		return nil
	}
	if err := write("controller", "tls.crt", "tls.key", pki.LeafOptions{
		CommonName: c.ClusterID + "-controller", DNSNames: c.ControllerDNSNames(),
	}); err != nil {
		return err
	}
	for id := range c.Brokers {
		n := fmt.Sprintf("broker-%d", id)
		if err := write("broker", n+".crt", n+".key", pki.LeafOptions{
			CommonName: fmt.Sprintf("%s-broker-%d", c.ClusterID, id), DNSNames: c.BrokerDNSNames(id),
		}); err != nil {
			return err
		}
	}
	return nil
}

// WriteClient issues a client certificate CN=name into dir/<name>/tls.crt
// and tls.key (a kubernetes.io/tls Secret: `kubectl create secret tls`).
func WriteClient(dir string, ca *pki.CA, name string, validity time.Duration) error {
	cert, key, err := ca.Issue(pki.LeafOptions{CommonName: name, Client: true, Validity: validity})
	if err != nil {
		return err
	}
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d, "tls.crt"), cert, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(d, "tls.key"), key, 0o600)
}
