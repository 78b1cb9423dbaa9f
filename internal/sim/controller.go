package sim

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	ctlshell "github.com/twinlog/twinlog/controller"
	"github.com/twinlog/twinlog/controller/memstore"
	"github.com/twinlog/twinlog/controller/metastate"
	"github.com/twinlog/twinlog/internal/rpcopt"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/security/transport"
)

// controller is one cluster's controller: the shipped shell
// (controller.Controller) on an in-memory store (controller/memstore),
// driven by the simulator's clock and network. The simulator calls the
// shell's broker-facing service for brokers' RPCs, Tick on the controller's
// tick, Propose for the operator's commands, and carries recovery rounds'
// questions over its network (AskReplicaLogs).
//
// The checks of SPEC §8's controller invariants watch every change the
// shell commits (committed): CheckTransition (invariants 3, 4, 6) against
// the image before it, CheckInvariants (1, 2, 4) on the shell's state.
type controller struct {
	s     *Sim
	shell *ctlshell.Controller
	svc   pb.ControllerServiceServer
	admin pb.AdminServiceServer // the operator's (twinctl's) service
	store *memstore.Store
	// image is the checker's copy of the metadata the shell committed (every
	// delta, applied as brokers apply them): the simulator reads the
	// cluster's metadata from here, and it is the "before" of each change.
	image *metadata.Image
	inc   int // incarnation: a restart drops connections and soft state
	// what and bumped describe the command in progress, for traces and
	// CheckTransition (a BumpLeaderEpoch may raise the LE by more than one).
	what   string
	bumped bool
	// sync is the offset sync in progress (offsetsync.go), nil if none.
	sync *syncRun
}

func newController(s *Sim) *controller {
	c := &controller{s: s, store: memstore.New(memstore.Options{}), image: metadata.New(s.clusterID)}
	c.start(c.store)
	return c
}

// start runs a new shell on store.
func (c *controller) start(store *memstore.Store) {
	s := c.s
	rpcTimeout := time.Duration(s.cfg.RPCTimeoutMs) * time.Millisecond
	shell, err := ctlshell.New(ctlshell.Config{
		ClusterID:          s.clusterID,
		RecoveryRPCTimeout: rpcTimeout,
		// Time runs compressed here (sessions of 600 ms, recovery rounds
		// of 1.5 s): the backoff between failed rounds scales with it.
		RecoveryRetryBackoff:    rpcTimeout / 5,
		RecoveryRetryMaxBackoff: time.Duration(s.cfg.UncleanRecoveryTimeoutMs) * time.Millisecond,
		// Compaction (a fault, compact) keeps few deltas, and responses
		// are small: a broker that restarts or falls behind catches up
		// through a snapshot of several pages.
		RetainDeltas:  compactRetain,
		MaxFetchBytes: 300,
		// Every call goes through the authorizer (rpc): brokers act only as
		// themselves (the template), the operator is a super user.
		Authz: s.authzConfig(),
	}, ctlshell.Deps{
		// The state machine's clock is the simulator's: ms since the start.
		Now:       func() time.Time { return time.UnixMilli(s.now) },
		Rand:      s.rng,
		Store:     store,
		Rounds:    c,
		Committed: c.committed,
		// The offset sync's calls and waits (offsetsync.go).
		Dial:  func(addr string) (rpcopt.Conn, error) { return simConn{addr}, nil },
		Sleep: syncSleep,
	})
	if err != nil {
		s.fail("controller start", "%v", err)
		return
	}
	c.shell, c.svc, c.admin = shell, shell.ControllerService(), shell.AdminService()
}

