// Package configdef is the one table of how a config value is written and
// which values are allowed: for each Kafka-named key its kind (integer,
// milliseconds, boolean, one of a list), its floor and its ceiling, and the
// rules between two keys (a session longer than the heartbeat interval).
//
// Two readers use it and must agree: internal/config, when a daemon starts
// (file, environment, flags), and controller/metastate, when AlterConfigs
// changes a key at run time (twinctl configs set). Before it each had its
// own rule, and `configs set --cluster broker.session.timeout.ms=1` was
// accepted at run time though refused at start.
//
// The package is pure (no I/O, no clocks): metastate may import it. The
// time limit of a .ms key is written out as MaxMillis instead of taken from
// package time for the same reason.
package configdef

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/twinlog/twinlog/security/acl"
)

// Kind is how a key's value is written.
type Kind uint8

// Kinds.
const (
	// Int is a decimal integer (ParseDecimal's rule).
	Int Kind = iota
	// Millis is a decimal count of milliseconds that fits a Go
	// time.Duration (at most MaxMillis).
	Millis
	// Bool is true or false (ParseBool's rule).
	Bool
	// Enum is one of Def.Values, exactly.
	Enum
	// Float is a decimal number (ParseFloat's rule: Kafka's DOUBLE keys,
	// such as min.cleanable.dirty.ratio), bounded by FloatMin and FloatMax.
	Float
	// Regexp is a Go regular expression (RE2 syntax), matched against a
	// whole name: the empty value matches nothing.
	Regexp
	// ACLFilters is a set of ACL filters in Cluster Linking's acl.filters
	// JSON (acl.ParseFilterSet): the empty value selects nothing.
	ACLFilters
)

// MaxMillis is the largest count of milliseconds a time.Duration holds
// (math.MaxInt64 / 1e6, about 292 years): beyond it ms * time.Millisecond
// wraps, and a deadline nowMs + ms may overflow int64.
const MaxMillis = math.MaxInt64 / 1_000_000

// Def is one key's rule.
type Def struct {
	Kind Kind
	// Min and Max bound an Int or Millis value (inclusive).
	Min, Max int64
	// Why explains the floor, for the error that refuses a lower value.
	Why string
	// Values are the allowed values of an Enum.
	Values []string
	// FloatMin and FloatMax bound a Float value (inclusive).
	FloatMin, FloatMax float64
}

const maxInt32 = math.MaxInt32

// Key names used by the rules between keys and by the daemons.
const (
	KeyBrokerHeartbeatIntervalMs           = "broker.heartbeat.interval.ms"
	KeyBrokerSessionTimeoutMs              = "broker.session.timeout.ms"
	KeyMirrorFailedRetryInitialBackoffMs   = "mirror.failed.retry.initial.backoff.ms"
	KeyMirrorFailedRetryMaxBackoffMs       = "mirror.failed.retry.max.backoff.ms"
	KeyCreateTopicsMaxPartitionsPerRequest = "create.topics.max.partitions.per.request"
	KeyClusterMaxPartitions                = "cluster.max.partitions"
	KeyMetadataFetchMaxBytes               = "metadata.fetch.max.bytes"
	KeyProducerIDSpace                     = "producer.id.space"
	KeyMinCompactionLagMs                  = "min.compaction.lag.ms"
	KeyMaxCompactionLagMs                  = "max.compaction.lag.ms"
)

// MaxProducerIDSpace is producer.id.space's ceiling (metadata's
// ProducerIDSpace says how ids are built from it).
const MaxProducerIDSpace = 1<<15 - 1

