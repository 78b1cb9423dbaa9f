package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"google.golang.org/grpc"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/errcode"
)

// testRoot is twinctl's command tree.
func testRoot() *cobra.Command {
	a := &app{v: viper.New(), conns: map[string]*grpc.ClientConn{}}
	return a.rootCommand()
}

// lookupFlag finds --name (or -n) on c, its own or inherited.
func lookupFlag(c *cobra.Command, name string, short bool) *pflag.Flag {
	if name == "help" || (short && name == "h") {
		return &pflag.Flag{Name: "help", NoOptDefVal: "true"} // cobra's, added when it runs
	}
	for _, fs := range []*pflag.FlagSet{c.Flags(), c.InheritedFlags(), c.Root().PersistentFlags()} {
		var f *pflag.Flag
		if short {
			f = fs.ShorthandLookup(name)
		} else {
			f = fs.Lookup(name)
		}
		if f != nil {
			return f
		}
	}
	return nil
}

var formatVerb = regexp.MustCompile(`%[-+# 0-9.]*[sdqvw]`)

// resolve walks a twinctl command line ("topics describe orders --json")
// as cobra would: it descends into subcommands and checks that every flag
// exists on the command it is given to. It returns the command reached and
// the problems found.
func resolve(root *cobra.Command, line string) (*cobra.Command, []string) {
	line = formatVerb.ReplaceAllString(line, "X")
	toks := strings.Fields(line)
	if len(toks) > 0 && toks[0] == "twinctl" {
		toks = toks[1:]
	}
	c := root
	var problems []string
	descending := true
	for i := 0; i < len(toks); i++ {
		tok := strings.Trim(toks[i], `"'`)
		switch {
		case strings.HasPrefix(tok, "--"):
			name, _, hasValue := strings.Cut(strings.TrimPrefix(tok, "--"), "=")
			f := lookupFlag(c, name, false)
			if f == nil {
				problems = append(problems, "--"+name+" is not a flag of `"+c.CommandPath()+"`")
				continue
			}
			if !hasValue && f.NoOptDefVal == "" {
				i++ // its value
			}
		case strings.HasPrefix(tok, "-") && len(tok) == 2:
			if f := lookupFlag(c, tok[1:], true); f == nil {
				problems = append(problems, tok+" is not a flag of `"+c.CommandPath()+"`")
			} else if f.NoOptDefVal == "" {
				i++
			}
		default:
			if !descending {
				continue
			}
			next := (*cobra.Command)(nil)
			for _, sub := range c.Commands() {
				if sub.Name() == tok || slices.Contains(sub.Aliases, tok) {
					next = sub
				}
			}
			if next == nil {
				if c.HasSubCommands() {
					problems = append(problems, "`"+c.CommandPath()+"` has no subcommand "+strconv.Quote(tok))
				}
				descending = false
				continue
			}
			c = next
		}
	}
	return c, problems
}

// hintText is a text that may send the operator somewhere: where it comes
// from, the command it is shown for ("" for any) and the text.
type hintText struct {
	where   string
	command string
	text    string
}

// hintTexts collects every errcode hint, every command hint and every
// string literal of this package's code (messages, help, examples).
func hintTexts(t *testing.T) []hintText {
	t.Helper()
	var out []hintText
	for n := range twinlogv1.ErrorCode_name {
		c := twinlogv1.ErrorCode(n)
		if h := errcode.Of(c).HintFor("orders"); h != "" {
			out = append(out, hintText{"errcode " + c.String(), "", h})
		}
	}
	for cmd, hs := range commandHints {
		for c, h := range hs {
			out = append(out, hintText{"commandHints " + cmd + " " + c.String(), cmd, h})
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out = append(out, hintText{fset.Position(lit.Pos()).String(), "", s})
				}
			}
			return true
		})
	}
	return out
}

var (
	quotedCommand = regexp.MustCompile("`(twinctl[^`]*)`")
	// exampleLine is an indented command line of an Example (or one after
	// a pipe).
	exampleLine = regexp.MustCompile(`(?m)(?:^[ \t]+|\|[ \t]*)(twinctl\s[^|#<>\n]*)`)
	bareFlag    = regexp.MustCompile(`(?:^|[\s(,;:"'])(--[a-z][a-z0-9-]*)`)
	// foreignFlags are other programs' flags the help compares with.
	foreignFlags = map[string]string{
		"reset-offsets": "kafka-consumer-groups.sh",
		"entity-type":   "kafka-configs",
	}
)

