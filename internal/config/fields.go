package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/twinlog/twinlog/internal/configdef"
)

// value is one setting as the operator wrote it, before it is parsed: the
// text of a scalar, or the items of a YAML sequence. YAML scalars keep their
// source text (see parseYAML), so `010` reaches the parsers as "010" and not
// as the octal 8 a YAML 1.1 resolver makes of it.
type value struct {
	text   string
	items  []string // a YAML sequence's items, when isList
	isList bool
	null   bool   // YAML null: `key:` or `key: ~`
	source string // where it came from: default, file NAME, env NAME, flag --NAME
}

// String renders v for an error message: the text as written (quoted when
// empty or padded), a list in brackets.
func (v value) String() string {
	switch {
	case v.isList:
		return "[" + strings.Join(v.items, ", ") + "]"
	case v.null:
		return "null"
	case v.text == "" || strings.TrimSpace(v.text) != v.text || strings.ContainsAny(v.text, "\n\r\t"):
		return strconv.Quote(v.text)
	}
	return v.text
}

// scalar returns v's trimmed text, or an error if v is not one value.
func (v value) scalar() (string, error) {
	switch {
	case v.isList:
		return "", errors.New("want a single value, not a list")
	case v.null:
		return "", errors.New("empty value")
	}
	return strings.TrimSpace(v.text), nil
}

// parseDecimal parses s strictly and checks lo ≤ n ≤ hi: configdef's rule
// (an optional '-', decimal digits without leading zeros; no 0x/0o/0b,
// '+', '_', fraction, exponent or boolean), which AlterConfigs applies at
// run time too.
func parseDecimal(s string, lo, hi int64) (int64, error) {
	return configdef.ParseDecimal(s, lo, hi)
}

type integer interface{ ~int | ~int32 | ~int64 }

// intRange is the range T holds: int32's or int64's (int is 64-bit on
// every platform twinlog builds for; a 32-bit int gets int32's).
func intRange[T integer]() (lo, hi int64) {
	hi = math.MaxInt64
	if int64(T(hi)) != hi {
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

// parseInt parses s as a config integer of type T: decimal only, optional
// leading '-', in T's range. Per-key minimums are Validate's.
func parseInt[T integer](s string) (T, error) {
	lo, hi := intRange[T]()
	n, err := parseDecimal(strings.TrimSpace(s), lo, hi)
	return T(n), err
}

// maxMillis is the largest count of milliseconds a time.Duration holds
// (about 292 years); beyond it n*time.Millisecond would wrap.
const maxMillis = configdef.MaxMillis

// parseMillis parses s as a .ms key: a decimal integer (parseInt's rule)
// of milliseconds that fits a time.Duration. -1 stays -1ms, Kafka's
// "unlimited" where the key allows it.
func parseMillis(s string) (time.Duration, error) {
	n, err := parseDecimal(strings.TrimSpace(s), math.MinInt64, math.MaxInt64)
	if err != nil {
		return 0, err
	}
	if n > maxMillis || n < -maxMillis {
		return 0, fmt.Errorf("out of range: at most %d ms (about 292 years) in absolute value, or the duration would overflow", maxMillis)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// parseBool accepts exactly true or false, in any case (configdef's rule,
// AlterConfigs' too); 1, yes, on and t are refused.
func parseBool(s string) (bool, error) { return configdef.ParseBool(s) }

func intField[T integer](key, def, usage string, dst *T) field {
	return field{key: key, def: def, usage: usage, set: func(v value) error {
		s, err := v.scalar()
		if err != nil {
			return fmt.Errorf("%w: want a decimal integer", err)
		}
		n, err := parseInt[T](s)
		if err != nil {
			return err
		}
		*dst = n
		return nil
	}}
}

// msField reads milliseconds into a time.Duration; -1 stays -1ms ("unlimited").
func msField(key, def, usage string, dst *time.Duration) field {
	return field{key: key, def: def, usage: usage, set: func(v value) error {
		s, err := v.scalar()
		if err != nil {
			return fmt.Errorf("%w: want an integer number of milliseconds", err)
		}
		d, err := parseMillis(s)
		if err != nil {
			return fmt.Errorf("want an integer number of milliseconds: %w", err)
		}
		*dst = d
		return nil
	}}
}

// kafkaLongMax is Java's Long.MAX_VALUE, which Kafka documents as "no
// bound" for log.message.timestamp.before.max.ms (its default) and
// after.max.ms (its default before Kafka 4.0): operators copy it from
// Kafka's configs, so it is accepted as that, not refused as a .ms value
// that overflows a time.Duration.
const kafkaLongMax = "9223372036854775807"

// NoTimestampBound is a log.message.timestamp.*.max.ms key set to
// kafkaLongMax.
const NoTimestampBound = time.Duration(math.MaxInt64)

// timestampBoundField is msField that also reads kafkaLongMax, exactly, as
// NoTimestampBound.
func timestampBoundField(key, def, usage string, dst *time.Duration) field {
	ms := msField(key, def, usage, dst)
	set := ms.set
	ms.set = func(v value) error {
		if s, err := v.scalar(); err == nil && s == kafkaLongMax {
			*dst = NoTimestampBound
			return nil
		}
		return set(v)
	}
	return ms
}

func strField(key, def, usage string, dst *string) field {
	return field{key: key, def: def, usage: usage, set: func(v value) error {
		if v.null {
			*dst = ""
			return nil
		}
		s, err := v.scalar()
		if err != nil {
			return fmt.Errorf("%w: want a string", err)
		}
		*dst = s
		return nil
	}}
}

func boolField(key, def, usage string, dst *bool) field {
	return field{key: key, def: def, usage: usage, set: func(v value) error {
		s, err := v.scalar()
		if err != nil {
			return fmt.Errorf("%w: allowed values are true, false", err)
		}
		b, err := parseBool(s)
		if err != nil {
			return err
		}
		*dst = b
		return nil
	}}
}

// listField accepts a YAML sequence or a comma-separated string.
func listField(key, def, usage string, dst *[]string) field {
	return sepListField(key, def, usage, ",", dst)
}

// sepListField accepts a YAML sequence or a string of items separated by
// sep (super.users is ';'-separated as in Kafka: principals hold commas).
func sepListField(key, def, usage, sep string, dst *[]string) field {
	return field{key: key, def: def, usage: usage, set: func(v value) error {
		items := v.items
		if !v.isList && !v.null {
			items = strings.Split(v.text, sep)
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
