package daemon

import (
	"log/slog"

	"github.com/twinlog/twinlog/internal/config"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/authz"
	"github.com/twinlog/twinlog/security/tlsfiles"
	"github.com/twinlog/twinlog/security/transport"
)

// Security turns a daemon's security keys into its transport (nil:
// plaintext, without tls.cert.file) and its authorizer's configuration.
func Security(c config.SecurityConfig, log *slog.Logger) (*transport.Transport, authz.Config, error) {
	az := authz.Config{
		Enabled:                 c.AuthorizerEnabled,
		ACL:                     acl.Config{SuperUsers: c.SuperUsers, AllowEveryoneIfNoACLFound: c.AllowEveryoneIfNoACLFound},
		BrokerPrincipalTemplate: c.BrokerPrincipalTemplate,
	}
	if !c.TLSEnabled() {
		if c.AuthorizerEnabled {
			log.Warn("authorizer enabled on plaintext listeners: every caller is User:ANONYMOUS")
		}
		return nil, az, nil
	}
	ca, err := transport.ParseClientAuth(c.TLSClientAuth)
	if err != nil {
		return nil, az, err
	}
	t, err := transport.New(transport.Config{
		Files:          tlsfiles.Files{CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, CAFile: c.TLSCAFile},
		ClientAuth:     ca,
		PrincipalRules: c.PrincipalMappingRules,
		Logger:         log.With("component", "tls"),
	})
	if err != nil {
		return nil, az, err
	}
	log.Info("TLS on every listener", "cert", c.TLSCertFile, "ca", c.TLSCAFile, "client_auth", c.TLSClientAuth,
		"not_after", t.Source().NotAfter(), "authorizer", c.AuthorizerEnabled)
	return t, az, nil
}
