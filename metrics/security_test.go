package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type fakeTLS struct{}

func (fakeTLS) NotAfter() time.Time          { return time.Unix(1_900_000_000, 0) }
func (fakeTLS) Reloads() (ok, failed uint64) { return 3, 1 }

// TestSecurityMetrics: decisions are counted, denials by resource type and
// operation; the certificate's expiry and reloads are read at scrape time.
func TestSecurityMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := NewSecurity(reg, fakeTLS{})
	if err != nil {
		t.Fatal(err)
	}
	s.ObserveAuthorization("Topic", "Write", true)
	s.ObserveAuthorization("Topic", "Write", false)
	s.ObserveAuthorization("Group", "Read", false)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.GetGauge() != nil:
				got[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				got[key] = m.GetCounter().GetValue()
			}
		}
	}
	for k, want := range map[string]float64{
		"twinlog_tls_certificate_expiry_timestamp_seconds":                       1_900_000_000,
		"twinlog_tls_reloads_total,result=ok":                                    3,
		"twinlog_tls_reloads_total,result=failed":                                1,
		"twinlog_authorization_requests_total":                                   3,
		"twinlog_authorization_denied_total,operation=Write,resource_type=Topic": 1,
		"twinlog_authorization_denied_total,operation=Read,resource_type=Group":  1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], want, got)
		}
	}
	if _, err := NewSecurity(prometheus.NewRegistry(), nil); err != nil {
		t.Fatalf("plaintext: %v", err)
	}
}
