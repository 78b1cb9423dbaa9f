package scram

import (
	"bytes"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
)

// Lookup returns the stored credential of user for mechanism m, and false
// if the user is unknown or has no credential for m. The user is the name
// the client sent, with RFC 5802's escapes decoded and nothing else done to
// it. The server only reads the slices of the returned credential, and
// keeps them until the conversation ends: a store that shares them must not
// modify them in place meanwhile.
type Lookup func(user string, m Mechanism) (Credential, bool)

// step is where a ServerConversation is.
type step uint8

const (
	stepFirst step = iota // waiting for client-first-message
	stepFinal             // waiting for client-final-message
	stepEnded             // succeeded or failed: nothing more is accepted
)

// ServerConversation is one SCRAM exchange, server side: the client's first
// message in, the server's first message out, the client's final message
// in, the server's final message out. It is single-use: once it has
// succeeded or failed, every further Step fails with ErrMalformed. It is
// not safe for concurrent use.
type ServerConversation struct {
	mech   Mechanism
	lookup Lookup
	random io.Reader
	step   step

	// Set by the first step.
	user        string
	gs2Header   []byte // "n,," or "y,," or with "a=...", as the client sent it
	clientBare  []byte // client-first-message-bare, as the client sent it
	serverFirst []byte
	nonce       []byte // client nonce + server nonce
	cred        Credential
	// refuse, when not empty, is why the conversation fails at the proof
	// whatever the client sends: the user is unknown, has no credential for
	// the mechanism, or its stored credential is not valid.
	refuse string
}

// NewServer starts a SCRAM conversation for mechanism m. lookup finds the
// user's credential; random supplies the server nonce and, for an unknown
// user, a made-up salt, and should be crypto/rand.Reader outside tests. An
// invalid mechanism or a nil lookup or random makes the first Step fail
// with ErrAuthenticationFailed.
func NewServer(m Mechanism, lookup Lookup, random io.Reader) *ServerConversation {
	return &ServerConversation{mech: m, lookup: lookup, random: random}
}

// Step takes the client's next message and returns the server's answer.
//
// The first call takes client-first-message and returns
// server-first-message with done false. The second takes
// client-final-message and, if the client proved it knows the password,
// returns server-final-message ("v=" and the server signature) with done
// true and the authenticated user name. Any error ends the conversation and
// comes with no message: as in Kafka, the caller reports the failure in its
// SaslAuthenticate response rather than with RFC 5802's "e=" attribute.
//
// Every error is an *Error matching ErrMalformed or ErrAuthenticationFailed
// (see there). An unknown user is not refused at the first message: the
// server answers with a random salt and MinIterations, and fails at the
// proof with ErrAuthenticationFailed exactly as for a wrong password.
func (s *ServerConversation) Step(msg []byte) (resp []byte, done bool, user string, err error) {
	switch s.step {
	case stepFirst:
		resp, e := s.first(msg)
		if e != nil {
			s.step = stepEnded
			return nil, false, "", e
		}
		s.step = stepFinal
		return resp, false, "", nil
	case stepFinal:
		s.step = stepEnded
		resp, e := s.final(msg)
		if e != nil {
			return nil, false, "", e
		}
		return resp, true, s.user, nil
	}
	return nil, false, "", malformed("message after the end of the conversation")
}

// first handles client-first-message (RFC 5802, section 7):
//
//	gs2-cbind-flag "," [ "a=" saslname ] "," [ "m=" ... "," ]
//	"n=" saslname "," "r=" c-nonce [ "," extensions ]
func (s *ServerConversation) first(msg []byte) ([]byte, *Error) {
	if !s.mech.valid() || s.lookup == nil || s.random == nil {
		return nil, failed(fmt.Sprintf("server misconfigured: mechanism %s, lookup set %t, random set %t",
			s.mech, s.lookup != nil, s.random != nil))
	}
	if e := checkText(msg); e != nil {
		return nil, e
	}

	// The GS2 header.
	rest := msg
	switch {
	case bytes.HasPrefix(rest, []byte("n,")), bytes.HasPrefix(rest, []byte("y,")):
		rest = rest[2:]
	case bytes.HasPrefix(rest, []byte("p=")):
		return nil, malformed("channel binding is not supported")
	default:
		return nil, malformed(`channel binding flag is not "n" or "y"`)
	}
	authzid := ""
	if bytes.HasPrefix(rest, []byte("a=")) {
		i := bytes.IndexByte(rest, ',')
		if i < 0 {
			return nil, malformed("GS2 header does not end")
		}
		name, ok := unescapeName(rest[2:i])
		if !ok {
			return nil, malformed("invalid authorization identity")
		}
		authzid = name
		rest = rest[i+1:]
	} else if bytes.HasPrefix(rest, []byte(",")) {
		rest = rest[1:]
	} else {
		return nil, malformed("invalid GS2 header")
	}
	gs2Header := msg[:len(msg)-len(rest)]

	// client-first-message-bare.
	bare := rest
	attrs := bytes.Split(bare, []byte(","))
	if bytes.HasPrefix(attrs[0], []byte("m=")) {
		return nil, malformed("mandatory extensions are not supported")
	}
	if !bytes.HasPrefix(attrs[0], []byte("n=")) {
		return nil, malformed("user name expected")
	}
	name, ok := unescapeName(attrs[0][2:])
	if !ok {
		return nil, malformed("invalid user name")
	}
	if len(attrs) < 2 || !bytes.HasPrefix(attrs[1], []byte("r=")) {
		return nil, malformed("nonce expected after the user name")
	}
	clientNonce := attrs[1][2:]
	if !validNonce(clientNonce) {
		return nil, malformed("invalid client nonce")
	}
	for _, a := range attrs[2:] {
		key, value, ok := validExtension(a)
		if !ok {
			return nil, malformed("invalid extension")
		}
		// Kafka's only extension (KIP-48); others are ignored as in Kafka.
		if string(key) == "tokenauth" && bytes.EqualFold(value, []byte("true")) {
			return nil, malformed("delegation tokens are not supported")
		}
	}
	if authzid != "" && authzid != name {
		return nil, malformed("authorization identity differs from the user name")
	}

	serverNonce, err := printableNonce(s.random)
	if err != nil {
		return nil, failed("reading the random source: " + err.Error())
	}
	cred, ok := s.lookup(name, s.mech)
	switch {
	case !ok:
		s.refuse = "unknown user or no " + s.mech.String() + " credential"
	case cred.Mechanism != s.mech:
		s.refuse = "lookup returned a " + cred.Mechanism.String() + " credential for " + s.mech.String()
	default:
		if err := cred.Validate(); err != nil {
			s.refuse = "stored credential is not valid: " + err.Error()
		}
	}
	if s.refuse != "" {
		salt := make([]byte, fakeSaltLen)
		if _, err := io.ReadFull(s.random, salt); err != nil {
			return nil, failed("reading the random source: " + err.Error())
		}
		cred = Credential{
			Mechanism:  s.mech,
			Salt:       salt,
			StoredKey:  make([]byte, s.mech.size()),
			ServerKey:  make([]byte, s.mech.size()),
			Iterations: MinIterations,
		}
	}

	nonce := make([]byte, 0, len(clientNonce)+len(serverNonce))
	nonce = append(append(nonce, clientNonce...), serverNonce...)
	sf := make([]byte, 0, 64+len(nonce)+base64.StdEncoding.EncodedLen(len(cred.Salt)))
	sf = append(sf, "r="...)
	sf = append(sf, nonce...)
	sf = append(sf, ",s="...)
	sf = base64.StdEncoding.AppendEncode(sf, cred.Salt)
	sf = append(sf, ",i="...)
	sf = strconv.AppendInt(sf, int64(cred.Iterations), 10)

	s.user = name
	s.gs2Header = bytes.Clone(gs2Header)
	s.clientBare = bytes.Clone(bare)
	s.serverFirst = sf
	s.nonce = nonce
	s.cred = cred
	return bytes.Clone(sf), nil
}