// defs is the table. Floors lie far below any sane setting and above the
// values that make a daemon spin, flood its peers or flap: a session of
// 1 ms fences every broker at once, a lag limit under the 500 ms follower
// long-poll shrinks every ISR between two fetches. Counts that the daemons
// hold in an int32 are capped at MaxInt32.
var defs = map[string]Def{
	// SPEC §1.3, settable at run time (metastate) and at start.
	"min.insync.replicas":                    {Kind: Int, Min: 1, Max: maxInt32},
	"eligible.leader.replicas.enabled":       {Kind: Bool},
	"unclean.recovery.strategy":              {Kind: Enum, Values: []string{"none", "balanced", "aggressive"}},
	"unclean.leader.election.enable":         {Kind: Bool},
	"unclean.recovery.timeout.ms":            {Kind: Millis, Min: 1000, Max: MaxMillis, Why: "a balanced recovery round waits for replicas to answer"},
	"replica.lag.time.max.ms":                {Kind: Millis, Min: 1000, Max: MaxMillis, Why: "followers long-poll for up to 500 ms; a shorter limit shrinks the ISR between fetches"},
	KeyBrokerSessionTimeoutMs:                {Kind: Millis, Min: 1000, Max: MaxMillis, Why: "shorter sessions fence brokers on a scheduling hiccup"},
	KeyBrokerHeartbeatIntervalMs:             {Kind: Millis, Min: 100, Max: MaxMillis, Why: "a broker heartbeats at most 10 times a second"},
	"max.request.partition.size.limit":       {Kind: Int, Min: 1, Max: maxInt32},
	"mirror.support.unclean.leader.election": {Kind: Bool},
	"mirror.pending.timeout.ms":              {Kind: Millis, Min: 1000, Max: MaxMillis, Why: "a mirror partition needs round trips to both clusters before it leaves PENDING"},
	KeyMirrorFailedRetryInitialBackoffMs:     {Kind: Millis, Min: 10, Max: MaxMillis, Why: "shorter backoffs retry a failed mirror in a busy loop"},
	KeyMirrorFailedRetryMaxBackoffMs:         {Kind: Millis, Min: 10, Max: MaxMillis, Why: "shorter backoffs retry a failed mirror in a busy loop"},
	"mirror.failed.retry.max.attempts":       {Kind: Int, Min: 0, Max: maxInt32},
	"mirror.state.topic.replication.factor":  {Kind: Int, Min: 1, Max: maxInt32},
	// The controller creates __mirror_state with this many partitions at
	// its first start; more than a thousand only costs.
	"mirror.state.topic.num.partitions": {Kind: Int, Min: 1, Max: 1000},
	// A mirror's offset sync (issue 16): how often, and which source groups
	// (regular expressions over the whole group id; exclude wins).
	"mirror.offset.sync.interval.ms":    {Kind: Millis, Min: 100, Max: MaxMillis, Why: "each sync lists every source group and asks its coordinator"},
	"mirror.offset.sync.groups.include": {Kind: Regexp},
	"mirror.offset.sync.groups.exclude": {Kind: Regexp},
	// A mirror's ACL sync (issue 17; Cluster Linking's acl.sync.enable,
	// acl.filters and acl.sync.ms).
	"mirror.acl.sync.enable":      {Kind: Bool},
	"mirror.acl.sync.filters":     {Kind: ACLFilters},
	"mirror.acl.sync.interval.ms": {Kind: Millis, Min: 100, Max: MaxMillis, Why: "each sync reads every source's ACLs"},
	// __consumer_offsets, created on first use with these; Kafka's bounds.
	"offsets.topic.replication.factor": {Kind: Int, Min: 1, Max: 32767},
	"offsets.topic.num.partitions":     {Kind: Int, Min: 1, Max: 1000},
	// Producer ids are space<<48 | counter: 15 bits keep every id a
	// positive int64. 0 is left out: it is what a broker that does not
	// report its space answers (MetadataResponse.producer_id_space).
	KeyProducerIDSpace: {Kind: Int, Min: 1, Max: MaxProducerIDSpace},

	// Log compaction (Kafka's names and bounds; storage/doc.go
	// "Compaction"). Topic and cluster: "delete,compact" is Kafka's list
	// in the other order. max.compaction.lag.ms defaults to Long.MAX:
	// beyond MaxMillis it is no bound.
	"cleanup.policy":            {Kind: Enum, Values: []string{"delete", "compact", "compact,delete", "delete,compact"}},
	"min.cleanable.dirty.ratio": {Kind: Float, FloatMin: 0, FloatMax: 1},
	"delete.retention.ms":       {Kind: Millis, Min: 0, Max: MaxMillis},
	// Retention (cleanup.policy=delete), Kafka's bounds: -1 is no bound,
	// 0 keeps nothing once committed.
	"retention.ms":    {Kind: Int, Min: -1, Max: MaxMillis},
	"retention.bytes": {Kind: Int, Min: -1, Max: math.MaxInt64},
	// A topic's segment size: log.segment.bytes' floor, and index
	// positions are 32-bit (Kafka's Integer.MAX).
	"segment.bytes": {Kind: Int, Min: 1024, Max: math.MaxInt32, Why: "smaller segments make a file per batch"},
	// Broker: how often retention looks at every log.
	"log.retention.check.interval.ms": {Kind: Millis, Min: 1000, Max: MaxMillis, Why: "each check walks every hosted log"},
	KeyMinCompactionLagMs:             {Kind: Millis, Min: 0, Max: MaxMillis},
	KeyMaxCompactionLagMs:             {Kind: Int, Min: 1, Max: math.MaxInt64},
	// Broker (cluster-wide broker default). 0 threads: no cleaning.
	"log.cleaner.threads": {Kind: Int, Min: 0, Max: 1024},
	// Kafka's default is Double.MAX (no bound); 1 byte/s is the floor.
	"log.cleaner.io.max.bytes.per.second": {Kind: Float, FloatMin: 1, FloatMax: math.MaxFloat64},
	"log.cleaner.dedupe.buffer.size":      {Kind: Int, Min: 1 << 20, Max: math.MaxInt64, Why: "each cleaner thread needs room for a useful share of a log's keys"},
	"log.cleaner.backoff.ms":              {Kind: Millis, Min: 10, Max: MaxMillis, Why: "shorter backoffs rescan every log in a busy loop"},

	// Broker start-up only.
	"log.roll.ms": {Kind: Millis, Min: 1000, Max: MaxMillis, Why: "rolling more often makes a segment file per batch"},

	// Controller start-up only (controller.Config).
	KeyCreateTopicsMaxPartitionsPerRequest: {Kind: Int, Min: 1, Max: 1_000_000},
	// The controller keeps every partition in memory and in every snapshot.
	KeyClusterMaxPartitions: {Kind: Int, Min: 1, Max: 10_000_000},
	// A FetchMetadata response must fit the brokers' 64 MiB message limit
	// with its snapshot; pages under 64 KiB make a catching-up broker do a
	// round trip per few deltas.
	KeyMetadataFetchMaxBytes: {Kind: Int, Min: 64 << 10, Max: 32 << 20, Why: "smaller pages make a catching-up broker do a round trip per few deltas"},
}

