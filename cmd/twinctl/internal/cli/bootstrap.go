package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// A twinlog cluster has two kinds of server, and --bootstrap may name
// either, or a list of both (comma-separated, as Kafka's bootstrap.servers):
//
//	controller  AdminService, MirrorService (mirrors live on the destination's)
//	broker      ProduceService, FetchService, GroupService; AdminService
//	            forwarded to its controller (all but UnregisterBroker)
//
// The router sends each RPC to the first address that serves it: an
// address that answers Unimplemented (the other kind) or cannot be reached
// is passed over for the next. A broker's service asked of controllers only
// is sent to the brokers the controller lists (ListBrokers), so `produce`
// and `consume` work with the controller's address too. A controller's
// service asked of brokers only cannot be found that way (a broker does not
// say where its controller is): that is an error naming what the command
// needs.

// Services only one kind of server answers.
var (
	brokerServices = []string{
		twinlogv1.ProduceService_ServiceDesc.ServiceName,
		twinlogv1.FetchService_ServiceDesc.ServiceName,
		twinlogv1.GroupService_ServiceDesc.ServiceName,
	}
	controllerServices = []string{twinlogv1.MirrorService_ServiceDesc.ServiceName}
	// controllerMethods are the AdminService methods a broker does not
	// forward.
	controllerMethods = []string{twinlogv1.AdminService_UnregisterBroker_FullMethodName}
)

// serverKind is which kind of server an RPC needs.
type serverKind int

const (
	anyServer serverKind = iota
	needsBroker
	needsController
)

func kindOf(method string) serverKind {
	svc := serviceOf(method)
	switch {
	case slices.Contains(brokerServices, svc):
		return needsBroker
	case slices.Contains(controllerServices, svc) || slices.Contains(controllerMethods, method):
		return needsController
	}
	return anyServer
}

// serviceOf is "twinlog.v1.MirrorService" for "/twinlog.v1.MirrorService/CreateMirror".
func serviceOf(method string) string {
	svc, _, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	return svc
}

// splitBootstrap splits --bootstrap at commas, dropping blanks.
func splitBootstrap(s string) []string { return splitList([]string{s}) }

// router is the grpc.ClientConnInterface of the bootstrap RPCs.
type router struct {
	a *app
	// served remembers, per method, the address that answered it.
	served map[string]string
	// brokers are the unfenced brokers a controller listed (nil: not asked).
	brokers []string
}

func (a *app) bootstrapConn() grpc.ClientConnInterface {
	if a.router == nil {
		a.router = &router{a: a, served: map[string]string{}}
	}
	return a.router
}

// attempt is one address's answer that made the router go on.
type attempt struct {
	addr string
	err  error
}

func (r *router) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if addr, ok := r.served[method]; ok {
		return r.invoke(ctx, addr, method, args, reply, opts)
	}
	addrs := slices.Clone(r.a.bootstraps)
	var passed []attempt
	listed := false
	for i := 0; i < len(addrs); i++ {
		addr := addrs[i]
		err := r.invoke(ctx, addr, method, args, reply, opts)
		code := status.Code(err)
		if code == codes.Unimplemented || (code == codes.Unavailable && ctx.Err() == nil) {
			passed = append(passed, attempt{addr, err})
			if i == len(addrs)-1 && !listed && kindOf(method) == needsBroker && slices.ContainsFunc(passed, unimplemented) {
				// A controller answered: ask it for its brokers.
				listed = true
				for _, b := range r.listBrokers(ctx) {
					if !slices.Contains(addrs, b) {
						addrs = append(addrs, b)
					}
				}
			}
			continue
		}
		r.served[method] = addr
		return err
	}
	if !slices.ContainsFunc(passed, unimplemented) && len(passed) > 0 {
		// Nothing answered at all: the last transport error says why.
		return passed[len(passed)-1].err
	}
	return &wrongServerError{command: r.a.commandPath, method: method, passed: passed, listed: listed}
}

