package cli

import (
	"bytes"
	"strings"
	"testing"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// TestBrokersListOffline: the OFFLINE column of `brokers list` counts each
// live broker's reported offline partitions ("-" for a fenced broker: no
// live report), the partitions follow the table with their reasons, and a
// report the controller cut short says how many more there are.
func TestBrokersListOffline(t *testing.T) {
	brokers := []*twinlogv1.BrokerRecord{
		{BrokerId: 1, Host: "h1", Port: 1, BrokerEpoch: 5},
		{BrokerId: 2, Host: "h2", Port: 2, BrokerEpoch: 6, Fenced: true},
		{BrokerId: 3, Host: "h3", Port: 3, BrokerEpoch: 7},
	}
	tests := []struct {
		name    string
		offline []*twinlogv1.BrokerOfflinePartitions
		want    []string // rows of the table, in order, by their leading cells
		extra   []string // present after the table
	}{
		{"none", nil, []string{"1   h1:1     -      5      no      no             0", "2   h2:2     -      6      yes     no             -",
			"3   h3:3     -      7      no      no             0"}, nil},
		{"cut short", []*twinlogv1.BrokerOfflinePartitions{{BrokerId: 3, Count: 1500, Partitions: []*twinlogv1.OfflinePartition{
			{Topic: "t", Partition: 4, Reason: "bad CRC"}, {Topic: "t", Partition: 9, Reason: "EIO"},
		}}}, []string{"3   h3:3     -      7      no      no             1500"},
			[]string{"broker 3 offline partitions", "t-4", "bad CRC", "t-9", "EIO", "... and 1498 more (the controller keeps the first 2)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := renderBrokers(&printer{w: &out}, "c", brokers, tt.offline); err != nil {
				t.Fatal(err)
			}
			for _, w := range append(tt.want, tt.extra...) {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if tt.extra == nil && strings.Contains(out.String(), "offline partitions") {
				t.Errorf("a partition list without offline partitions:\n%s", out.String())
			}
		})
	}
}
