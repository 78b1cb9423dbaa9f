// Package rpcopt holds the gRPC connection settings every twinlog daemon
// shares, so that clients and servers agree on them.
package rpcopt

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

const (
	// KeepaliveTime is how long a client connection may be idle before it
	// pings its server; KeepaliveTimeout how long it waits for the answer
	// before it closes the transport and reconnects. Without pings a
	// connection whose peer vanished (a container that came back with
	// another address, a silently dropped link) keeps queueing requests
	// until each RPC's deadline; make chaos saw a mirror fetcher stuck for
	// minutes that way.
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 5 * time.Second
)

// ClientKeepalive pings idle connections (also without active RPCs: a
// mirror fetcher's connection may be idle between backoffs).
func ClientKeepalive() grpc.DialOption {
	return grpc.WithKeepaliveParams(keepalive.ClientParameters{
		Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true,
	})
}

// ServerKeepalive lets clients ping as often as ClientKeepalive does (the
// server default of 5 minutes would answer GOAWAY "too_many_pings").
func ServerKeepalive() grpc.ServerOption {
	return grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
		MinTime: KeepaliveTime / 2, PermitWithoutStream: true,
	})
}
