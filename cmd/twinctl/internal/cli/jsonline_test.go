package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJSONGoldensAreJSONLines: every --json output pinned in testdata is
// JSON Lines, one compact object per line (issue 18: `--json` is one object
// per line everywhere), so `twinctl ... --json | jq -c` and log shippers
// take it line by line. An indented document or a top-level array fails.
func TestJSONGoldensAreJSONLines(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*json*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 15 {
		t.Fatalf("only %d --json goldens found: %v", len(paths), paths)
	}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		checkJSONLines(t, p, string(raw))
	}
}

// checkJSONLines fails unless out is one compact JSON object per line.
func checkJSONLines(t *testing.T, name, out string) {
	t.Helper()
	if out == "" {
		return
	}
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("%s: output does not end in a newline", name)
	}
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var obj map[string]any
		if err := json.Unmarshal([]byte(l), &obj); err != nil {
			t.Errorf("%s line %d is not one JSON object (%v): %q", name, i+1, err, l)
			continue
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(l)); err != nil || compact.String() != l {
			t.Errorf("%s line %d is not compact: %q", name, i+1, l)
		}
	}
}

// TestJSONLinesEverywhere runs the --json commands without a golden of
// their own and checks their output is JSON Lines too.
func TestJSONLinesEverywhere(t *testing.T) {
	for _, args := range [][]string{
		{"mirrors", "describe", "a-to-b"},
		{"topics", "describe", "orders", "payments"},
		{"partitions", "describe"},
		{"brokers", "list"},
		{"configs", "get", "--topic", "orders"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			h := startGoldenFake(t)
			stdout, stderr, code := h.run(t, append(args, "--json")...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if strings.Count(stdout, "\n") < 1 {
				t.Fatalf("no output: %q", stdout)
			}
			checkJSONLines(t, strings.Join(args, " "), stdout)
		})
	}
}
