package metastate

import "slices"

// Replica sets (ISR, ELR, LKE) are kept in replica (R) order so that equal
// sets compare equal and "first in R order" is simply the first element.

func contains(s []int32, b int32) bool { return slices.Contains(s, b) }

// inROrder returns the members of set that are in r, in r's order, without
// duplicates.
func inROrder(r, set []int32) []int32 {
	var out []int32
	for _, b := range r {
		if contains(set, b) && !contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

func union(a, b []int32) []int32 {
	out := slices.Clone(a)
	for _, x := range b {
		if !contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func minus(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func intersect(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func subset(a, b []int32) bool {
	for _, x := range a {
		if !contains(b, x) {
			return false
		}
	}
	return true
}

// hasDuplicates is linear in len(a): a request's list (a reassignment
// target, an assignment) may be long, and a quadratic scan of a million ids
// would hold the controller's lock for minutes. Short lists (replica sets)
// skip the map.
func hasDuplicates(a []int32) bool {
	if len(a) <= 16 {
		for i, x := range a {
			if slices.Contains(a[i+1:], x) {
				return true
			}
		}
		return false
	}
	seen := make(map[int32]struct{}, len(a))
	for _, x := range a {
		if _, dup := seen[x]; dup {
			return true
		}
		seen[x] = struct{}{}
	}
	return false
}

func sameSet(a, b []int32) bool { return len(a) == len(b) && subset(a, b) && subset(b, a) }

func setOf(b ...int32) map[int32]bool {
	m := make(map[int32]bool, len(b))
	for _, x := range b {
		m[x] = true
	}
	return m
}

func keys(m map[int32]bool) []int32 {
	var out []int32
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