// Lookup returns key's rule.
func Lookup(key string) (Def, bool) {
	d, ok := defs[key]
	return d, ok
}

// MustLookup returns key's rule and panics if the table has none: a
// programming error (add the row).
func MustLookup(key string) Def {
	d, ok := defs[key]
	if !ok {
		panic("configdef: no rule for " + key)
	}
	return d
}

// Check parses v by key's rule and checks its bounds. The error names the
// rule, not the key: callers prefix the key and value as they show them.
func Check(key, v string) error {
	d, ok := defs[key]
	if !ok {
		return fmt.Errorf("unknown config %q", key)
	}
	return d.Check(v)
}

// Check parses v by d's rule and checks its bounds.
func (d Def) Check(v string) error {
	switch d.Kind {
	case Bool:
		_, err := ParseBool(v)
		return err
	case Enum:
		for _, x := range d.Values {
			if v == x {
				return nil
			}
		}
		return fmt.Errorf("allowed values are %s", strings.Join(d.Values, ", "))
	case Regexp:
		_, err := CompileRegexp(v)
		return err
	case ACLFilters:
		_, err := acl.ParseFilterSet(v)
		return err
	case Float:
		f, err := ParseFloat(v)
		if err != nil {
			return err
		}
		if f < d.FloatMin || f > d.FloatMax {
			return fmt.Errorf("must be between %g and %g", d.FloatMin, d.FloatMax)
		}
		return nil
	}
	// No trimming: a value stored with blanks would be read back as no
	// number at all by a strict reader.
	n, err := ParseDecimal(v, math.MinInt64, math.MaxInt64)
	if err != nil {
		return err
	}
	return d.CheckRange(n)
}

// CompileRegexp compiles a Regexp value anchored at both ends, so that it
// matches whole names (as Kafka's topic and group patterns do); the empty
// value matches nothing (nil).
func CompileRegexp(v string) (*regexp.Regexp, error) {
	if v == "" {
		return nil, nil
	}
	re, err := regexp.Compile("^(?:" + v + ")$")
	if err != nil {
		return nil, fmt.Errorf("not a regular expression: %v", err)
	}
	return re, nil
}

// Canonical returns the form of a valid value v of key to store: a boolean
// as "true" or "false" (ParseBool accepts "TRUE" and " true", which a
// reader comparing with "true" would take for false), anything else as is.
func Canonical(key, v string) string {
	if d, ok := defs[key]; ok && d.Kind == Bool {
		if b, err := ParseBool(v); err == nil {
			return strconv.FormatBool(b)
		}
	}
	return v
}

// CheckRange checks that n lies within d's floor and ceiling.
func (d Def) CheckRange(n int64) error {
	switch {
	case n < d.Min && d.Why != "":
		return fmt.Errorf("must be ≥ %d (%s)", d.Min, d.Why)
	case n < d.Min:
		return fmt.Errorf("must be ≥ %d", d.Min)
	case n > d.Max && d.Kind == Millis && d.Max == MaxMillis:
		return fmt.Errorf("must be ≤ %d (about 292 years; a larger value overflows a duration)", d.Max)
	case n > d.Max:
		return fmt.Errorf("must be ≤ %d", d.Max)
	}
	return nil
}