// committed is the shell's commit hook: the checks, the trace and the
// history of every change.
func (c *controller) committed(st *metastate.State, d *pb.MetadataDelta, evs []metastate.Event) {
	s := c.s
	what := c.what
	s.report.Checks["controller-transition"]++
	if err := metastate.CheckTransition(c.image.Snapshot(), d, c.bumped); err != nil {
		s.fail("§8.1-6 controller transition ("+what+")", "%v\ndelta: %v", err, d)
		return
	}
	if err := c.image.Apply(d); err != nil {
		s.fail("controller apply", "%s: %v", what, err)
		return
	}
	s.report.Checks["controller-invariants"]++
	if err := st.CheckInvariants(); err != nil {
		s.fail("§8.1-4 controller invariants", "after %s: %v", what, err)
	}
	for _, p := range d.GetPartitions() {
		s.tracef("ctl %s: %s-%d L %d LE %d PE %d ISR %v ELR %v LKE %v LKL %d %v", what, p.GetTopic(), p.GetPartition(),
			p.GetLeader(), p.GetLeaderEpoch(), p.GetPartitionEpoch(), p.GetIsr(), p.GetElr(), p.GetLastKnownElr(), p.GetLastKnownLeader(),
			shortRecovery(p.GetRecoveryState()))
	}
	for _, b := range d.GetBrokers() {
		s.tracef("ctl %s: broker %d epoch %d fenced %t shutdown %t", what, b.GetBrokerId(), b.GetBrokerEpoch(), b.GetFenced(), b.GetInControlledShutdown())
	}
	for _, ev := range evs {
		tp := fmt.Sprintf("%s-%d", ev.Topic, ev.Partition)
		switch ev.Kind {
		case metastate.EventLeaderElected:
			s.report.Elections++
		case metastate.EventUncleanLeaderElected:
			s.report.UncleanElections++
			s.hist.RecordTruncation(tp, ev.LeaderEpoch)
			s.noteUnclean(tp, ev.LeaderEpoch)
			s.tracef("ctl unclean election %s leader %d LE %d", tp, ev.Broker, ev.LeaderEpoch)
			if s.w != nil {
				s.w.onUncleanElection(s, tp, ev.Broker)
			}
		case metastate.EventBrokerFenced:
			s.report.Fences++
		}
	}
}

// call runs one command on the shell as what (bumped: a BumpLeaderEpoch).
func (c *controller) call(what string, bumped bool, fn func()) {
	c.what, c.bumped = what, bumped
	fn()
	c.what, c.bumped = "", false
}

// do runs one operator command: fn computes a delta on the shell's state,
// which the shell persists and applies (Controller.Propose, the path every
// admin RPC takes).
func (c *controller) do(what string, fn func(st *metastate.State) *pb.MetadataDelta) {
	c.call(what, false, func() {
		if err := c.shell.Propose(fn); err != nil {
			c.s.fail("controller command", "%s: %v", what, err)
		}
	})
}

// rpc calls a broker-facing RPC of the shell, as its gRPC server would.
// An error (none is expected: the in-memory store does not fail) fails
// the run.
func rpc[Req, Resp any](c *controller, what string, bumped bool, as caller, call func(context.Context, Req) (Resp, error), req Req) Resp {
	var resp Resp
	c.call(what, bumped, func() {
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: simAddr{}, AuthInfo: transport.AuthInfo{Principal: as.principal}})
		out, err := c.shell.Interceptor()(ctx, req, &grpc.UnaryServerInfo{FullMethod: as.method}, func(ctx context.Context, req any) (any, error) {
			return call(ctx, req.(Req))
		})
		if err != nil {
			c.s.fail("controller rpc", "%s: %v", what, err)
			return
		}
		resp = out.(Resp)
	})
	return resp
}

// caller is who makes an RPC and which: the principal the authorizer sees
// and the RPC's full method name.
type caller struct{ principal, method string }

func brokerCaller(s *Sim, id int32, method string) caller {
	return caller{s.brokerPrincipal(id), method}
}

// brokerPrincipal is broker id's principal: named by its cluster, as a
// certificate's subject would be, so that one cluster's brokers are
// strangers to the other (whose operator grants them what mirroring
// needs, world.grantMirroring).
func (s *Sim) brokerPrincipal(id int32) string {
	return fmt.Sprintf("User:%s-broker-%d", s.clusterID, id)
}

// brokerTemplate is authz's BrokerPrincipalTemplate for the cluster.
func (s *Sim) brokerTemplate() string { return "User:" + s.clusterID + "-broker-{id}" }

// controllerPrincipal is the cluster's controller's principal (recovery
// rounds).
func (s *Sim) controllerPrincipal() string { return "User:" + s.clusterID + "-controller" }

// operatorCaller is the simulated operator, a super user.
func operatorCaller(method string) caller { return caller{"User:operator", method} }

// superUsers are the operator, the controller and the brokers of the
// cluster.
func (s *Sim) superUsers() []string {
	out := []string{"User:operator", s.controllerPrincipal()}
	for id := 1; id <= s.report.Brokers; id++ {
		out = append(out, s.brokerPrincipal(int32(id)))
	}
	return out
}

