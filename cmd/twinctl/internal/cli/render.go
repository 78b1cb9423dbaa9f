package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"
)

// printer writes either an aligned table or JSON Lines: with --json every
// command prints one compact JSON object per line (a row of its table, a
// result, a record), so the output streams and pipes into jq or a log
// shipper line by line. JSON views are plain structs with snake_case tags so
// the output is byte-stable (unlike protojson, which randomizes whitespace)
// and can be golden-tested.
type printer struct {
	w    io.Writer
	json bool
	// partitionColumn: consume's table rows start with the partition
	// (it reads every partition).
	partitionColumn bool
}

// emitJSON writes v, an object, as one line.
func (p *printer) emitJSON(v any) error { return jsonLine{w: p.w}.write(v) }

// emitJSONLines writes each element of rows as one line.
func emitJSONLines[T any](p *printer, rows []T) error {
	enc := jsonLine{w: p.w}
	for _, r := range rows {
		if err := enc.write(r); err != nil {
			return err
		}
	}
	return nil
}

// table renders rows under headers; empty cells are shown as "-".
func (p *printer) table(headers []string, rows [][]string) error {
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			if c == "" {
				c = "-"
			}
			cells[i] = c
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func joinInts(xs []int32) string {
	if len(xs) == 0 {
		return ""
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ",")
}

// ints returns xs or an empty (non-nil) slice so JSON shows [] not null.
func ints(xs []int32) []int32 {
	if xs == nil {
		return []int32{}
	}
	return xs
}

func strs(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

func leaderString(id int32) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(int(id))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
