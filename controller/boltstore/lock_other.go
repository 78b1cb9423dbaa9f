//go:build !unix

package boltstore

import (
	"os"
	"time"
)

// lockShared and unlock are no-ops where bbolt does not lock with flock.
func lockShared(*os.File, time.Duration) error { return nil }

func unlock(*os.File) {}
