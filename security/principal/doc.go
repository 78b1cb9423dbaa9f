// Package principal names the peer of a TLS connection the way Kafka does:
// the principal of a client authenticated by its certificate is
// "User:<name>", where <name> is the certificate's subject distinguished
// name mapped by the rules of the broker setting
// ssl.principal.mapping.rules. ACLs and quotas are keyed by that principal.
//
// # The distinguished name
//
// SubjectDN writes the subject in RFC 2253 form as Java's
// X500Principal.getName() does, since that string is what Kafka's rules
// are written against: "CN=alice,OU=eng,O=acme,C=US", most specific
// first, without spaces, with RFC 2253 escapes. SubjectDN documents the
// details and the one known difference from the JDK.
//
// # Mapping rules
//
// The rules are a comma-separated list, tried in order:
//
//	RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,
//	RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,
//	DEFAULT
//
// A RULE applies when its regular expression matches the whole DN, and
// yields its replacement with $1, $2, ... replaced by the groups of the
// match, lower-cased after /L or upper-cased after /U. DEFAULT applies to
// every DN and yields it unchanged. With the rules above, these subjects
// are these principals:
//
//	CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown  User:serviceuser
//	CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown           User:adminuser@admin
//	CN=bob,O=acme                                                            User:CN=bob,O=acme
//
// When no rule applies the peer fails to authenticate. An empty setting is
// DEFAULT alone.
//
// ParseRules splits and checks the rules as Kafka's SslPrincipalMapper
// does: a backslash escapes the next character (so "\/" is a slash inside
// a pattern or replacement), commas inside a pattern need no escape, and
// "RULE:", "DEFAULT" and the flags are case sensitive. It also compiles
// each pattern and checks each replacement, so that a rule Go cannot run
// is refused when the setting is read, not when a client connects;
// ParseRules and Rules.Apply document where Go's regular expressions and
// Java's differ.
package principal
