// Package session is a broker's registration with its controller (SPEC
// §3.2): which previous broker epoch it registers with, when a heartbeat's
// answer means registering again (the rules), and the Keeper that
// registers and heartbeats by them. The broker shell (keeper.go) and the
// simulator both run a Keeper; the RPCs and the clock are theirs.
package session

import (
	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// PreviousEpoch is RegisterBroker's PreviousBrokerEpoch: the epoch of the
// live registration when the broker registers again (its logs are
// intact), else the one its clean-shutdown files name (SPEC §2.5; −1
// after a crash). current is 0 before the first registration.
func PreviousEpoch(fromFiles twinlog.BrokerEpoch, current int64) int64 {
	if current > 0 {
		return current
	}
	return int64(fromFiles)
}

// ReRegister reports whether a heartbeat's answer code means registering
// again: STALE_BROKER_EPOCH (someone registered this id since, or the
// controller lost the registration) for the epoch the broker still holds
// (sent equals current: an answer to a heartbeat of an earlier
// registration says nothing), unless the broker is shutting down (a
// controlled shutdown takes a stale epoch as granted).
func ReRegister(code pb.ErrorCode, sent, current int64, shuttingDown bool) bool {
	return code == pb.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH && sent == current && !shuttingDown
}
