package epoch

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/twinlog/twinlog/storage/vfs"
)

// TestCheckpointSpecExample pins the exact bytes of the SPEC §2.3 example.
func TestCheckpointSpecExample(t *testing.T) {
	want := "0\n2\n0 0\n1 2\n"
	got := string(MarshalCheckpoint([]Entry{{0, 0}, {1, 2}}))
	if got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	es, err := ParseCheckpoint([]byte(want))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Entry{{0, 0}, {1, 2}}, es); diff != "" {
		t.Fatal(diff)
	}
	if got := string(MarshalCheckpoint(nil)); got != "0\n0\n" {
		t.Fatalf("empty: %q", got)
	}
}

func TestParseCheckpoint(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Entry
		bad  bool
	}{
		{"empty file", "", nil, false},
		{"zero entries", "0\n0\n", []Entry{}, false},
		{"tabs and spaces", "0\n1\n3\t  7\n", []Entry{{3, 7}}, false},
		{"no trailing newline", "0\n1\n3 7", []Entry{{3, 7}}, false},
		{"bad version", "1\n0\n", nil, true},
		{"missing count", "0\n", nil, true},
		{"count too high", "0\n2\n1 1\n", nil, true},
		{"count too low", "0\n1\n1 1\n2 2\n", nil, true},
		{"negative count", "0\n-1\n", nil, true},
		{"one integer", "0\n1\n5\n", nil, true},
		{"three integers", "0\n1\n5 6 7\n", nil, true},
		{"not a number", "0\n1\nx 6\n", nil, true},
		{"epoch overflow", "0\n1\n99999999999 6\n", nil, true},
		{"not increasing", "0\n2\n1 5\n1 6\n", nil, true},
		{"offset decreasing", "0\n2\n1 5\n2 4\n", nil, true},
		{"negative", "0\n1\n-2 4\n", nil, true},
		{"blank entry line", "0\n1\n\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCheckpoint([]byte(tt.in))
			if tt.bad {
				if !errors.Is(err, ErrBadCheckpoint) {
					t.Fatalf("want ErrBadCheckpoint, got %v (%v)", err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" && !(len(tt.want) == 0 && len(got) == 0) {
				t.Fatal(diff)
			}
		})
	}
}

func TestWriteCheckpointAtomicAndDurable(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll("/p", 0o755); err != nil {
		t.Fatal(err)
	}
	p := "/p/" + CheckpointFile
	if err := WriteCheckpoint(m, p, []Entry{{0, 0}}); err != nil {
		t.Fatal(err)
	}
	// A failing rename leaves the old file in place.
	m.SetInjector(func(op vfs.Op, _ string) error {
		if op == vfs.OpRename {
			return vfs.ErrInjected
		}
		return nil
	})
	if err := WriteCheckpoint(m, p, []Entry{{0, 0}, {1, 9}}); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("want injected error, got %v", err)
	}
	m.SetInjector(nil)
	got, err := ReadCheckpoint(m.CrashClone(), p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Entry{{0, 0}}, got); diff != "" {
		t.Fatal(diff)
	}
	if err := WriteCheckpoint(m, p, []Entry{{0, 0}, {1, 9}}); err != nil {
		t.Fatal(err)
	}
	got, err = ReadCheckpoint(m.CrashClone(), p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Entry{{0, 0}, {1, 9}}, got); diff != "" {
		t.Fatal(diff)
	}
	// Missing file: empty cache.
	got, err = ReadCheckpoint(m, "/p/nothing")
	if err != nil || len(got) != 0 {
		t.Fatalf("missing: %v %v", got, err)
	}
}

func FuzzEpochCheckpoint(f *testing.F) {
	f.Add([]byte("0\n2\n0 0\n1 2\n"))
	f.Add([]byte(""))
	f.Add([]byte("0\n1\n5"))
	f.Add([]byte("0\n3\n1 1\n2 2\n3 3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := ParseCheckpoint(data)
		if err != nil {
			if !errors.Is(err, ErrBadCheckpoint) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if _, err := NewCache(es); err != nil {
			t.Fatalf("parsed entries are not a valid cache: %v", err)
		}
		// Round trip: our rendering parses to the same entries.
		again, err := ParseCheckpoint(MarshalCheckpoint(es))
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != len(again) || (len(es) > 0 && !cmp.Equal(es, again)) {
			t.Fatalf("round trip %v -> %v", es, again)
		}
	})
}
