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
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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
		addr    string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:           "healthcheck",
		Short:         "exit 0 if the " + role + " at --address is SERVING",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := Healthcheck(cmd.Context(), addr, timeout); err != nil {
				fmt.Fprintln(os.Stderr, "healthcheck:", err)
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "address", defaultAddr, role+" gRPC host:port")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Second, "overall deadline")
	return cmd
}

// Healthcheck asks the standard gRPC health service at addr for the
// server's status and returns an error unless it is SERVING.
func Healthcheck(ctx context.Context, addr string, timeout time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
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
