package controller

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestACLSyncStatus: what DescribeMirrors shows of an ACL sync for one
// mirror: its source's bindings or error, else the sync's error, the
// missing filters, and nothing for a mirror the sync did not reach.
func TestACLSyncStatus(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	ok := ACLSyncResult{At: at, Created: 2, Removed: 1, Sources: map[string]ACLSyncSource{"m": {Bindings: 5}}}
	failed := ACLSyncResult{At: at, Created: 1, Incomplete: true, Err: "mirror n: refused",
		Sources: map[string]ACLSyncSource{"m": {Bindings: 5}, "n": {Err: "refused"}}}
	for _, tc := range []struct {
		name   string
		res    ACLSyncResult
		mirror string
		want   *twinlogv1.MirrorAclSyncStatus
	}{
		{"read", ok, "m", &twinlogv1.MirrorAclSyncStatus{SyncedAtMs: at.UnixMilli(), SourceBindings: 5, Created: 2, Removed: 1}},
		{"created since", ok, "new", nil},
		{"its source refused", failed, "n", &twinlogv1.MirrorAclSyncStatus{SyncedAtMs: at.UnixMilli(), Created: 1, RemovalsSkipped: true, Error: "refused"}},
		{"another source refused", failed, "m", &twinlogv1.MirrorAclSyncStatus{SyncedAtMs: at.UnixMilli(), SourceBindings: 5, Created: 1, RemovalsSkipped: true, Error: "mirror n: refused"}},
		{"no filters", ACLSyncResult{At: at, NoFilters: true, Sources: map[string]ACLSyncSource{}}, "m",
			&twinlogv1.MirrorAclSyncStatus{SyncedAtMs: at.UnixMilli(), Error: "mirror.acl.sync.filters is empty: no binding is synced"}},
	} {
		if got := tc.res.status(tc.mirror); !proto.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
