package metastate

import (
	"errors"
	"maps"
	"slices"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/metadata"
)

// ErrOffsetGap is returned by Apply for a delta that does not follow the
// current metadata offset. It is the image's error: State.Apply hands the
// delta to metadata.Image.Apply.
var ErrOffsetGap = metadata.ErrOffsetGap

// Rand is the injected randomness (STYLE: interface{ IntN(int) int }).
type Rand interface{ IntN(n int) int }

// Config configures a State.
type Config struct {
	// ClusterID names the cluster; snapshots carry it.
	ClusterID string
	// Rand produces topic ids and placement start offsets. Nil means a fixed
	// deterministic sequence.
	Rand Rand
	// MaxCreatePartitionsPerRequest caps the partitions (and so the topics)
	// one CreateTopics request may create, as Kafka caps the records of one
	// controller operation; 0 means DefaultMaxCreatePartitionsPerRequest.
	MaxCreatePartitionsPerRequest int
	// MaxClusterPartitions caps the partitions of the whole cluster; 0 means
	// DefaultMaxClusterPartitions.
	MaxClusterPartitions int
}

// Defaults of the CreateTopics caps (Config).
const (
	DefaultMaxCreatePartitionsPerRequest = 10000
	DefaultMaxClusterPartitions          = 100000
)

// State is the controller's state machine of one cluster: the metadata
// image (an embedded *metadata.Image, whose readers State exposes) plus the
// controller's soft (never persisted) state: heartbeat times, unclean
// recovery rounds and refused epoch-exhausted changes.
//
// State is not safe for concurrent use. Commands never change the image: they
// return a *twinlogv1.MetadataDelta that the shell persists and then hands to
// Apply. Each command's delta must be applied (or dropped) before the next
// command is computed, because deltas are full records computed against the
// current image and carry the next offset.
type State struct {
	*metadata.Image

	// Soft state.
	rnd         Rand
	limits      Config
	heartbeatMs map[int32]int64
	rounds      map[tpKey]*Round
	nextRoundID uint64
	// exhausted holds partitions whose change was refused because an epoch
	// would overflow, until the shell drains them (DrainEpochExhausted).
	exhausted map[tpKey]Event
}

type tpKey struct {
	topic string
	part  int32
}

// New returns an empty image at offset 0.
func New(cfg Config) *State {
	s := &State{Image: metadata.New(cfg.ClusterID), rnd: cfg.Rand, limits: cfg}
	if s.limits.MaxCreatePartitionsPerRequest <= 0 {
		s.limits.MaxCreatePartitionsPerRequest = DefaultMaxCreatePartitionsPerRequest
	}
	if s.limits.MaxClusterPartitions <= 0 {
		s.limits.MaxClusterPartitions = DefaultMaxClusterPartitions
	}
	if s.rnd == nil {
		s.rnd = &splitmix{}
	}
	s.resetSoft()
	return s
}

func (s *State) resetSoft() {
	s.heartbeatMs = map[int32]int64{}
	s.rounds = map[tpKey]*Round{}
	s.exhausted = map[tpKey]Event{}
}

// errEpochExhausted explains a change refused because the partition's leader
// or partition epoch is at MaxInt32.
var errEpochExhausted = errors.New("metastate: the partition's epochs are exhausted (at MaxInt32); recreate the topic")

// noteEpochExhausted records that a change of k was not written because its
// leader epoch or partition epoch would overflow. Wrapping would make every
// replica's epoch newer than the controller's (or fence them all), so the
// least-bad outcome is to keep the partition exactly as it is: its leader
// keeps serving if it can, and nothing is elected. The operator learns it
// from the EventEpochExhausted the shell drains and logs.
func (s *State) noteEpochExhausted(k tpKey, p *twinlogv1.PartitionRecord) {
	s.exhausted[k] = Event{Kind: EventEpochExhausted, Topic: k.topic, Partition: k.part, Broker: p.GetLeader(),
		OldLeader: p.GetLeader(), LeaderEpoch: p.GetLeaderEpoch(), ISR: p.GetIsr(), ELR: p.GetElr()}
}

// DrainEpochExhausted returns, sorted, the EventEpochExhausted events noted
// since the last call: changes that were refused because an epoch would have
// overflowed.
func (s *State) DrainEpochExhausted() []Event {
	if len(s.exhausted) == 0 {
		return nil
	}
	ks := slices.SortedFunc(maps.Keys(s.exhausted), cmpKey)
	out := make([]Event, 0, len(ks))
	for _, k := range ks {
		out = append(out, s.exhausted[k])
	}
	clear(s.exhausted)
	return out
}

// splitmix is the default deterministic Rand.
type splitmix struct{ x uint64 }

func (r *splitmix) IntN(n int) int {
	r.x += 0x9e3779b97f4a7c15
	z := r.x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return int(z % uint64(n))
}

// Apply installs a delta computed by a command (or read back at start-up)
// and returns the notable transitions it made. The delta's offset must be
// Offset()+1.
//
// Apply takes ownership of d: its records become part of the image (they
// are not copied), so neither the caller nor anyone it shared d with may
// modify d afterwards. Reading it (marshalling, serving it to followers,
// applying it to another State) is fine: the image never modifies a record
// in place.
func (s *State) Apply(d *twinlogv1.MetadataDelta) ([]Event, error) {
	if d == nil {
		return nil, nil
	}
	// The events compare the delta with the image it replaces, so they are
	// computed first; they only read.
	events := s.events(d)
	if err := s.Image.Apply(d); err != nil {
		return nil, err
	}
	for _, id := range d.GetRemovedBrokers() {
		delete(s.heartbeatMs, id)
	}
	for _, name := range d.GetRemovedTopics() {
		for k := range s.rounds {
			if k.topic == name {
				delete(s.rounds, k)
			}
		}
	}
	return events, nil
}

// Restore replaces the image with snap and clears the soft state (heartbeat
// times restart from the next Tick, recovery rounds are not persisted).
func (s *State) Restore(snap *twinlogv1.MetadataSnapshot) {
	s.resetSoft()
	s.Image.Restore(snap)
}

// FromSnapshot builds a State from a snapshot.
func FromSnapshot(snap *twinlogv1.MetadataSnapshot, cfg Config) *State {
	s := New(cfg)
	s.Restore(snap)
	return s
}
