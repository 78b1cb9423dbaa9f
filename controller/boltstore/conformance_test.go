package boltstore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/twinlog/twinlog/controller/metastore/storetest"
)

// TestConformance runs the stores' shared suite on a bbolt file; a reopen
// closes the file and opens it again, as a restarted controllerd does.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		s := open(t, filepath.Join(t.TempDir(), "meta.db"))
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, func(t *testing.T, s storetest.Store) storetest.Store {
		path := s.(*Store).Path()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2, err := Open(path, Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s2.Close() })
		return s2
	})
}
