package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/transport"
)

// TLSSource is what the TLS metrics read: the current certificate's expiry
// and the reload counters (security/tlsfiles.Source).
type TLSSource interface {
	NotAfter() time.Time
	Reloads() (ok, failed uint64)
}

// Security holds one daemon's TLS and authorization metrics.
type Security struct {
	requests prometheus.Counter
	denied   *prometheus.CounterVec
}

// NewSecurity registers the authorization counters and, when src is not
// nil (TLS on), the certificate's expiry and the reload counters, read at
// scrape time.
func NewSecurity(reg prometheus.Registerer, src TLSSource) (*Security, error) {
	s := &Security{
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "twinlog_authorization_requests_total",
			Help: "Authorization decisions taken (every RPC and Kafka request item checked against the ACLs; 0 with the authorizer off).",
		}),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "twinlog_authorization_denied_total",
			Help: "Authorization decisions that denied, by resource type and operation.",
		}, []string{"resource_type", "operation"}),
	}
	cs := []prometheus.Collector{s.requests, s.denied}
	if src != nil {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "twinlog_tls_certificate_expiry_timestamp_seconds",
				Help: "When this daemon's TLS certificate expires (Unix seconds); alert well before.",
			}, func() float64 { return float64(src.NotAfter().Unix()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "twinlog_tls_reloads_total",
				Help:        "Reloads of the TLS files after they changed, by result (failed: the old material is kept).",
				ConstLabels: prometheus.Labels{"result": "ok"},
			}, func() float64 { ok, _ := src.Reloads(); return float64(ok) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "twinlog_tls_reloads_total",
				Help:        "Reloads of the TLS files after they changed, by result (failed: the old material is kept).",
				ConstLabels: prometheus.Labels{"result": "failed"},
			}, func() float64 { _, failed := src.Reloads(); return float64(failed) }),
		)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ObserveAuthorization counts one decision.
func (s *Security) ObserveAuthorization(resourceType, operation string, allowed bool) {
	s.requests.Inc()
	if !allowed {
		s.denied.WithLabelValues(resourceType, operation).Inc()
	}
}

// WireSecurity registers a daemon's security metrics (the TLS ones when t
// is not nil) and points az's decisions at them: the one place brokerd and
// controllerd do it.
func WireSecurity(reg prometheus.Registerer, t *transport.Transport, az *authz.Config) error {
	var src TLSSource
	if t != nil {
		src = t.Source()
	}
	sec, err := NewSecurity(reg, src)
	if err != nil {
		return err
	}
	az.OnDecision = func(n authz.Need, allowed bool) { sec.ObserveAuthorization(n.Type.String(), n.Op.String(), allowed) }
	return nil
}
