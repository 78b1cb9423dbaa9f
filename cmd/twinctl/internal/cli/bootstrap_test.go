package cli

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestBootstrapFindsTheServer: --bootstrap is a list, and each RPC goes to
// the first address that serves it. ctl:1 is a controller (AdminService,
// MirrorService), b1:9092 a broker (FetchService, ProduceService), down:1
// refuses connections.
func TestBootstrapFindsTheServer(t *testing.T) {
	tests := []struct {
		name      string
		bootstrap string
		brokers   bool // the controller lists b1:9092
		args      []string
		wantCode  int
		want      string // in stdout (exit 0) or stderr
		wantSends int
	}{
		{"produce at the controller finds its broker", "ctl:1", true,
			[]string{"produce", "--topic", "orders", "--partition", "1", "--value", "v"}, ExitOK, "produced 1 record(s) to orders-1", 1},
		{"produce at a controller without brokers", "ctl:1", false,
			[]string{"produce", "--topic", "orders", "--value", "v"}, ExitError,
			"--bootstrap ctl:1 is a controller; `twinctl produce` needs a broker, and none of the brokers it lists answered (see `twinctl brokers list`)", 0},
		{"mirrors at a broker", "b1:9092", true,
			[]string{"mirrors", "describe"}, ExitError,
			"describe mirrors: --bootstrap b1:9092 is a broker; `twinctl mirrors describe` needs the controller of the mirror's destination cluster: pass its address with --bootstrap, e.g. 127.0.0.1:9090", 0},
		{"brokers unregister at a broker", "b1:9092", true,
			[]string{"brokers", "unregister", "4"}, ExitError, "--bootstrap b1:9092 is a broker; `twinctl brokers unregister` needs the cluster's controller", 0},
		{"mirrors with a list", "b1:9092,ctl:1", true, []string{"mirrors", "describe"}, ExitOK, "mirror a-to-b from cluster cluster-a", 0},
		{"produce with a list", "ctl:1, b1:9092", false,
			[]string{"produce", "--topic", "orders", "--partition", "2", "--value", "v"}, ExitOK, "produced 1 record(s) to orders-2", 1},
		{"an unreachable address is passed over", "down:1,ctl:1", true, []string{"topics", "list"}, ExitOK, "orders", 0},
		{"nothing reachable", "down:1", true, []string{"topics", "list"}, ExitError, "cannot reach down:1", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := goldenFake()
			fake.brokers = nil
			if tt.brokers {
				fake.brokers = []*twinlogv1.BrokerRecord{{BrokerId: 1, Host: "b1", Port: 9092}, {BrokerId: 2, Host: "b2", Port: 9092, Fenced: true}}
			}
			h := startFake(t, fake)
			b := &partsBroker{}
			srv := grpc.NewServer()
			twinlogv1.RegisterFetchServiceServer(srv, b)
			twinlogv1.RegisterProduceServiceServer(srv, b)
			lis := bufconn.Listen(1 << 20)
			go func() { _ = srv.Serve(lis) }()
			t.Cleanup(srv.Stop)
			down := bufconn.Listen(1)
			down.Close()
			h.routes = map[string]*bufconn.Listener{"b1:9092": lis, "down:1": down}

			var out, errb bytes.Buffer
			opts := h.options()
			opts.Stdout, opts.Stderr, opts.Stdin, opts.HomeDir = &out, &errb, strings.NewReader(""), t.TempDir()
			opts.Codec = CodecFuncs{
				EncodeFunc: func(recs []Record, _ Producer) ([]byte, error) { return fmt.Appendf(nil, "%d", len(recs)), nil },
				DecodeFunc: decodeFake,
			}
			code := Execute(t.Context(), append([]string{"--bootstrap", tt.bootstrap, "--timeout", "5s"}, tt.args...), opts)
			got := out.String()
			if tt.wantCode != ExitOK {
				got = errb.String()
			}
			if code != tt.wantCode || !strings.Contains(got, tt.want) {
				t.Errorf("exit %d, want %d; output %q, want it to contain %q (stderr %q)", code, tt.wantCode, got, tt.want, errb.String())
			}
			if len(b.sends) != tt.wantSends {
				t.Errorf("%d Produce requests at b1, want %d", len(b.sends), tt.wantSends)
			}
			if slices.Contains(h.dialed, "b2:9092") {
				t.Errorf("dialed the fenced broker b2: %v", h.dialed)
			}
		})
	}
}
