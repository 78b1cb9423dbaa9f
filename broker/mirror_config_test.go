package broker

import (
	"testing"
	"time"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// TestMirrorConfigPrecedence: a broker-scoped mirror setting comes from the
// cluster if an operator set it there (dynamic), else from the broker's own
// config (brokerd's file, static), else the cluster default — Kafka's
// order. brokerd used to drop its file's mirror.* values, and the broker
// took its own value over one set cluster-wide.
func TestMirrorConfigPrecedence(t *testing.T) {
	img := metadata.New("")
	b := &Broker{image: img, cfg: Config{MirrorPendingTimeout: 7 * time.Second}}
	key := metadata.KeyMirrorPendingTimeoutMs
	if got := b.mirrorConfigMs(b.cfg.MirrorPendingTimeout.Milliseconds(), key); got != 7000 {
		t.Fatalf("own setting: %d, want 7000", got)
	}
	if got := b.mirrorConfigMs(0, key); got != 300000 {
		t.Fatalf("unset everywhere: %d, want the cluster default 300000", got)
	}
	// What the controller writes for AlterConfigs on the cluster's brokers:
	// the cluster configs' record with the key set.
	d := &twinlogv1.MetadataDelta{Offset: img.Offset() + 1,
		ClusterConfig: &twinlogv1.ClusterConfigRecord{Configs: map[string]string{key: "45000"}}}
	if err := img.Apply(d); err != nil {
		t.Fatal(err)
	}
	if got := b.mirrorConfigMs(b.cfg.MirrorPendingTimeout.Milliseconds(), key); got != 45000 {
		t.Fatalf("set cluster-wide: %d, want 45000 over the broker's own 7000", got)
	}
}