// TestHintsNameRealFlags (issue 18: hints name the right flag and lead to
// a command that works): every `twinctl ...` a message, hint or help text
// quotes, and every example line, names a real command with flags it has;
// every flag a hint tied to a command mentions is a flag of that command;
// and every other --flag mentioned anywhere is a flag of some command.
func TestHintsNameRealFlags(t *testing.T) {
	root := testRoot()
	all := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { all[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { all[f.Name] = true })
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	all["help"] = true // cobra adds --help to every command when it runs
	for f := range foreignFlags {
		all[f] = true
	}
	checked := 0
	for _, h := range hintTexts(t) {
		var lines []string
		for _, m := range quotedCommand.FindAllStringSubmatch(h.text, -1) {
			lines = append(lines, m[1])
		}
		for _, m := range exampleLine.FindAllStringSubmatch(quotedCommand.ReplaceAllString(h.text, ""), -1) {
			lines = append(lines, m[1])
		}
		for _, l := range lines {
			checked++
			if c, problems := resolve(root, l); len(problems) > 0 {
				t.Errorf("%s: `%s` (reaches `%s`): %s", h.where, l, c.CommandPath(), strings.Join(problems, "; "))
			}
		}
		rest := exampleLine.ReplaceAllString(quotedCommand.ReplaceAllString(h.text, ""), "")
		if h.command != "" {
			c, problems := resolve(root, h.command)
			if len(problems) > 0 {
				t.Fatalf("%s: command %q: %v", h.where, h.command, problems)
			}
			for _, m := range bareFlag.FindAllStringSubmatch(rest, -1) {
				checked++
				if lookupFlag(c, strings.TrimPrefix(m[1], "--"), false) == nil {
					t.Errorf("%s: %s is not a flag of `%s`: %q", h.where, m[1], h.command, h.text)
				}
			}
			continue
		}
		for _, m := range bareFlag.FindAllStringSubmatch(rest, -1) {
			checked++
			if !all[strings.TrimPrefix(m[1], "--")] {
				t.Errorf("%s: %s is no twinctl flag: %q", h.where, m[1], h.text)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d command lines and flags checked: the scan found too little", checked)
	}
}

// TestResolveFindsMistakes keeps the checker honest: it catches a flag of
// another command, an unknown flag and an unknown subcommand.
func TestResolveFindsMistakes(t *testing.T) {
	root := testRoot()
	for line, want := range map[string]string{
		"twinctl mirrors stop m --timeout-wait 5s":        "--timeout-wait is not a flag of `twinctl mirrors stop`",
		"twinctl topics describe orders --wait-timeout 1": "--wait-timeout is not a flag of `twinctl topics describe`",
		"twinctl topics frobnicate":                       "`twinctl topics` has no subcommand \"frobnicate\"",
	} {
		if _, problems := resolve(root, line); !slices.Contains(problems, want) {
			t.Errorf("resolve(%q) = %q, want %q among them", line, problems, want)
		}
	}
	if c, problems := resolve(root, "twinctl --bootstrap x:1 mirrors stop m --wait-for-catch-up --wait-timeout 1m -f"); c.CommandPath() != "twinctl mirrors stop" || len(problems) != 1 {
		t.Errorf("resolve: %s %q, want mirrors stop with one problem (-f)", c.CommandPath(), problems)
	}
}

// TestMirrorsStopTimeoutHint: a waited stop that the server refuses with
// REQUEST_TIMED_OUT (not caught up in time) points at --wait-timeout, the
// flag that sets that wait, not at --timeout.
func TestMirrorsStopTimeoutHint(t *testing.T) {
	f := stopFake(0)
	f.topicErrs = map[string]twinlogv1.ErrorCode{"orders": twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT}
	r := runStop(t, f, "mirrors", "stop", "m", "--wait-for-catch-up", "--wait-timeout", "5s")
	if r.code != ExitError {
		t.Fatalf("exit %d, want %d; stderr %q", r.code, ExitError, r.stderr)
	}
	if !strings.Contains(r.stderr, "retry with a longer --wait-timeout") || strings.Contains(r.stderr, "raise --timeout") {
		t.Errorf("stderr %q, want the --wait-timeout hint and not --timeout's", r.stderr)
	}
}
