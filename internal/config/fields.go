package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cast"
)

type integer interface{ ~int | ~int32 | ~int64 }

func intField[T integer](key, def, usage string, dst *T) field {
	return field{key: key, def: def, usage: usage, set: func(raw any) error {
		if s, ok := raw.(string); ok {
			raw = strings.TrimSpace(s)
		}
		n, err := cast.ToInt64E(raw)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		if int64(T(n)) != n {
			return fmt.Errorf("out of range")
		}
		*dst = T(n)
		return nil
	}}
}

// msField reads milliseconds into a time.Duration; -1 stays -1ms ("unlimited").
func msField(key, def, usage string, dst *time.Duration) field {
	var ms int64
	inner := intField(key, def, usage, &ms)
	return field{key: key, def: def, usage: usage, set: func(raw any) error {
		if err := inner.set(raw); err != nil {
			return fmt.Errorf("want an integer number of milliseconds")
		}
		*dst = time.Duration(ms) * time.Millisecond
		return nil
	}}
}

func strField(key, def, usage string, dst *string) field {
	return field{key: key, def: def, usage: usage, set: func(raw any) error {
		s, err := cast.ToStringE(raw)
		if err != nil {
			return fmt.Errorf("want a string")
		}
		*dst = strings.TrimSpace(s)
		return nil
	}}
}

func boolField(key, def, usage string, dst *bool) field {
	return field{key: key, def: def, usage: usage, set: func(raw any) error {
		if s, ok := raw.(string); ok {
			b, err := strconv.ParseBool(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("allowed values are true, false")
			}
			*dst = b
			return nil
		}
		b, err := cast.ToBoolE(raw)
		if err != nil {
			return fmt.Errorf("allowed values are true, false")
		}
		*dst = b
		return nil
	}}
}

// listField accepts a YAML sequence or a comma-separated string.
func listField(key, def, usage string, dst *[]string) field {
	return field{key: key, def: def, usage: usage, set: func(raw any) error {
		var items []string
		if s, ok := raw.(string); ok {
			items = strings.Split(s, ",")
		} else {
			var err error
			if items, err = cast.ToStringSliceE(raw); err != nil {
				return fmt.Errorf("want a list or a comma-separated string")
			}
		}
		var out []string
		for _, it := range items {
			if it = strings.TrimSpace(it); it != "" {
				out = append(out, it)
			}
		}
		*dst = out
		return nil
	}}
}