// simAddr is every simulated caller's address.
type simAddr struct{}

func (simAddr) Network() string { return "sim" }
func (simAddr) String() string  { return "sim" }

func (c *controller) tick() {
	c.call("tick", false, func() {
		if err := c.shell.Tick(context.Background()); err != nil {
			c.s.fail("controller tick", "%v", err)
		}
	})
}

// AskReplicaLogs carries a recovery round's GetReplicaLogInfo questions
// over the simulated network (controller.RoundTransport): done gets the
// answers once all candidates answered, or what arrived when timeout
// passes.
func (c *controller) AskReplicaLogs(ctx context.Context, r metastate.Round, targets []ctlshell.RoundTarget, timeout time.Duration, done func([]metastate.ReplicaLogAnswer)) {
	s := c.s
	s.report.RecoveryRounds++
	s.tracef("ctl round %d %s-%d %s candidates %v", r.ID, r.Topic, r.Partition, r.Strategy, r.Candidates)
	answers := map[int32]metastate.ReplicaLogAnswer{}
	asked, finished := 0, false
	finish := func() {
		if finished {
			return
		}
		finished = true
		var out []metastate.ReplicaLogAnswer
		for _, t := range targets {
			if a, ok := answers[t.Broker]; ok {
				out = append(out, a)
			}
		}
		c.call("round", false, func() { done(out) })
		s.tracef("ctl round %d done: %d answers", r.ID, len(out))
	}
	s.after(timeout.Milliseconds(), finish)
	for _, t := range targets {
		if t.Addr == "" || t.Broker < 1 || int(t.Broker) > len(s.brokers) {
			continue
		}
		asked++
		b := s.brokers[t.Broker-1]
		req := &pb.GetReplicaLogInfoRequest{Topics: []*pb.GetReplicaLogInfoTopic{{Topic: r.Topic, TopicId: r.TopicID, Partitions: []int32{r.Partition}}}}
		s.net.send(controllerNode, nodeID(t.Broker), "get-replica-log-info", func() {
			if b.admit(s.controllerPrincipal(), pb.ReplicationService_GetReplicaLogInfo_FullMethodName, req) != nil {
				return // the round counts no answer from it
			}
			ans := b.replicaLogInfo(r.Topic, r.TopicID, r.Partition)
			s.net.send(nodeID(t.Broker), controllerNode, "replica-log-info", func() {
				if finished {
					return
				}
				answers[t.Broker] = ans
				if len(answers) == asked {
					finish()
				}
			})
		})
	}
}

// restart models a controller fail-over to the same persisted log: a new
// shell starts on what the store kept (every change: the in-memory store
// syncs each write), soft state (heartbeat times, rounds) is lost and
// connections break.
func (c *controller) restart() {
	s := c.s
	if c.sync != nil {
		c.sync.abandon()
		c.sync = nil
	}
	c.shell.Close()
	c.store = c.store.CrashClone()
	c.inc++
	c.start(c.store)
	s.report.Faults["controller-restart"]++
	s.tracef("controller restart at offset %d", c.image.Offset())
}

// compactRetain is how many deltas a compaction keeps behind its snapshot.
const compactRetain = 16

// compact has the controller snapshot its image and drop the deltas before
// the last compactRetain (controller.Compact, what its Run loop does every
// CompactEveryDeltas changes).
func (c *controller) compact() {
	s := c.s
	if err := c.shell.Compact(); err != nil {
		s.fail("controller compact", "%v", err)
		return
	}
	s.report.Faults["controller-compact"]++
	s.tracef("controller compacted at offset %d", c.image.Offset())
}

// fetchMetadata is a broker's FetchMetadata, without a long-poll wait
// (brokers poll on their own timer here).
func (c *controller) fetchMetadata(req *pb.FetchMetadataRequest) *pb.FetchMetadataResponse {
	return rpc(c, "fetch-metadata", false, brokerCaller(c.s, req.GetBrokerId(), pb.ControllerService_FetchMetadata_FullMethodName), c.svc.FetchMetadata, req)
}

func shortRecovery(r pb.LeaderRecoveryState) string {
	if r == pb.LeaderRecoveryState_LEADER_RECOVERY_STATE_RECOVERING {
		return "RECOVERING"
	}
	return ""
}
