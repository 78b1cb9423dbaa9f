package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/status"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/controller/metastate"
	"github.com/twinlog/twinlog/internal/rpcopt"
	"github.com/twinlog/twinlog/metadata"
	"github.com/twinlog/twinlog/security/acl"
)

// A mirror link's ACL sync (issue 17; the rules are acl.SyncPlan's, after
// Confluent Cluster Linking's acl.sync.enable): while
// mirror.acl.sync.enable is true, every mirror.acl.sync.interval.ms the
// controller of the destination cluster reads the ACLs of every mirror's
// source (AdminService.DescribeAcls through the mirror's bootstrap, which
// the source authorizes as Describe on its Cluster), creates here the
// bindings mirror.acl.sync.filters select that it lacks, and removes the
// bindings here the filters select that no source has, but only when
// every source answered. The filters say which bindings the link owns: a
// binding kept by hand on the destination must stay outside them.

// aclSyncPoll is how often the loop looks at the settings while the sync
// is off (or there are no mirrors).
const aclSyncPoll = time.Second

// aclSyncLoop runs syncACLs every interval until ctx ends.
func (c *Controller) aclSyncLoop(ctx context.Context) {
	for {
		c.mu.RLock()
		enabled := c.state.ClusterConfig(metadata.KeyMirrorACLSyncEnable) == "true"
		interval := time.Duration(metadata.ConfigInt(c.state.ClusterConfig(metadata.KeyMirrorACLSyncIntervalMs), 5000)) * time.Millisecond
		mirrors := len(c.state.MirrorNames())
		c.mu.RUnlock()
		if !enabled {
			c.mu.Lock()
			c.lastACLSync = nil // describe shows no sync while it is off
			c.mu.Unlock()
		}
		wait := aclSyncPoll
		if enabled && mirrors > 0 {
			rctx, cancel := context.WithTimeout(ctx, max(interval, c.cfg.RecoveryRPCTimeout))
			c.syncACLs(rctx)
			cancel()
			wait = interval
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// aclSyncSource is one mirror's source cluster.
type aclSyncSource struct {
	mirror    string
	bootstrap []string
	clusterID string
}

// ACLSyncResult is one ACL sync's outcome.
type ACLSyncResult struct {
	At               time.Time
	Created, Removed int
	// Incomplete: a source did not answer, so nothing was removed.
	Incomplete bool
	Err        string
	// Sources are the mirrors' sources as the sync read them, by mirror.
	Sources map[string]ACLSyncSource
	// NoFilters: mirror.acl.sync.filters is empty, so the sync read and
	// changed nothing.
	NoFilters bool
}

// ACLSyncSource is what one ACL sync read from a mirror's source: its
// bindings (all of them, before the filters), or why it could not.
type ACLSyncSource struct {
	Bindings int
	Err      string
}

// status is res as mirror's DescribeMirrors shows it: nil for a mirror
// the sync did not reach (created since) unless the sync failed or had no
// filters.
func (res ACLSyncResult) status(mirror string) *twinlogv1.MirrorAclSyncStatus {
	src, read := res.Sources[mirror]
	st := &twinlogv1.MirrorAclSyncStatus{SyncedAtMs: res.At.UnixMilli(), SourceBindings: int32(src.Bindings),
		Created: int32(res.Created), Removed: int32(res.Removed), RemovalsSkipped: res.Incomplete, Error: src.Err}
	switch {
	case st.Error != "":
	case res.Err != "":
		st.Error = res.Err
	case res.NoFilters:
		st.Error = metadata.KeyMirrorACLSyncFilters + " is empty: no binding is synced"
	case !read:
		return nil
	}
	return st
}

// syncACLs runs one ACL sync over every mirror's source.
func (c *Controller) syncACLs(ctx context.Context) ACLSyncResult {
	res := ACLSyncResult{At: time.Now(), Sources: map[string]ACLSyncSource{}}
	note := func(format string, args ...any) {
		if res.Err == "" {
			res.Err = fmt.Sprintf(format, args...)
		}
	}
	c.mu.RLock()
	filters, err := acl.ParseFilterSet(c.state.ClusterConfig(metadata.KeyMirrorACLSyncFilters))
	var sources []aclSyncSource
	for _, name := range c.state.MirrorNames() {
		m := c.state.Mirror(name)
		sources = append(sources, aclSyncSource{mirror: name, bootstrap: m.GetSourceBootstrap(), clusterID: m.GetSourceClusterId()})
	}
	var here []acl.Binding
	for _, r := range c.state.ACLs() {
		here = append(here, metadata.ACLBinding(r))
	}
	c.mu.RUnlock()
	if err != nil {
		note("%s: %v", metadata.KeyMirrorACLSyncFilters, err) // refused when set; a stored value from an older release
		c.aclSyncDone(res)
		return res
	}
	if len(filters) == 0 {
		res.NoFilters = true
		c.aclSyncDone(res)
		return res
	}
	conns := rpcopt.NewPool(c.dial)
	defer conns.Close()
	var there []acl.Binding
	complete := true
	for _, src := range sources {
		bs, err := sourceACLs(ctx, conns, src.bootstrap, src.clusterID)
		if err != nil {
			complete = false
			note("mirror %s: %v", src.mirror, err)
			res.Sources[src.mirror] = ACLSyncSource{Err: err.Error()}
			continue
		}
		res.Sources[src.mirror] = ACLSyncSource{Bindings: len(bs)}
		there = append(there, bs...)
	}
	res.Incomplete = !complete
	create, remove := acl.SyncPlan(there, here, filters, complete)
	if len(create) > 0 {
		req := &twinlogv1.CreateAclsRequest{}
		for _, b := range create {
			req.Creations = append(req.Creations, metadata.ACLRecord(b))
		}
		resp, err := run(c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.CreateAclsResponse) {
			return st.CreateAcls(req)
		})
		if err != nil {
			note("create: %v", err)
		}
		for i, r := range resp.GetResults() {
			if r.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
				note("create %v: %v %s", create[i], r.GetError(), r.GetErrorMessage())
				continue
			}
			res.Created++
		}
	}
	if len(remove) > 0 {
		req := &twinlogv1.DeleteAclsRequest{}
		for _, b := range remove {
			req.Filters = append(req.Filters, metadata.ACLFilterRecord(b.Filter()))
		}
		resp, err := run(c, func(st *metastate.State) (*twinlogv1.MetadataDelta, *twinlogv1.DeleteAclsResponse) {
			return st.DeleteAcls(req)
		})
		if err != nil {
			note("remove: %v", err)
		}
		for _, r := range resp.GetResults() {
			res.Removed += len(r.GetDeleted())
		}
	}
	c.aclSyncDone(res)
	return res
}

// aclSyncDone logs a sync that changed something or failed, keeps it for
// DescribeMirrors and hands its outcome to the observer.
func (c *Controller) aclSyncDone(res ACLSyncResult) {
	c.mu.Lock()
	c.lastACLSync = &res
	c.mu.Unlock()
	switch {
	case res.Err != "":
		c.log.Info("mirror ACL sync incomplete", "created", res.Created, "removed", res.Removed, "removals_skipped", res.Incomplete, "err", res.Err)
	case res.Created > 0 || res.Removed > 0:
		c.log.Info("mirror ACLs synced", "created", res.Created, "removed", res.Removed)
	}
	if o, ok := c.obs.(ACLSyncObserver); ok {
		o.ObserveACLSync(res)
	}
}

// sourceACLs reads every binding of a mirror's source: DescribeAcls at the
// first bootstrap address whose Metadata answers as the mirror's source
// (sourceMetadata's check, asked of one address at a time).
func sourceACLs(ctx context.Context, conns *rpcopt.Pool, bootstrap []string, sourceID string) ([]acl.Binding, error) {
	lastErr := fmt.Errorf("no bootstrap address")
	for _, addr := range bootstrap {
		if ctx.Err() != nil {
			break
		}
		if md, why := sourceMetadata(ctx, conns, []string{addr}, sourceID, &twinlogv1.MetadataRequest{NoTopics: true}); md == nil {
			lastErr = errors.New(why)
			continue
		}
		conn, err := conns.Get(addr) // the pooled connection Metadata used
		if err != nil {
			lastErr = fmt.Errorf("%s: %v", addr, err)
			continue
		}
		resp, err := twinlogv1.NewAdminServiceClient(conn).DescribeAcls(ctx, &twinlogv1.DescribeAclsRequest{Filter: metadata.ACLFilterRecord(acl.AnyFilter())})
		if err == nil && resp.GetError() != twinlogv1.ErrorCode_ERROR_CODE_NONE {
			err = fmt.Errorf("%v %s", resp.GetError(), resp.GetErrorMessage())
		}
		if err != nil {
			lastErr = fmt.Errorf("DescribeAcls from %s: %s", addr, status.Convert(err).Message())
			continue
		}
		out := make([]acl.Binding, 0, len(resp.GetAcls()))
		for _, r := range resp.GetAcls() {
			out = append(out, metadata.ACLBinding(r))
		}
		return slices.Clip(out), nil
	}
	return nil, lastErr
}
