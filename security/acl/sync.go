package acl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// A mirror's ACL sync (mirror.acl.sync.enable, off by default) copies the
// source cluster's bindings that its filters select to the destination,
// and removes the destination's bindings the filters select that no
// source has, as Confluent Cluster Linking's acl.sync.enable with
// acl.filters does: the filters name the bindings the link owns, so a
// binding managed by hand on the destination must stay outside them.

// MaxSyncFilters bounds a filter set.
const MaxSyncFilters = 100

// ParseFilterSet reads a filter set in Cluster Linking's acl.filters JSON:
//
//	{"aclFilters": [{
//	  "resourceFilter": {"resourceType": "TOPIC", "name": "orders.", "patternType": "PREFIXED"},
//	  "accessFilter": {"principal": "User:app", "host": "*", "operation": "READ", "permissionType": "ALLOW"}}]}
//
// A missing field, or the value "ANY", matches anything (an empty name,
// principal or host too); enum names are matched as the Parse functions
// match them. The empty string is the empty set (nothing is synced).
// Unknown JSON fields are refused, so a misspelt field cannot widen a
// filter to everything.
func ParseFilterSet(s string) ([]Filter, error) {
	if s == "" {
		return nil, nil
	}
	var doc struct {
		ACLFilters []struct {
			ResourceFilter struct {
				ResourceType string `json:"resourceType"`
				Name         string `json:"name"`
				PatternType  string `json:"patternType"`
			} `json:"resourceFilter"`
			AccessFilter struct {
				Principal      string `json:"principal"`
				Host           string `json:"host"`
				Operation      string `json:"operation"`
				PermissionType string `json:"permissionType"`
			} `json:"accessFilter"`
		} `json:"aclFilters"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("acl filters: %w", err)
	}
	if dec.More() {
		return nil, errors.New("acl filters: text after the JSON object")
	}
	if doc.ACLFilters == nil {
		return nil, errors.New(`acl filters: no "aclFilters" list`)
	}
	if len(doc.ACLFilters) > MaxSyncFilters {
		return nil, fmt.Errorf("acl filters: %d filters, at most %d", len(doc.ACLFilters), MaxSyncFilters)
	}
	out := make([]Filter, 0, len(doc.ACLFilters))
	for i, jf := range doc.ACLFilters {
		f := AnyFilter()
		f.ResourceName, f.Principal, f.Host = jf.ResourceFilter.Name, jf.AccessFilter.Principal, jf.AccessFilter.Host
		var errs []error
		parse := func(v string, p func(string) error) {
			if v != "" {
				errs = append(errs, p(v))
			}
		}
		parse(jf.ResourceFilter.ResourceType, func(v string) (err error) { f.ResourceType, err = ParseResourceType(v); return })
		parse(jf.ResourceFilter.PatternType, func(v string) (err error) { f.PatternType, err = ParsePatternType(v); return })
		parse(jf.AccessFilter.Operation, func(v string) (err error) { f.Operation, err = ParseOperation(v); return })
		parse(jf.AccessFilter.PermissionType, func(v string) (err error) { f.Permission, err = ParsePermission(v); return })
		if err := errors.Join(append(errs, f.Validate())...); err != nil {
			return nil, fmt.Errorf("acl filters: filter %d: %w", i, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// selected reports whether one of filters selects b.
func selected(filters []Filter, b Binding) bool {
	return slices.ContainsFunc(filters, func(f Filter) bool { return f.Matches(b) })
}

// SyncPlan is one ACL sync: the bindings of source the filters select
// that dest lacks (to create), and, when removals is true, the bindings of
// dest the filters select that source lacks (to remove); both sorted. A
// sync that could not read every source passes removals false: a binding
// is removed only on the word of a source that answered without it.
func SyncPlan(source, dest []Binding, filters []Filter, removals bool) (create, remove []Binding) {
	have := map[Binding]bool{}
	for _, b := range dest {
		have[b] = true
	}
	want := map[Binding]bool{}
	for _, b := range source {
		if selected(filters, b) && !want[b] {
			want[b] = true
			if !have[b] {
				create = append(create, b)
			}
		}
	}
	if removals {
		for _, b := range dest {
			if selected(filters, b) && !want[b] {
				remove = append(remove, b)
			}
		}
	}
	return SortBindings(create), SortBindings(remove)
}
