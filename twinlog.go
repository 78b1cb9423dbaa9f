// Package twinlog holds the domain types every layer shares: offsets, epochs,
// broker ids and partition names. It imports nothing but the standard library
// so the pure state machines (broker/replica, controller/metastate,
// mirror/plan) can use it.
package twinlog

import "fmt"

// Offset is a position in a partition log. Offsets are dense on a leader's
// own records and may have gaps on mirror partitions (SPEC §6.2b).
type Offset int64

// Epoch is a leader epoch. NoEpoch (-1) means "none".
type Epoch int32

// BrokerID identifies a broker inside one cluster. NoBroker (-1) means none.
type BrokerID int32

// PartitionEpoch versions a partition's controller state (SPEC §3.3).
type PartitionEpoch int32

// BrokerEpoch is the epoch a controller hands a broker at registration.
type BrokerEpoch int64

const (
	// NoEpoch marks an absent epoch (SPEC §2.4 "e = −1").
	NoEpoch Epoch = -1
	// NoBroker marks an absent leader (SPEC §1.2 "L −1").
	NoBroker BrokerID = -1
	// NoOffset marks an absent offset.
	NoOffset Offset = -1
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String renders the partition as Kafka does: "topic-3". The same string is
// the partition's directory name (SPEC §2.1).
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }
