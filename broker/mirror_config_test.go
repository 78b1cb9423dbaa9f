package broker

import (
	"testing"
	"time"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastate"
)

// TestMirrorConfigPrecedence: a broker-scoped mirror setting comes from the
// cluster if an operator set it there (dynamic), else from the broker's own
// config (brokerd's file, static), else the cluster default — Kafka's
// order. brokerd used to drop its file's mirror.* values, and the broker
// took its own value over one set cluster-wide.
func TestMirrorConfigPrecedence(t *testing.T) {
	img := metastate.New(metastate.Config{})
	b := &Broker{image: img, cfg: Config{MirrorPendingTimeout: 7 * time.Second}}
	key := metastate.KeyMirrorPendingTimeoutMs
	if got := b.mirrorConfigMs(b.cfg.MirrorPendingTimeout.Milliseconds(), key); got != 7000 {
		t.Fatalf("own setting: %d, want 7000", got)
	}
	if got := b.mirrorConfigMs(0, key); got != 300000 {
		t.Fatalf("unset everywhere: %d, want the cluster default 300000", got)
	}
	d, resp := img.AlterConfigs(&twinlogv1.AlterConfigsRequest{Resources: []*twinlogv1.AlterConfigsResource{{
		Resource: &twinlogv1.ConfigResource{Type: twinlogv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER},
		Set:      map[string]string{key: "45000"}}}})
	if e := resp.GetResults()[0].GetError(); e != twinlogv1.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("AlterConfigs: %v %s", e, resp.GetResults()[0].GetErrorMessage())
	}
	if _, err := img.Apply(d); err != nil {
		t.Fatal(err)
	}
	if got := b.mirrorConfigMs(b.cfg.MirrorPendingTimeout.Milliseconds(), key); got != 45000 {
		t.Fatalf("set cluster-wide: %d, want 45000 over the broker's own 7000", got)
	}
}
