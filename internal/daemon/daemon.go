// Package daemon holds what brokerd and controllerd share around their
// Run loops: the slog handler chosen by flags and the `healthcheck`
// subcommand docker-compose runs inside FROM scratch images.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/twinlog/twinlog/security/tlsfiles"
	"github.com/twinlog/twinlog/security/transport"
)

// NewLogger returns a logger on stderr for --log.format (json, text) and
// --log.level (debug, info, warn, error).
func NewLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log.level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log.format %q: want json or text", format)
}

// HealthcheckCmd is `<daemon> healthcheck --address host:port`: it exits 0
// if the gRPC health service there answers SERVING. role names the daemon
// in help text ("broker", "controller").
func HealthcheckCmd(role, defaultAddr string) *cobra.Command {
	var (
		addr, ca, cert, key string
		timeout             time.Duration
	)
	cmd := &cobra.Command{
		Use:           "healthcheck",
		Short:         "exit 0 if the " + role + " at --address is SERVING",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			creds := insecure.NewCredentials()
			if ca != "" {
				t, err := transport.New(transport.Config{Files: tlsfiles.Files{CertFile: cert, KeyFile: key, CAFile: ca}})
				if err != nil {
					fmt.Fprintln(os.Stderr, "healthcheck:", err)
					return err
				}
				creds = t.ClientCredentials()
			}
			if err := Healthcheck(cmd.Context(), addr, timeout, creds); err != nil {
				fmt.Fprintln(os.Stderr, "healthcheck:", err)
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "address", defaultAddr, role+" gRPC host:port")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Second, "overall deadline")
	cmd.Flags().StringVar(&ca, "tls-ca", "", "CA bundle to verify the daemon with: TLS on (the daemon's tls.ca.file)")
	cmd.Flags().StringVar(&cert, "tls-cert", "", "certificate to present (the daemon's tls.cert.file, when it requires one)")
	cmd.Flags().StringVar(&key, "tls-key", "", "private key of --tls-cert")
	return cmd
}

// Healthcheck asks the standard gRPC health service at addr, over creds,
// for the server's status and returns an error unless it is SERVING.
func Healthcheck(ctx context.Context, addr string, timeout time.Duration, creds credentials.TransportCredentials) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s is %s", addr, resp.GetStatus())
	}
	return nil
}
