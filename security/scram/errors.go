package scram

import "errors"

// Every error that ServerConversation.Step and VerifyPlain return is an
// *Error, and errors.Is matches it to exactly one of these two sentinels.
var (
	// ErrAuthenticationFailed means the client did not prove that it knows
	// the password of the user it named: a wrong password, an unknown user,
	// a user without a credential for the mechanism, or a stored credential
	// that is not valid (and, for Step, a failure of the random source).
	// The reason may depend on what the server stores, so it is for the
	// broker's log only: the client must be told only that authentication
	// failed, never which of these it was.
	ErrAuthenticationFailed = errors.New("scram: authentication failed")

	// ErrMalformed means the client's message is not valid SCRAM or PLAIN,
	// or asks for something this server refuses whatever the user: channel
	// binding, a delegation token, a mandatory extension, an authorization
	// identity other than the user, or a message after the conversation
	// ended. The reason depends only on what the client sent, so it may be
	// told to the client.
	ErrMalformed = errors.New("scram: malformed client message")
)

// Error is an error from a SCRAM or PLAIN exchange. Kind is
// ErrAuthenticationFailed or ErrMalformed; Reason says in a few words what
// was wrong. errors.Is(err, Kind) holds.
type Error struct {
	Kind   error
	Reason string
}

// Error returns the kind's text and the reason, for the broker's log.
func (e *Error) Error() string { return e.Kind.Error() + ": " + e.Reason }

// Unwrap returns Kind.
func (e *Error) Unwrap() error { return e.Kind }

// SafeMessage returns the text that may be sent to the client in a
// SaslAuthenticate response: the reason of an ErrMalformed error, and only
// "authentication failed" for an ErrAuthenticationFailed one.
func (e *Error) SafeMessage() string {
	if e.Kind == ErrMalformed {
		return "malformed or unsupported SASL message: " + e.Reason
	}
	return "authentication failed"
}

// malformed returns an ErrMalformed *Error with the given reason.
func malformed(reason string) *Error { return &Error{Kind: ErrMalformed, Reason: reason} }

// failed returns an ErrAuthenticationFailed *Error with the given reason.
func failed(reason string) *Error { return &Error{Kind: ErrAuthenticationFailed, Reason: reason} }
