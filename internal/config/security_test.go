package config

import (
	"strings"
	"testing"
)

// TestSecurityKeys: the TLS files come together, tls.client.auth and
// super.users are checked, super.users splits on ';' (principals may hold
// commas), and the keys are the same for both daemons.
func TestSecurityKeys(t *testing.T) {
	for _, tc := range []struct {
		name, body, err string
	}{
		{"plaintext", "", ""},
		{"all three files", "tls.cert.file: a.crt\ntls.key.file: a.key\ntls.ca.file: ca.crt\n", ""},
		{"cert without key", "tls.cert.file: a.crt\ntls.ca.file: ca.crt\n", "tls.key.file"},
		{"ca alone", "tls.ca.file: ca.crt\n", "tls.cert.file"},
		{"client auth", "tls.client.auth: maybe\n", "tls.client.auth = maybe: allowed values are required, requested, none"},
		{"broker template without id", "broker.principal.template: User:broker\n", "broker.principal.template = User:broker"},
		{"broker template", "broker.principal.template: User:broker-{id}\n", ""},
		{"super user without type", "super.users: User:admin;broker-1\n", `super.users = broker-1: each principal is "Type:name"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := "cluster.id: a\n" + tc.body
			c, err := LoadController(writeFile(t, body), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("controller: %v, want %q", err, tc.err)
			}
			b, err := LoadBroker(writeFile(t, "broker.id: 1\n"+tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = b.Validate()
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("broker: %v, want %q", err, tc.err)
			}
		})
	}
	for body, want := range map[string]string{
		"sasl.enabled.mechanisms: SCRAM-SHA-512,SCRAM-SHA-256\n":                              "",
		"sasl.enabled.mechanisms: PLAIN\n":                                                    "PLAIN sends the password: it needs TLS",
		"sasl.enabled.mechanisms: GSSAPI\n":                                                   "allowed values are SCRAM-SHA-512, SCRAM-SHA-256, PLAIN",
		"sasl.enabled.mechanisms: PLAIN\ntls.cert.file: a\ntls.key.file: b\ntls.ca.file: c\n": "",
		"connections.max.reauth.ms: 3600000\n":                                                "",
		"connections.max.reauth.ms: -1\n":                                                     "connections.max.reauth.ms = -1: must be ≥ 0",
		"connections.max.idle.ms: 30000\n":                                                    "",
		"connections.max.idle.ms: 10\n":                                                       "connections.max.idle.ms = 10: must be ≥ 1000",
	} {
		b, err := LoadBroker(writeFile(t, "broker.id: 1\n"+body), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Validate(); (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
	c, err := LoadController(writeFile(t, "cluster.id: a\nsuper.users: User:CN=admin,O=acme; User:broker-1\n"), nil)
	if err != nil || len(c.Security.SuperUsers) != 2 || c.Security.SuperUsers[0] != "User:CN=admin,O=acme" || c.Security.SuperUsers[1] != "User:broker-1" {
		t.Fatalf("super.users %q (%v)", c.Security.SuperUsers, err)
	}
}
