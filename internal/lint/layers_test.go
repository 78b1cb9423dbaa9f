package lint

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/twinlog/twinlog"

// layers lists, per package of the module (path relative to its root), the
// module's packages its non-test files may import. The shape, from the
// bottom: shared types (the root package, the API, errcode, storage/epoch,
// storage/vfs, and metadata, the cluster's metadata image) import nothing
// above them; the pure cores (broker/replica, controller/metastate,
// mirror/plan, storage/producer) import only shared types; storage, the
// parts every host of a mirror runner shares (mirror/runner) and the
// shells (broker, controller, mirror/source) build on the cores; the
// controller and the brokers share only the API and shared types (the
// image among them), never each other's code; the daemons under cmd/ and
// the harnesses may import anything but one another. A package missing
// here fails the test: a new package states its place in the layout.
var layers = map[string][]string{
	"":                               nil,
	"api/proto/twinlog/v1":           nil,
	"storage/vfs":                    nil,
	"storage/epoch":                  {"", "storage/vfs"},
	"storage/producer":               {""},
	"group":                          {""},
	"storage":                        {"", "storage/epoch", "storage/producer", "storage/vfs"},
	"internal/configdef":             {"security/acl"},
	"security/acl":                   nil,
	"security/principal":             nil,
	"security/pki":                   nil,
	"security/tlsfiles":              {"security/pki"},
	"security/scram":                 nil,
	"security/transport":             {"security/principal", "security/tlsfiles"},
	"security/authz":                 {"api/proto/twinlog/v1", "errcode", "security/acl", "security/scram", "security/transport"},
	"metadata":                       {"", "api/proto/twinlog/v1", "internal/configdef", "security/acl", "security/scram"},
	"errcode":                        {"api/proto/twinlog/v1"},
	"internal/config":                {"internal/configdef"},
	"internal/daemon":                {"internal/config", "security/acl", "security/authz", "security/tlsfiles", "security/transport"},
	"internal/rpcopt":                nil,
	"internal/lint":                  nil,
	"internal/history":               nil,
	"broker/replica":                 {"", "api/proto/twinlog/v1", "storage/epoch"},
	"controller/metastate":           {"", "api/proto/twinlog/v1", "internal/configdef", "metadata", "security/acl", "security/scram"},
	"mirror/plan":                    {"", "api/proto/twinlog/v1", "errcode", "storage/epoch"},
	"mirror/offsetsync":              {""},
	"mirror/source":                  {"", "api/proto/twinlog/v1", "errcode", "internal/rpcopt", "mirror/plan", "mirror/state"},
	"mirror/state":                   {"", "api/proto/twinlog/v1", "metadata", "mirror/plan", "storage"},
	"mirror/runner":                  {"", "api/proto/twinlog/v1", "broker/replica", "metadata", "mirror/plan", "storage", "storage/epoch"},
	"broker/codec":                   {"api/proto/twinlog/v1"},
	"broker/ready":                   {"", "broker/replica", "storage"},
	"broker/alter":                   {"api/proto/twinlog/v1", "broker/replica"},
	"broker/wire":                    {"", "api/proto/twinlog/v1", "broker/replica", "storage"},
	"broker/serve":                   {"", "api/proto/twinlog/v1", "broker/replica", "broker/wire", "storage", "storage/producer"},
	"broker/kafka":                   {"api/proto/twinlog/v1", "errcode", "group", "security/acl", "security/scram"},
	"broker/coord":                   {"", "broker/kafka", "group", "metadata", "storage"},
	"broker/groupsvc":                {"", "api/proto/twinlog/v1", "broker/coord", "broker/kafka", "errcode", "group", "security/acl", "security/authz"},
	"broker/follow":                  {"", "api/proto/twinlog/v1", "broker/replica", "broker/wire", "storage"},
	"broker/session":                 {"", "api/proto/twinlog/v1"},
	"broker/metaloop":                {"api/proto/twinlog/v1", "metadata"},
	"broker/assign":                  {"", "api/proto/twinlog/v1", "broker/replica", "metadata", "mirror/runner", "storage"},
	"controller/metastore":           {"api/proto/twinlog/v1"},
	"controller/metastore/storetest": {"api/proto/twinlog/v1", "controller/metastore"},
	"controller/boltstore":           {"api/proto/twinlog/v1", "controller/metastore"},
	"controller/memstore":            {"api/proto/twinlog/v1", "controller/metastore"},
	"controller":                     {"", "api/proto/twinlog/v1", "controller/boltstore", "controller/metastate", "controller/metastore", "errcode", "internal/configdef", "internal/rpcopt", "metadata", "mirror/offsetsync", "mirror/plan", "mirror/source", "security/acl", "security/authz", "security/scram", "security/transport", "storage/epoch"},
	"broker":                         {"", "api/proto/twinlog/v1", "broker/alter", "broker/assign", "broker/codec", "broker/coord", "broker/follow", "broker/groupsvc", "broker/kafka", "broker/metaloop", "broker/ready", "broker/replica", "broker/serve", "broker/session", "broker/wire", "errcode", "group", "metadata", "mirror/plan", "mirror/runner", "mirror/source", "mirror/state", "storage", "storage/epoch", "internal/configdef", "internal/rpcopt", "security/acl", "security/authz", "security/scram", "security/transport"},
	"metrics":                        {"api/proto/twinlog/v1", "broker", "broker/kafka", "controller", "security/authz", "security/transport"},
	"broker/brokertest":              {"", "api/proto/twinlog/v1", "broker", "controller", "group", "internal/rpcopt", "metadata", "security/authz", "security/transport", "storage"},
	"internal/sim":                   {"", "api/proto/twinlog/v1", "broker/alter", "broker/assign", "broker/coord", "broker/follow", "broker/groupsvc", "broker/kafka", "broker/metaloop", "broker/ready", "broker/replica", "broker/serve", "broker/session", "broker/wire", "controller", "controller/memstore", "controller/metastate", "errcode", "group", "internal/history", "internal/rpcopt", "metadata", "mirror/plan", "mirror/runner", "mirror/source", "mirror/state", "security/acl", "security/authz", "security/transport", "storage", "storage/epoch"},
	"scripts/runlocal":               {"security/pki"},
	"scripts/gencerts":               {"security/pki"},
	"cmd/twinctl/internal/cli":       {"api/proto/twinlog/v1", "errcode", "metadata", "security/acl", "security/authz", "security/scram", "security/tlsfiles", "security/transport"},
	"cmd/twinctl":                    {"cmd/twinctl/internal/cli", "storage", "storage/epoch"},
	"cmd/brokerd":                    {"", "broker", "internal/config", "internal/daemon", "metrics", "storage"},
	"cmd/controllerd":                {"controller", "internal/config", "internal/daemon", "metrics"},
	"cmd/twinbench":                  {"", "api/proto/twinlog/v1", "broker", "broker/codec", "controller", "internal/config", "internal/daemon", "security/pki", "security/tlsfiles", "security/transport", "storage"},
	"cmd/twinchaos":                  {"api/proto/twinlog/v1", "internal/history", "storage"},
}