func unimplemented(at attempt) bool { return status.Code(at.err) == codes.Unimplemented }

func (r *router) invoke(ctx context.Context, addr, method string, args, reply any, opts []grpc.CallOption) error {
	cc, err := r.a.conn(addr)
	if err != nil {
		return err
	}
	return cc.Invoke(ctx, method, args, reply, opts...)
}

// NewStream serves no twinctl command (every RPC is unary); it goes to the
// first address.
func (r *router) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cc, err := r.a.conn(r.a.bootstraps[0])
	if err != nil {
		return nil, err
	}
	return cc.NewStream(ctx, desc, method, opts...)
}

// listBrokers asks the bootstrap servers (through the router, so a
// controller) for the unfenced brokers' addresses; nil if none answers.
func (r *router) listBrokers(ctx context.Context) []string {
	if r.brokers != nil {
		return r.brokers
	}
	resp, err := twinlogv1.NewAdminServiceClient(r).ListBrokers(ctx, &twinlogv1.ListBrokersRequest{})
	if err != nil {
		return nil
	}
	r.brokers = []string{}
	for _, b := range resp.GetBrokers() {
		if !b.GetFenced() {
			r.brokers = append(r.brokers, net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort()))))
		}
	}
	return r.brokers
}

// wrongServerError says that no --bootstrap address serves an RPC the
// command needs, what each one is and what to pass instead.
type wrongServerError struct {
	command string // "twinctl mirrors create"
	method  string
	passed  []attempt
	// listed: the brokers a controller listed were tried too.
	listed bool
}

// exampleControllers are the controllers of the clusters in configs/
// (`make run`), named in the advice.
const exampleControllers = "e.g. 127.0.0.1:9090 (cluster A in configs/) or 127.0.0.1:9100 (cluster B)"

func (e *wrongServerError) Error() string {
	var is []string
	for _, at := range e.passed {
		switch {
		case status.Code(at.err) == codes.Unavailable:
			is = append(is, at.addr+" cannot be reached")
		case kindOf(e.method) == needsController:
			is = append(is, at.addr+" is a broker")
		case kindOf(e.method) == needsBroker:
			is = append(is, at.addr+" is a controller")
		default:
			is = append(is, fmt.Sprintf("%s does not serve %s (%s)", at.addr, strings.TrimPrefix(e.method, "/"), status.Convert(at.err).Message()))
		}
	}
	what := "--bootstrap " + strings.Join(is, ", ")
	cmd := "this command"
	if e.command != "" {
		cmd = "`" + e.command + "`"
	}
	switch kindOf(e.method) {
	case needsController:
		if serviceOf(e.method) == twinlogv1.MirrorService_ServiceDesc.ServiceName {
			return fmt.Sprintf("%s; %s needs the controller of the mirror's destination cluster: pass its address with --bootstrap, %s", what, cmd, exampleControllers)
		}
		return fmt.Sprintf("%s; %s needs the cluster's controller: pass its address with --bootstrap, %s", what, cmd, exampleControllers)
	case needsBroker:
		if e.listed {
			return fmt.Sprintf("%s; %s needs a broker, and none of the brokers it lists answered (see `twinctl brokers list`): pass a broker's address with --bootstrap", what, cmd)
		}
		return fmt.Sprintf("%s; %s needs a broker: pass a broker's address with --bootstrap, e.g. 127.0.0.1:9091 (cluster A in configs/)", what, cmd)
	}
	return fmt.Sprintf("%s: is the server a twinlog controller or broker of this version? admin and mirror commands need the controller, produce and consume a broker", what)
}

// Unwrap is the last answer, so that status.Code sees Unimplemented.
func (e *wrongServerError) Unwrap() error {
	if len(e.passed) == 0 {
		return nil
	}
	return e.passed[len(e.passed)-1].err
}

// asWrongServer reports whether err says that no address served the RPC.
func asWrongServer(err error) (*wrongServerError, bool) {
	var ws *wrongServerError
	return ws, errors.As(err, &ws)
}
