package group

import (
	"math"
	"unicode/utf16"
)

// PartitionFor is the __consumer_offsets partition of a group, as every
// Kafka client and tool computes it (FindCoordinator; Kafka's
// Utils.abs(groupId.hashCode()) % numPartitions): the Java String
// hashCode over the id's UTF-16 code units, with Integer.MIN_VALUE's
// absolute value taken as 0.
func PartitionFor(groupID string, numPartitions int32) int32 {
	if numPartitions <= 0 {
		panic("group: PartitionFor with no partitions")
	}
	var h int32
	for _, u := range utf16.Encode([]rune(groupID)) {
		h = 31*h + int32(u)
	}
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % numPartitions
}
