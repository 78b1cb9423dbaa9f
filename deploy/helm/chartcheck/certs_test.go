package chartcheck

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twinlog/twinlog/security/pki"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCertificatesFitRenderedRelease issues chartcerts' certificates for
// release a of values-tls.yaml and checks them against what the chart
// renders: each broker's certificate verifies for the address it
// advertises, the controller's for the brokers' controller.address, the
// file names are the Secret keys the pods mount, and each CN is the
// principal the rendered broker.principal.template and super.users expect.
func TestCertificatesFitRenderedRelease(t *testing.T) {
	r := render(t, "tls")
	ca, err := pki.NewCA("chartcheck test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := Cluster{Release: "a", Namespace: "twinlog-a", ClusterID: "cluster-a", Brokers: 3, Domain: "cluster.local"}
	if err := WriteCerts(dir, ca, c, time.Hour); err != nil {
		t.Fatal(err)
	}
	host := func(addr string) string {
		h, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	broker := statefulSet(t, r, "broker")
	for id := range 3 {
		eff, err := r.Effective(broker, id)
		if err != nil {
			t.Fatal(err)
		}
		// The file the pod reads is the file chartcerts wrote under the
		// same name, i.e. the Secret key (kubectl --from-file=DIR).
		crt := readCert(t, filepath.Join(dir, "a", "broker", filepath.Base(eff["tls.cert.file"])))
		if _, err := os.Stat(filepath.Join(dir, "a", "broker", filepath.Base(eff["tls.key.file"]))); err != nil {
			t.Errorf("broker %d: key %s: %v", id, eff["tls.key.file"], err)
		}
		if err := crt.VerifyHostname(host(eff["advertised.address"])); err != nil {
			t.Errorf("broker %d: %v", id, err)
		}
		principal := strings.ReplaceAll(eff["broker.principal.template"], "{id}", fmt.Sprint(id))
		if "User:"+crt.Subject.CommonName != principal || !strings.Contains(eff["super.users"], principal) {
			t.Errorf("broker %d: CN %s, template principal %s, super.users %s", id, crt.Subject.CommonName, principal, eff["super.users"])
		}
		ctl := readCert(t, filepath.Join(dir, "a", "controller", "tls.crt"))
		if err := ctl.VerifyHostname(host(eff["controller.address"])); err != nil {
			t.Errorf("controller for broker %d: %v", id, err)
		}
	}
	ctlEff, err := r.Effective(statefulSet(t, r, "controller"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tls.cert.file", "tls.key.file", "tls.ca.file"} {
		if _, err := os.Stat(filepath.Join(dir, "a", "controller", filepath.Base(ctlEff[k]))); err != nil {
			t.Errorf("controller %s: %v", k, err)
		}
	}
	// The mirror Job's --bootstrap is the controller's ClusterIP Service.
	for _, a := range r.Jobs[0].Spec.Template.Spec.Containers[0].Args {
		if b, ok := strings.CutPrefix(a, "--bootstrap="); ok {
			if err := readCert(t, filepath.Join(dir, "a", "controller", "tls.crt")).VerifyHostname(host(b)); err != nil {
				t.Errorf("mirror Job: %v", err)
			}
		}
	}
}
