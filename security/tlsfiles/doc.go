// Package tlsfiles serves TLS material (a certificate with its key, and a
// bundle of CA certificates that peers must chain to) from PEM files, and
// picks up new files without restarting a listener or a client.
//
// # Loading and reloading
//
// Load reads the files once and fails with an error naming the file when
// one is missing, holds no usable PEM block, does not parse, or when the
// key is not the certificate's. After that the files are checked again on
// handshakes, at most once per Options.MinReloadInterval (5 s by default),
// and whenever Source.Check is called. A check stats the files (size,
// modification time, and file identity, so that a rename or a symbolic
// link swapped over a file counts as a change); only when that changed are
// the files read, and only when their SHA-256 digest differs from the
// material in use are they parsed and swapped in. A file modified within
// two seconds of a check is read again on the next check even if its stat
// is unchanged, so that a rewrite of the same size within one tick of a
// coarse file-system clock is not missed.
//
// A reload that fails (a file missing, truncated, corrupt, or a key that
// does not match its certificate) leaves the previous material in use, is
// logged and counted once per distinct failure, and is returned by Check
// until the files are fixed. A certificate and its key written as two
// files are briefly inconsistent while they are rewritten; a check in
// between counts one failed reload and the next check loads the pair.
// Writing both with security/pki (atomic renames) keeps each file whole.
//
// Reloads() returns the counts of reloads done and failed, and NotAfter the
// expiry of the certificate in use, for metrics. Nothing checks the files
// while no handshake happens; a caller that exports NotAfter calls Check
// from a ticker.
//
// # Verification against the current material
//
// A tls.Config holds its certificates and CA pools by value, so a config
// built once would keep the material of its first day. The configs of this
// package therefore take everything from the Source at handshake time:
//
//   - ServerConfig presents the current certificate through GetCertificate
//     and verifies client certificates itself, in VerifyConnection, against
//     the current CA pool with the extended key usage clientAuth. crypto/tls
//     is asked only to request the certificate (RequestClientCert, or
//     RequireAnyClientCert when one is required). RequestClientCert and
//     RequireAnyClientCert passed to ServerConfig are treated as
//     VerifyClientCertIfGiven and RequireAndVerifyClientCert: a client
//     certificate that was not verified is never accepted, so the peer
//     certificate of a connection accepted with a ServerConfig is always
//     one that chains to the CA bundle (this matches Kafka's
//     ssl.client.auth, whose "requested" also verifies what is given).
//   - ClientConfig presents the current certificate through
//     GetClientCertificate and sets InsecureSkipVerify, which only turns off
//     crypto/tls's own check against the static RootCAs; VerifyConnection
//     then does the full check: the server's chain must reach the current
//     CA pool, the leaf must allow serverAuth, and it must be valid for the
//     server's name.
//
// Since verification happens in VerifyConnection, crypto/tls leaves
// ConnectionState.VerifiedChains empty; PeerLeaf returns the peer's leaf
// certificate either way. A caller must not replace VerifyConnection on
// these configs (that would turn verification off); it may set other
// fields, such as NextProtos, and may clone them (gRPC's credentials.NewTLS
// does): the callbacks refer to the Source, not to the config.
// VerifyConnection also runs on resumed sessions, so a certificate that no
// longer chains to the current pool is refused on resumption too.
//
// # The server name
//
// ClientConfig(serverName) checks the server's certificate against the
// handshake's server name: ConnectionState.ServerName, which crypto/tls
// sets from Config.ServerName. ClientConfig sets Config.ServerName to
// serverName; when serverName is empty, whoever dials fills it in on its
// copy of the config: tls.Dial and tls.Dialer use the host of the dialled
// address, and gRPC's TLS credentials use the host of the target's
// authority. crypto/tls leaves ConnectionState.ServerName empty when the
// name is an IP address (an IP address is never sent as SNI); the check
// then uses serverName, so a peer dialled by IP address needs its IP
// address passed as serverName. With no name at all the server is refused:
// no handshake ever succeeds without checking the server's identity.
package tlsfiles
