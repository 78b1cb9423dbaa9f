// Package authz authorizes every gRPC request a daemon serves: one table
// (rules.go) says, for each RPC of every service, what the caller must be
// allowed on which resources, and a Checker answers those questions with
// the principal of the caller's connection (security/transport) against
// the cluster's ACLs (security/acl, rebuilt by the daemon whenever the
// metadata image's bindings change).
//
// The interceptor refuses an RPC missing from the table: a new RPC cannot
// ship unauthorized by omission. Requests naming several resources are
// refused whole when any of them is denied (no data, no side effect), with
// codes.PermissionDenied and the Kafka-style error name first in the
// message; the RPCs whose answers are lists a caller may partly see
// (Metadata without topics, DescribeTopicPartitions as SPEC §5,
// ListGroups, DescribeMirrors without names) are marked Filtered and their
// handlers drop or mark the items the caller may not describe through
// Checker.Allowed.
//
// With the authorizer disabled (authorizer.enabled=false) every check
// passes, as with Kafka without an authorizer.
package authz

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/errcode"
	"github.com/twinlog/twinlog/security/acl"
	"github.com/twinlog/twinlog/security/scram"
	"github.com/twinlog/twinlog/security/transport"
)

// Need is one thing a request needs: Op on the resource Type/Name.
type Need struct {
	Op   acl.Operation
	Type acl.ResourceType
	Name string
}

func (n Need) String() string { return fmt.Sprintf("%v on %v %q", n.Op, n.Type, n.Name) }

// Config configures a Checker.
type Config struct {
	// Enabled is authorizer.enabled.
	Enabled bool
	// ACL is super.users and allow.everyone.if.no.acl.found.
	ACL acl.Config
	// BrokerPrincipalTemplate, when set, binds broker ids to principals:
	// a request acting as broker N (registering, heartbeating, fetching as
	// a follower, altering its partitions) must come from the principal
	// the template gives with {id} replaced by N, e.g. "User:broker-{id}".
	BrokerPrincipalTemplate string
	Logger                  *slog.Logger
	// OnDecision, if set, is told of every decision (metrics).
	OnDecision func(n Need, allowed bool)
	// Users, if set, are the SCRAM users a gRPC request may authenticate
	// as with a password over TLS (AuthorizationHeader), instead of a
	// client certificate.
	Users scram.Lookup
	// AwaitACLs: the bindings come from metadata still loading (a broker
	// that has just started). Until Follow sees the broker caught up, the
	// interceptor answers a principal that is not a super user
	// UNAVAILABLE (retriable: ask another broker, or again), not a denial
	// it would take for the cluster's word.
	AwaitACLs bool
}

// Checker answers authorization questions for one daemon. It is safe for
// concurrent use.
type Checker struct {
	cfg Config
	cur atomic.Pointer[acl.Authorizer]
	// loaded: cur holds the cluster's bindings (Config.AwaitACLs);
	// followed is the ACL offset of the image Follow built cur from.
	loaded   atomic.Bool
	followed atomic.Int64
	log      *slog.Logger
	// denials bounds the denial log lines: a client repeating a refused
	// request must not flood the log (the metric counts every one).
	denials logLimiter
}

// logLimiter allows deniedLogsPerSecond log lines a second and counts the
// ones it holds back, reported with the next line.
type logLimiter struct {
	mu         sync.Mutex
	second     int64
	n          int
	suppressed int
}

const deniedLogsPerSecond = 20

// allow reports whether a line may be logged at now, and how many were held
// back since the last one logged.
func (l *logLimiter) allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := now.Unix(); s != l.second {
		l.second, l.n = s, 0
	}
	if l.n >= deniedLogsPerSecond {
		l.suppressed++
		return false, 0
	}
	l.n++
	held := l.suppressed
	l.suppressed = 0
	return true, held
}

