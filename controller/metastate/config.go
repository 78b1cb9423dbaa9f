package metastate

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/internal/configdef"
	"github.com/twinlog/twinlog/metadata"
)

// The config table and the resolution of effective values are
// metadata's (one copy, shared with the brokers' images); the constants
// below are the controller's own.
const (
	mirrorStateTopic              = "__mirror_state"
	maxTruncationPoints           = 8
	maxTopicNameLength            = 249
	defaultMirrorTopicReplication = 3
)

// configDef returns the definition of key, the zero ConfigDef for an
// unknown key.
func configDef(key string) metadata.ConfigDef {
	d, _ := metadata.LookupConfig(key)
	return d
}

// InitialClusterConfigs returns the delta that writes the first-start
// cluster configs (SPEC §1.3) of an empty image, static keys included
// (mirror.state.topic.replication.factor, mirror.state.topic.num.partitions
// can only be set this way). Keys must be of cluster scope and valid; values
// equal to the default are not written, so an all-default map gives a nil
// delta. It fails on a non-empty image (offset > 0): later changes go through
// AlterConfigs.
func (s *State) InitialClusterConfigs(cfg map[string]string) (*twinlogv1.MetadataDelta, error) {
	if s.Offset() != 0 {
		return nil, fmt.Errorf("metastate: initial cluster configs on a non-empty image (offset %d)", s.Offset())
	}
	out := map[string]string{}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		v := cfg[k]
		if err := metadata.ValidateConfig(metadata.ScopeCluster, k, v); err != nil {
			errs = append(errs, err)
			continue
		}
		if v = configdef.Canonical(k, v); configDef(k).Default != v {
			out[k] = v
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("metastate: initial cluster configs: %w", err)
	}
	if err := metadata.CheckOrders(out, func(k string) bool { _, ok := cfg[k]; return ok }); err != nil {
		return nil, fmt.Errorf("metastate: initial cluster configs: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &twinlogv1.MetadataDelta{Offset: s.Offset() + 1, ClusterConfig: &twinlogv1.ClusterConfigRecord{Configs: out}}, nil
}
