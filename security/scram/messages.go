package scram

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

const (
	// maxMessageLen bounds every client message, SCRAM or PLAIN. Real
	// messages are a few hundred bytes; the bound keeps what a
	// conversation holds small whatever frame size the caller allows.
	maxMessageLen = 16 << 10

	// nonceLen is the length of the server's part of the nonce: 30
	// printable characters, about 196 bits of entropy, and exactly as long
	// as the server nonce of RFC 7677's example.
	nonceLen = 30

	// maxNonceReads bounds the reads printableNonce makes: a random source
	// fails to fill the nonce within them with a probability below 2^-160,
	// and one that yields only unusable bytes fails instead of looping.
	maxNonceReads = 256

	// fakeSaltLen is the length of the salt made up for an unknown user: 24
	// bytes, the length of the salts franz-go's kadm generates.
	fakeSaltLen = 24
)

// checkText checks what holds for every SCRAM client message: it is not
// too long, is UTF-8, and has no NUL byte.
func checkText(msg []byte) *Error {
	switch {
	case len(msg) == 0:
		return malformed("empty message")
	case len(msg) > maxMessageLen:
		return malformed(fmt.Sprintf("message longer than %d bytes", maxMessageLen))
	case !utf8.Valid(msg):
		return malformed("message is not UTF-8")
	case bytes.IndexByte(msg, 0) >= 0:
		return malformed("message contains a NUL byte")
	}
	return nil
}

// unescapeName decodes an RFC 5802 saslname: "=2C" stands for ',' and
// "=3D" for '=', and any other '=' is an error, as is an empty name. No
// other preparation (SASLprep) is applied, as in Kafka.
func unescapeName(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	if bytes.IndexByte(b, '=') < 0 {
		return string(b), true
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '=' {
			sb.WriteByte(c)
			continue
		}
		if i+2 >= len(b) {
			return "", false
		}
		switch string(b[i+1 : i+3]) {
		case "2C":
			sb.WriteByte(',')
		case "3D":
			sb.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return sb.String(), true
}

// validNonce reports whether b is a non-empty run of printable ASCII
// characters other than ',' (RFC 5802's c-nonce and s-nonce).
func validNonce(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !nonceChar(c) {
			return false
		}
	}
	return true
}

// nonceChar reports whether c may appear in a nonce.
func nonceChar(c byte) bool { return c >= 0x21 && c <= 0x7e && c != ',' }

// validExtension reports whether b is an extension attribute: one or more
// ASCII letters, '=', and a non-empty value. The value cannot hold ',' or
// NUL, since the message was split on ',' and checked by checkText.
func validExtension(b []byte) (key, value []byte, ok bool) {
	i := bytes.IndexByte(b, '=')
	if i <= 0 || i == len(b)-1 {
		return nil, nil, false
	}
	for _, c := range b[:i] {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return nil, nil, false
		}
	}
	return b[:i], b[i+1:], true
}

// decodeBase64 decodes standard, padded base64, refusing any text that is
// not the canonical encoding of its bytes (line breaks, which the decoder
// would skip, and non-zero padding bits among them).
func decodeBase64(b []byte) ([]byte, bool) {
	out, err := base64.StdEncoding.Strict().DecodeString(string(b))
	if err != nil || base64.StdEncoding.EncodeToString(out) != string(b) {
		return nil, false
	}
	return out, true
}

// printableNonce reads a server nonce of nonceLen characters from random.
// Each byte read is kept if it may appear in a nonce and dropped
// otherwise, so the characters are uniform over the 93 allowed ones, and a
// reader that yields a valid nonce gives exactly that nonce.
func printableNonce(random io.Reader) ([]byte, error) {
	nonce := make([]byte, 0, nonceLen)
	buf := make([]byte, nonceLen)
	for range maxNonceReads {
		need := buf[:nonceLen-len(nonce)]
		if _, err := io.ReadFull(random, need); err != nil {
			return nil, err
		}
		for _, c := range need {
			if nonceChar(c) {
				nonce = append(nonce, c)
			}
		}
		if len(nonce) == nonceLen {
			return nonce, nil
		}
	}
	return nil, fmt.Errorf("no nonce after %d reads", maxNonceReads)
}