// final handles client-final-message (RFC 5802, section 7):
//
//	"c=" base64(gs2-header) "," "r=" nonce [ "," extensions ] "," "p=" base64(proof)
func (s *ServerConversation) final(msg []byte) ([]byte, *Error) {
	if e := checkText(msg); e != nil {
		return nil, e
	}
	attrs := bytes.Split(msg, []byte(","))
	if len(attrs) < 3 {
		return nil, malformed("channel binding, nonce and proof expected")
	}
	if !bytes.HasPrefix(attrs[0], []byte("c=")) {
		return nil, malformed("channel binding expected")
	}
	cb, ok := decodeBase64(attrs[0][2:])
	if !ok {
		return nil, malformed("channel binding is not base64")
	}
	if !bytes.Equal(cb, s.gs2Header) {
		return nil, malformed("channel binding does not repeat the GS2 header")
	}
	if !bytes.HasPrefix(attrs[1], []byte("r=")) {
		return nil, malformed("nonce expected after the channel binding")
	}
	// RFC 5802 wants the server-first nonce repeated exactly; librdkafka
	// repeats it after its own client nonce. Kafka's ScramSaslServer
	// accepts any nonce that ends with the server-first one, and so does
	// this (the proof covers whatever was sent).
	if !bytes.HasSuffix(attrs[1][2:], s.nonce) {
		return nil, malformed("nonce does not match")
	}
	last := attrs[len(attrs)-1]
	for _, a := range attrs[2 : len(attrs)-1] {
		if _, _, ok := validExtension(a); !ok {
			return nil, malformed("invalid extension")
		}
	}
	if !bytes.HasPrefix(last, []byte("p=")) {
		return nil, malformed("proof expected at the end")
	}
	proof, ok := decodeBase64(last[2:])
	if !ok {
		return nil, malformed("proof is not base64")
	}
	m := s.mech
	if len(proof) != m.size() {
		return nil, malformed(fmt.Sprintf("proof is %d bytes, %s needs %d", len(proof), m, m.size()))
	}
	withoutProof := msg[:len(msg)-len(last)-1]

	// AuthMessage := client-first-message-bare + "," +
	//                server-first-message + "," +
	//                client-final-message-without-proof
	authMsg := make([]byte, 0, len(s.clientBare)+len(s.serverFirst)+len(withoutProof)+2)
	authMsg = append(authMsg, s.clientBare...)
	authMsg = append(authMsg, ',')
	authMsg = append(authMsg, s.serverFirst...)
	authMsg = append(authMsg, ',')
	authMsg = append(authMsg, withoutProof...)

	// ClientKey := ClientProof XOR HMAC(StoredKey, AuthMessage); the proof
	// is right if H(ClientKey) = StoredKey. The server signature is computed
	// whether or not it is, so that every failure costs the same.
	ck := hmacSum(m, s.cred.StoredKey, authMsg)
	subtle.XORBytes(ck, ck, proof)
	match := subtle.ConstantTimeCompare(storedKey(m, ck), s.cred.StoredKey) == 1
	serverSig := hmacSum(m, s.cred.ServerKey, authMsg)
	if s.refuse != "" {
		return nil, failed(s.refuse)
	}
	if !match {
		return nil, failed("wrong proof")
	}
	resp := make([]byte, 0, 2+base64.StdEncoding.EncodedLen(len(serverSig)))
	resp = append(resp, "v="...)
	return base64.StdEncoding.AppendEncode(resp, serverSig), nil
}
