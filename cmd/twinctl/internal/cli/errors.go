package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	twinlogv1 "github.com/twinlog/twinlog/api/proto/twinlog/v1"
	"github.com/twinlog/twinlog/errcode"
)

// Exit codes returned by Execute.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// usageError marks a mistake in the command line: wrong arguments, flags or
// selectors. It maps to ExitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// ProtocolError is a non-NONE ErrorCode returned in a response body
// (SPEC §1.4). Hint tells the operator what to do next.
type ProtocolError struct {
	Code    twinlogv1.ErrorCode
	Subject string // "topic x", "partition x-3", "mirror m"; may be empty
	Message string // server's error_message; may be empty
	Hint    string
}

func (e *ProtocolError) Error() string {
	var b strings.Builder
	if e.Subject != "" {
		b.WriteString(e.Subject)
		b.WriteString(": ")
	}
	b.WriteString(describeCode(e.Code, e.Subject))
	if e.Message != "" {
		b.WriteString(" (")
		b.WriteString(e.Message)
		b.WriteString(")")
	}
	if e.Hint != "" {
		b.WriteString(": ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// codeName renders an ErrorCode the way SPEC §1.4 names it:
// ERROR_CODE_NOT_LEADER_OR_FOLLOWER → NOT_LEADER_OR_FOLLOWER.
func codeName(c twinlogv1.ErrorCode) string { return errcode.Of(c).Name }

// describeCode words c after subject, as errcode's Phrase. A missing topic
// named as the subject reads "topic t: does not exist"; a partition or a
// topic in a longer subject keeps the code's own phrase.
func describeCode(c twinlogv1.ErrorCode, subject string) string {
	if c == twinlogv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION && strings.HasPrefix(subject, "topic ") {
		return "does not exist"
	}
	if in := errcode.Of(c); in.Phrase != "" {
		return in.Phrase
	}
	return codeName(c)
}

// commandHints replace errcode's hint for a code where the command at hand
// has its own flag for it: errcode's hints are written for any command
// (REQUEST_TIMED_OUT: "raise --timeout", the RPC deadline), but produce's
// batch waited --request-timeout-ms on the leader, and a waited mirrors
// stop waited --wait-timeout for catch-up.
var commandHints = map[string]map[twinlogv1.ErrorCode]string{
	"twinctl produce": {
		twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT: "the in-sync replicas did not acknowledge within --request-timeout-ms and the batch may still commit: check with `twinctl consume` before producing it again, or raise --request-timeout-ms",
	},
	"twinctl mirrors stop": {
		twinlogv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT: "the mirror did not catch up within --wait-timeout and nothing was stopped: retry with a longer --wait-timeout, or leave out --wait-for-catch-up to stop with the lag",
	},
}

// withCommandHints gives the ProtocolErrors in err the hints of command
// (commandHints).
func withCommandHints(command string, err error) error {
	hints := commandHints[command]
	if len(hints) == 0 {
		return err
	}
	walkProtocolErrors(err, func(pe *ProtocolError) {
		if h, ok := hints[pe.Code]; ok {
			pe.Hint = h
		}
	})
	return err
}

// walkProtocolErrors calls f on every ProtocolError in err's tree (wrapped
// and joined errors included).
func walkProtocolErrors(err error, f func(*ProtocolError)) {
	switch x := err.(type) {
	case *ProtocolError:
		f(x)
	case interface{ Unwrap() []error }:
		for _, e := range x.Unwrap() {
			walkProtocolErrors(e, f)
		}
	case interface{ Unwrap() error }:
		walkProtocolErrors(x.Unwrap(), f)
	}
}

// hintFor returns the next step for an operator who got code c while working
// on topic (errcode's Hint; "" if there is none).
func hintFor(c twinlogv1.ErrorCode, topic string) string { return errcode.Of(c).HintFor(topic) }

func protoErr(c twinlogv1.ErrorCode, subject, msg, topic string) error {
	if c == twinlogv1.ErrorCode_ERROR_CODE_NONE {
		return nil
	}
	return &ProtocolError{Code: c, Subject: subject, Message: msg, Hint: hintFor(c, topic)}
}

// rpcError turns a transport-level failure into an operator message.
func rpcError(err error, addr, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	if ws, ok := asWrongServer(err); ok {
		return fmt.Errorf("%s: %w", what, ws)
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s at %s: %w", what, addr, err)
	}
	switch st.Code() {
	case codes.Unavailable:
		msg := st.Message()
		switch {
		case strings.Contains(msg, "certificate required"):
			return fmt.Errorf("%s: %s requires a client certificate (%s): pass --tls-cert and --tls-key (or TWINLOG_TLS_CERT, TWINLOG_TLS_KEY)", what, addr, msg)
		case strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:") || strings.Contains(msg, "tlsfiles:"):
			return fmt.Errorf("%s: TLS with %s failed (%s): check --tls-ca, --tls-cert and --tls-key", what, addr, msg)
		case strings.Contains(msg, "server preface: EOF"), strings.Contains(msg, "connection reset by peer"),
			strings.Contains(msg, "closed pipe"):
			// A TLS server drops a plaintext client's HTTP/2 preface: the
			// client sees EOF, a reset or (on an in-memory pipe) a closed
			// pipe, depending on who moves first.
			return fmt.Errorf("%s: %s closed the connection (%s): if it runs TLS, pass --tls-ca, --tls-cert and --tls-key", what, addr, msg)
		}
		return fmt.Errorf("%s: cannot reach %s (%s): is the server running? set --bootstrap or TWINLOG_BOOTSTRAP", what, addr, msg)
	case codes.DeadlineExceeded:
		return fmt.Errorf("%s: %s did not answer in time: retry, or raise --timeout", what, addr)
	case codes.PermissionDenied:
		return fmt.Errorf("%s at %s: %s: ask an administrator for an ACL (`twinctl acls add`)", what, addr, st.Message())
	case codes.Unimplemented:
		return fmt.Errorf("%s: %s does not serve this RPC (%s): admin and mirror commands need the controller, produce/consume a broker", what, addr, st.Message())
	case codes.Canceled:
		return context.Canceled
	}
	return fmt.Errorf("%s at %s: %s: %s", what, addr, st.Code(), st.Message())
}

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	// cobra reports unknown commands and flags from Find and flag parsing
	// with plain errors before our hooks run.
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "invalid argument"} {
		if strings.HasPrefix(msg, p) {
			return ExitUsage
		}
	}
	return ExitError
}
