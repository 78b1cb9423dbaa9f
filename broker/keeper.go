package broker

import (
	"context"
	"time"

	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/broker/session"
)

// register starts the broker's session.Keeper and waits for the first
// registration (SPEC §3.2; PreviousBrokerEpoch from the clean-shutdown
// files, §2.5). It fails only when the controller refuses the request as
// invalid, or with ErrNotRunning when inner or outer ends first.
func (b *Broker) register(inner, outer context.Context) error {
	if _, _, err := b.advertised(); err != nil {
		return err
	}
	if _, _, err := b.kafkaAdvertised(); err != nil {
		return err
	}
	b.keeper.Start()
	select {
	case <-b.registeredc:
		return nil
	case err := <-b.regFatal:
		return err
	case <-inner.Done():
	case <-outer.Done():
	}
	return ErrNotRunning
}

// kickHeartbeat sends a heartbeat now (after the one in flight), so the
// controller learns the applied metadata offset without waiting an
// interval.
func (b *Broker) kickHeartbeat() { b.keeper.Kick() }

// controlledShutdown asks the controller to move leadership away (SPEC
// §3.2 wantShutDown) and waits, bounded, until it grants the shutdown.
func (b *Broker) controlledShutdown(ctx context.Context) {
	b.keeper.ShutDown()
	t := time.NewTimer(b.cfg.ControlledShutdownTimeout)
	defer t.Stop()
	select {
	case <-b.grantedc:
		// Let the metadata that moved leadership arrive, so produce
		// requests fail over with NOT_LEADER rather than timing out.
		b.log.Info("controlled shutdown granted")
	case <-t.C:
		b.log.Warn("controlled shutdown not granted in time; shutting down anyway")
	case <-ctx.Done():
	}
}

// keeperEnv sends the Keeper's requests and runs its pauses on goroutines
// of the run (seam.go), each request bounded by the RPC timeout.
type keeperEnv struct{ b *Broker }

func (e keeperEnv) After(d time.Duration, f func()) { e.b.runAfter(d, f) }

func (e keeperEnv) Register(req *pb.RegisterBrokerRequest, done func(*pb.RegisterBrokerResponse, error)) {
	callController(e.b, e.b.cfg.RPCTimeout, func(ctx context.Context, ctl pb.ControllerServiceClient) (*pb.RegisterBrokerResponse, error) {
		return ctl.RegisterBroker(ctx, req)
	}, done)
}

func (e keeperEnv) Heartbeat(req *pb.BrokerHeartbeatRequest, done func(*pb.BrokerHeartbeatResponse, error)) {
	callController(e.b, e.b.cfg.RPCTimeout, func(ctx context.Context, ctl pb.ControllerServiceClient) (*pb.BrokerHeartbeatResponse, error) {
		return ctl.BrokerHeartbeat(ctx, req)
	}, done)
}

// keeperHost is the broker as its Keeper's host.
type keeperHost struct{ b *Broker }

func (h keeperHost) RegisterRequest() *pb.RegisterBrokerRequest {
	b := h.b
	host, port, _ := b.advertised()        // checked by register
	khost, kport, _ := b.kafkaAdvertised() // checked by register
	return &pb.RegisterBrokerRequest{
		BrokerId: int32(b.cfg.ID), IncarnationId: b.incarn, Host: host, Port: port,
		KafkaHost: khost, KafkaPort: kport,
		LogDirs: b.cfg.LogDirs, ClusterId: b.cfg.ClusterID,
	}
}

// HeartbeatRequest reports the applied metadata offset (unfencing, SPEC
// §3.2), the mirror partitions' states and the offline partitions.
func (h keeperHost) HeartbeatRequest() *pb.BrokerHeartbeatRequest {
	b := h.b
	b.metaMu.Lock()
	applied := b.image.Offset()
	b.metaMu.Unlock()
	return &pb.BrokerHeartbeatRequest{
		BrokerId: int32(b.cfg.ID), AppliedOffset: applied,
		MirrorPartitions: b.mirrorStatuses(), OfflinePartitions: b.offlineReport,
	}
}

func (h keeperHost) Registered(epoch int64, again bool) {
	b := h.b
	if again {
		b.log.Info("broker re-registered", "broker_epoch", epoch)
		return
	}
	close(b.registeredc)
}

func (h keeperHost) RegisterFailed(err error, fatal bool) {
	b := h.b
	if !fatal {
		b.log.Debug("register broker", "err", err)
		return
	}
	b.log.Error("register broker: refused", "err", err)
	select {
	case b.regFatal <- err:
	default:
	}
}

func (h keeperHost) HeartbeatAnswered(req *pb.BrokerHeartbeatRequest, resp *pb.BrokerHeartbeatResponse, err error, reregister bool) {
	b := h.b
	switch {
	case err != nil:
		b.log.Debug("heartbeat", "err", err)
	case reregister:
		b.log.Warn("heartbeat: stale broker epoch; re-registering", "broker_epoch", b.brokerEpoch())
	case req.GetWantShutDown() && session.ShutdownGranted(resp):
		b.grantOnce.Do(func() { close(b.grantedc) })
	}
}