// pending are imports the layout forbids that the code still has, each
// with the work that removes it. The test fails once one is gone, so the
// list only shrinks.
var pending = map[[2]string]string{}

// TestLayers checks every package's imports of the module against layers.
func TestLayers(t *testing.T) {
	root := filepath.Join("..", "..")
	imports := moduleImports(t, root)
	seen := map[[2]string]bool{}
	for pkg, deps := range imports {
		allowed, ok := layers[pkg]
		if !ok {
			t.Errorf("package %q is not in internal/lint's layers: add it with the module packages it may import", displayPkg(pkg))
			continue
		}
		for _, dep := range deps {
			if slices.Contains(allowed, dep) {
				continue
			}
			if why, ok := pending[[2]string{pkg, dep}]; ok {
				seen[[2]string{pkg, dep}] = true
				t.Logf("%s imports %s (pending: %s)", displayPkg(pkg), displayPkg(dep), why)
				continue
			}
			t.Errorf("%s imports %s, which its layer does not allow (internal/lint/layers_test.go)", displayPkg(pkg), displayPkg(dep))
		}
	}
	for k, why := range pending {
		if !seen[k] {
			t.Errorf("%s no longer imports %s: remove the pending entry (%s)", displayPkg(k[0]), displayPkg(k[1]), why)
		}
	}
}

func displayPkg(p string) string {
	if p == "" {
		return "twinlog (root)"
	}
	return p
}

// moduleImports maps each package directory under root (relative path, ""
// for the root) to the module packages its non-test Go files import. It
// skips testdata, hidden directories and nested modules (tools/).
func moduleImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		if d.IsDir() {
			name := d.Name()
			if rel != "" && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if rel != "" {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if pkg == "." {
			pkg = ""
		}
		deps := out[pkg]
		if deps == nil {
			deps = []string{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			var dep string
			switch {
			case p == module:
				dep = ""
			case strings.HasPrefix(p, module+"/"):
				dep = strings.TrimPrefix(p, module+"/")
			default:
				continue
			}
			if !slices.Contains(deps, dep) {
				deps = append(deps, dep)
			}
		}
		out[pkg] = deps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