// NewChecker returns a checker over no bindings (only super users, or
// everyone if AllowEveryoneIfNoACLFound, until Update).
func NewChecker(cfg Config) *Checker {
	c := &Checker{cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.cur.Store(acl.New(cfg.ACL, nil))
	c.loaded.Store(!cfg.AwaitACLs)
	return c
}

// ImageACLs is the metadata a broker's checker follows (a
// metadata.Image).
type ImageACLs interface {
	// ACLOffset changes whenever the bindings change.
	ACLOffset() int64
	// Authorizer is built from the bindings.
	Authorizer(acl.Config) *acl.Authorizer
}

// Follow installs img's bindings once the broker has caught up (its image
// holds its own current registration: what the cluster knew when it
// joined, as a Kafka broker catches up before it serves) and whenever
// they changed since. A broker calls it after each metadata change (with
// the image's lock held, so calls do not overlap).
func (c *Checker) Follow(img ImageACLs, caughtUp bool) {
	if !caughtUp {
		return
	}
	off := img.ACLOffset()
	if c.loaded.Load() && c.followed.Load() == off {
		return
	}
	c.followed.Store(off)
	c.Update(img.Authorizer(c.cfg.ACL))
}

// ACLsLoaded reports whether the checker holds the cluster's bindings
// (always, without Config.AwaitACLs).
func (c *Checker) ACLsLoaded() bool { return c.loaded.Load() }

// superUser reports whether principal is one of super.users.
func (c *Checker) superUser(principal string) bool {
	return slices.Contains(c.cfg.ACL.SuperUsers, principal)
}

// Enabled reports whether requests are checked.
func (c *Checker) Enabled() bool { return c != nil && c.cfg.Enabled }

// ACLConfig returns the configuration authorizers are built with.
func (c *Checker) ACLConfig() acl.Config { return c.cfg.ACL }

// Update installs the authorizer built from the current bindings.
func (c *Checker) Update(a *acl.Authorizer) {
	c.cur.Store(a)
	c.loaded.Store(true)
}

// Allowed reports whether the caller of ctx may do n. A nil or disabled
// Checker allows everything.
func (c *Checker) Allowed(ctx context.Context, n Need) bool {
	if !c.Enabled() {
		return true
	}
	p, _ := transport.Principal(ctx)
	return c.AllowedAs(p, transport.Host(ctx), n)
}

// AllowedAs reports whether principal, connecting from host, may do n (the
// Kafka listener's connections carry their principal themselves). A nil or
// disabled Checker allows everything.
func (c *Checker) AllowedAs(principal, host string, n Need) bool {
	if !c.Enabled() {
		return true
	}
	d := c.cur.Load().Authorize(acl.Request{Principal: principal, Host: host, Operation: n.Op, ResourceType: n.Type, ResourceName: n.Name})
	c.decided(principal, host, n, d)
	return d.Allowed
}

// IdempotentProducerAs reports whether principal may start an idempotent
// producer (InitProducerId without a transactional id): IdempotentWrite on
// the cluster, or, since Kafka 3.0 (KIP-679), Write on any topic.
func (c *Checker) IdempotentProducerAs(principal, host string) bool {
	if !c.Enabled() {
		return true
	}
	a := c.cur.Load()
	n := Need{acl.IdempotentWrite, acl.Cluster, acl.ClusterName}
	d := a.Authorize(acl.Request{Principal: principal, Host: host, Operation: n.Op, ResourceType: n.Type, ResourceName: n.Name})
	if !d.Allowed {
		if w := a.AuthorizeAny(acl.Request{Principal: principal, Host: host, Operation: acl.Write, ResourceType: acl.Topic}); w.Allowed {
			d = w
		}
	}
	c.decided(principal, host, n, d)
	return d.Allowed
}

// IdempotentProducer is IdempotentProducerAs for the caller of ctx.
func (c *Checker) IdempotentProducer(ctx context.Context) bool {
	if !c.Enabled() {
		return true
	}
	p, _ := transport.Principal(ctx)
	return c.IdempotentProducerAs(p, transport.Host(ctx))
}

func (c *Checker) decided(principal, host string, n Need, d acl.Decision) {
	if c.cfg.OnDecision != nil {
		c.cfg.OnDecision(n, d.Allowed)
	}
	if !d.Allowed {
		c.logDenied(slog.String("principal", principal), slog.String("host", host), slog.String("operation", n.Op.String()),
			slog.String("resource_type", n.Type.String()), slog.String("resource", n.Name), slog.String("reason", d.Reason))
	}
}

// transportAttrs are the log attributes of a refused authentication.
func transportAttrs(ctx context.Context, why string) []slog.Attr {
	return []slog.Attr{slog.String("host", transport.Host(ctx)), slog.String("reason", why)}
}

// logDenied logs a denial, at most deniedLogsPerSecond a second.
func (c *Checker) logDenied(attrs ...slog.Attr) {
	ok, held := c.denials.allow(time.Now())
	if !ok {
		return
	}
	if held > 0 {
		attrs = append(attrs, slog.Int("denials_not_logged", held))
	}
	c.log.LogAttrs(context.Background(), slog.LevelInfo, "authorization denied", attrs...)
}

// Check returns nil when the caller may do every need, else a
// PermissionDenied status naming the first denied one.
func (c *Checker) Check(ctx context.Context, needs ...Need) error {
	for _, n := range needs {
		if !c.Allowed(ctx, n) {
			p, _ := transport.Principal(ctx)
			return Denied(DeniedCode(n.Type), "principal %s may not %v %v %q", p, n.Op, n.Type, n.Name)
		}
	}
	return nil
}

// CheckBroker returns nil when the caller may act as broker id: with a
// BrokerPrincipalTemplate, the caller's principal must be id's (super users
// too: a broker's identity is its certificate, not its privileges).
func (c *Checker) CheckBroker(ctx context.Context, id int32) error {
	if !c.Enabled() || c.cfg.BrokerPrincipalTemplate == "" {
		return nil
	}
	want := BrokerPrincipal(c.cfg.BrokerPrincipalTemplate, id)
	if p, _ := transport.Principal(ctx); p != want {
		c.logDenied(slog.String("principal", p), slog.String("host", transport.Host(ctx)), slog.Int("acting_as_broker", int(id)),
			slog.String("reason", "broker "+strconv.Itoa(int(id))+" is "+want))
		return Denied(clusterDenied, "principal %s may not act as broker %d (that is %s)", p, id, want)
	}
	return nil
}

// BrokerPrincipal returns broker id's principal under template.
func BrokerPrincipal(template string, id int32) string {
	return strings.ReplaceAll(template, "{id}", strconv.Itoa(int(id)))
}

// clusterDenied is the code of a refusal on the cluster or a mirror.
const clusterDenied = pb.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED

// DeniedCode is the code a denial on a resource of type t answers with
// (Kafka's TOPIC_, GROUP_ and CLUSTER_AUTHORIZATION_FAILED).
func DeniedCode(t acl.ResourceType) pb.ErrorCode {
	switch t {
	case acl.Topic:
		return pb.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED
	case acl.Group:
		return pb.ErrorCode_ERROR_CODE_GROUP_AUTHORIZATION_FAILED
	}
	return clusterDenied
}

// Denied is the PermissionDenied status of a refusal with code: its message
// starts with the code's name (errcode.DeniedMessagePrefix), which
// errcode.Denied reads back (a mirror's source client turns it into the
// code, the Kafka listener into Kafka's).
func Denied(code pb.ErrorCode, format string, args ...any) error {
	return status.Error(codes.PermissionDenied, errcode.DeniedMessagePrefix(code)+fmt.Sprintf(format, args...))
}
