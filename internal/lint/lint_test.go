// Package lint enforces the import rules of STYLE.md: the pure state machines
// must not reach for I/O, clocks, randomness, logging or transports, so a
// deterministic simulator can drive them.
package lint

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// purePackages are driven by tests and the simulator without goroutines,
// clocks or sockets.
var purePackages = []string{
	"broker/replica",
	"controller/metastate",
	"group",
	"metadata",
	"mirror/offsetsync",
	"mirror/plan",
	"security/acl",
	"security/scram",
	"storage/producer",
}

var forbidden = []string{
	"net", "os", "time", "math/rand", "math/rand/v2", "log", "log/slog",
	"google.golang.org/grpc", "go.etcd.io/bbolt", "github.com/spf13/viper",
	"github.com/prometheus/client_golang/prometheus",
}

// pureExceptions are packages under a forbidden path that do no I/O:
// net/netip parses and compares addresses (security/acl's host matching).
var pureExceptions = map[string]bool{"net/netip": true}

func TestForbiddenImports(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, pkg := range purePackages {
		dir := filepath.Join(root, pkg)
		entries, err := os.ReadDir(dir)
		if os.IsNotExist(err) {
			continue // not written yet
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if pureExceptions[path] {
					continue
				}
				for _, bad := range forbidden {
					if path == bad || strings.HasPrefix(path, bad+"/") {
						t.Errorf("%s/%s imports %q: pure packages must take time, I/O and randomness as inputs", pkg, name, path)
					}
				}
			}
		}
	}
}
