package tlsfiles

import (
	"context"
	"crypto/tls"
	"net"
)

// DialFunc dials network address addr (net.Dialer.DialContext's shape,
// which franz-go's kgo.Dialer takes).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// TLSDialer wraps dial so that each connection is a TLS client with s's
// material that verifies the server for the host it was dialled by
// (ClientConfig(host)), handshaken before it is returned (bounded by
// ctx). Kafka clients use it: they dial brokers by the addresses Metadata
// advertises, often IPs, for which crypto/tls sends no server name.
func (s *Source) TLSDialer(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(addr)
		tc := tls.Client(conn, s.ClientConfig(host))
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tc, nil
	}
}
