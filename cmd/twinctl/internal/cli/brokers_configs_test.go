package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// UnregisterBroker answers as metastate.UnregisterBroker does: an unknown
// id is BROKER_ID_NOT_REGISTERED, a broker that is not fenced is
// INVALID_REQUEST with a message, a fenced one is removed.
func (f *fakeAdmin) UnregisterBroker(_ context.Context, req *twinlogv1.UnregisterBrokerRequest) (*twinlogv1.UnregisterBrokerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.brokers, func(b *twinlogv1.BrokerRecord) bool { return b.GetBrokerId() == req.GetBrokerId() })
	switch {
	case i < 0:
		return &twinlogv1.UnregisterBrokerResponse{Error: twinlogv1.ErrorCode_ERROR_CODE_BROKER_ID_NOT_REGISTERED,
			ErrorMessage: fmt.Sprintf("broker %d is not registered", req.GetBrokerId())}, nil
	case !f.brokers[i].GetFenced():
		return &twinlogv1.UnregisterBrokerResponse{Error: twinlogv1.ErrorCode_ERROR_CODE_INVALID_REQUEST,
			ErrorMessage: fmt.Sprintf("broker %d is not fenced: stop it and wait for its session to expire (broker.session.timeout.ms)", req.GetBrokerId())}, nil
	}
	f.brokers = slices.Delete(f.brokers, i, i+1)
	return &twinlogv1.UnregisterBrokerResponse{}, nil
}

// alterFake records AlterConfigs requests and accepts them.
type alterFake struct {
	*fakeAdmin
	alterReqs []*twinlogv1.AlterConfigsRequest
}

func (f *alterFake) AlterConfigs(_ context.Context, req *twinlogv1.AlterConfigsRequest) (*twinlogv1.AlterConfigsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alterReqs = append(f.alterReqs, req)
	resp := &twinlogv1.AlterConfigsResponse{}
	for _, r := range req.GetResources() {
		resp.Results = append(resp.Results, &twinlogv1.AlterConfigsResult{Resource: r.GetResource()})
	}
	return resp, nil
}

// TestBrokersUnregister: the table and --json output of a removed broker
// (goldens), and the two refusals, each with the controller's code and
// message and a failing exit code.
func TestBrokersUnregister(t *testing.T) {
	h := startFake(t, goldenFake()) // broker 1 live, broker 2 fenced
	for _, tt := range []struct{ golden, id string }{
		{"brokers_unregister", "2"},
	} {
		stdout, stderr, code := h.run(t, "brokers", "unregister", tt.id)
		if code != ExitOK {
			t.Fatalf("unregister %s: exit %d: %s", tt.id, code, stderr)
		}
		checkGolden(t, tt.golden, stdout)
	}
	if stdout, _, _ := h.run(t, "brokers", "list"); strings.Contains(stdout, "10.0.0.2") {
		t.Errorf("broker 2 still listed after unregister:\n%s", stdout)
	}

	h = startFake(t, goldenFake())
	stdout, stderr, code := h.run(t, "brokers", "unregister", "2", "--json")
	if code != ExitOK {
		t.Fatalf("unregister --json: exit %d: %s", code, stderr)
	}
	checkGolden(t, "brokers_unregister_json", stdout)

	refusals := []struct {
		name, id string
		want     []string
	}{
		{"unknown id", "7", []string{"broker 7", "BROKER_ID_NOT_REGISTERED", "broker 7 is not registered"}},
		{"live broker", "1", []string{"broker 1", "INVALID_REQUEST", "not fenced: stop it"}},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := h.run(t, "brokers", "unregister", tt.id)
			if code != ExitError || stdout != "" {
				t.Fatalf("exit %d, stdout %q; want %d and no output", code, stdout, ExitError)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
	for _, bad := range []string{"-1", "x", "010", "2147483648"} {
		if _, stderr, code := h.run(t, "brokers", "unregister", bad); code != ExitUsage {
			t.Errorf("unregister %q: exit %d (%s), want usage error", bad, code, stderr)
		}
	}
	if _, _, code := h.run(t, "brokers", "unregister"); code != ExitUsage {
		t.Errorf("unregister without an id: exit %d, want usage error", code)
	}
}

// TestConfigsSetValidateOnly: --validate-only sends validate_only and says
// "would update", never "updated" (it changed nothing).
func TestConfigsSetValidateOnly(t *testing.T) {
	f := &alterFake{fakeAdmin: newFakeAdmin(map[string]int32{"orders": 1})}
	h := startFakeServer(t, f, f.fakeAdmin)
	tests := []struct {
		args     []string
		validate bool
		want     string
	}{
		{[]string{"configs", "set", "--cluster", "--validate-only", "broker.session.timeout.ms=12000"}, true,
			"would update cluster configs (validate only: nothing changed)\n"},
		{[]string{"configs", "set", "--topic", "orders", "min.insync.replicas=2"}, false, "updated topic orders configs\n"},
	}
	for i, tt := range tests {
		stdout, stderr, code := h.run(t, tt.args...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", tt.args, code, stderr)
		}
		if stdout != tt.want {
			t.Errorf("%v: stdout %q, want %q", tt.args, stdout, tt.want)
		}
		if got := f.alterReqs[i].GetValidateOnly(); got != tt.validate {
			t.Errorf("%v: validate_only = %t, want %t", tt.args, got, tt.validate)
		}
	}
}

// startFakeServer is startFake with admin (fake wrapped to add RPCs) serving
// AdminService.
func startFakeServer(t *testing.T, admin twinlogv1.AdminServiceServer, fake *fakeAdmin) *harness {
	t.Helper()
	h := &harness{fake: fake, lis: bufconn.Listen(1 << 20), srv: grpc.NewServer()}
	twinlogv1.RegisterAdminServiceServer(h.srv, admin)
	twinlogv1.RegisterMirrorServiceServer(h.srv, fake)
	go func() { _ = h.srv.Serve(h.lis) }()
	t.Cleanup(h.srv.Stop)
	return h
}