// Order is a rule between two keys: Lower's value must be below Upper's
// (Strict) or at most Upper's.
type Order struct {
	Lower, Upper string
	Strict       bool
}

// Orders are the rules between keys. Whoever sets either key checks them
// against the resulting config.
var Orders = []Order{
	// A session must outlast at least one heartbeat interval, or every
	// broker is fenced between two heartbeats.
	{Lower: KeyBrokerHeartbeatIntervalMs, Upper: KeyBrokerSessionTimeoutMs, Strict: true},
	// The backoff grows from the initial to the max value.
	{Lower: KeyMirrorFailedRetryInitialBackoffMs, Upper: KeyMirrorFailedRetryMaxBackoffMs},
	// One request cannot be allowed more than the whole cluster.
	{Lower: KeyCreateTopicsMaxPartitionsPerRequest, Upper: KeyClusterMaxPartitions},
	// A record may not have to wait for compaction longer than it must
	// (Kafka refuses the pair the other way round).
	{Lower: KeyMinCompactionLagMs, Upper: KeyMaxCompactionLagMs},
}

// Check reports, as a rule on the Upper key's value, whether lower and
// upper satisfy o.
func (o Order) Check(lower, upper int64) error {
	switch {
	case o.Strict && upper <= lower:
		return fmt.Errorf("must be > %s (%d)", o.Lower, lower)
	case !o.Strict && upper < lower:
		return fmt.Errorf("must be ≥ %s (%d)", o.Lower, lower)
	}
	return nil
}

// CheckOrder checks the Order between lower and upper (keys) for their
// values. It panics if the table has no such Order (a programming error).
func CheckOrder(lowerKey string, lower int64, upperKey string, upper int64) error {
	for _, o := range Orders {
		if o.Lower == lowerKey && o.Upper == upperKey {
			return o.Check(lower, upper)
		}
	}
	panic("configdef: no order between " + lowerKey + " and " + upperKey)
}

// ParseDecimal parses s strictly and checks lo ≤ n ≤ hi. The rule is one
// for every integer key, from every source (file, environment, flag,
// AlterConfigs): an optional '-', then decimal digits without leading
// zeros. Go's and YAML's base prefixes (0x, 0o, 0b, a bare leading 0 for
// octal), digit separators, '+', floats and booleans are refused rather
// than converted, because each has been read differently by some reader of
// the same value (cast.ToInt made "010" 8 and "true" 1, and truncated
// "1.9"; strconv.ParseInt reads "010" as 10 and accepts "+5").
func ParseDecimal(s string, lo, hi int64) (int64, error) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || (len(digits) > 1 && digits[0] == '0') || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, errNotDecimal(s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("out of range: want %d to %d", lo, hi)
	}
	return n, nil
}

// errNotDecimal explains why s is not accepted as an integer.
func errNotDecimal(s string) error {
	digits := strings.TrimPrefix(s, "-")
	switch {
	case s == "":
		return errors.New("empty value: want a decimal integer")
	case strings.EqualFold(s, "true") || strings.EqualFold(s, "false"):
		return errors.New("want a decimal integer, not a boolean")
	case len(digits) > 1 && digits[0] == '0':
		return errors.New("want a decimal integer without leading zeros or a 0x/0o/0b prefix (write it in plain decimal)")
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil && strings.ContainsAny(s, ".eE") {
		return errors.New("want a whole decimal integer, not a fraction or exponent")
	}
	return errors.New("want a decimal integer")
}

// ParseFloat parses a decimal number strictly: an optional '-', digits
// without leading zeros, an optional fraction and an optional exponent
// ("0.5", "1e6", "1.7976931348623157E308", Kafka's Double.MAX). Hex,
// '+', underscores, blanks, NaN and infinities are refused.
func ParseFloat(s string) (float64, error) {
	bad := fmt.Errorf("want a decimal number, not %q", s)
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	whole, frac, hasFrac := strings.Cut(strings.TrimPrefix(mant, "-"), ".")
	digits := func(x string) bool { return x != "" && strings.TrimLeft(x, "0123456789") == "" }
	switch {
	case !digits(whole), len(whole) > 1 && whole[0] == '0', hasFrac && !digits(frac):
		return 0, bad
	case hasExp && !digits(strings.TrimPrefix(strings.TrimPrefix(exp, "-"), "+")):
		return 0, bad
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("out of range: %q", s)
	}
	return f, nil
}

// ParseBool accepts exactly true or false, in any case and with
// surrounding blanks (Kafka's rule); 1, yes, on and t are refused.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("allowed values are true, false")
}
