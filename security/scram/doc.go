// Package scram is the server side of SASL SCRAM-SHA-256 and SCRAM-SHA-512
// (RFC 5802, RFC 7677) as Kafka uses them (KIP-84), and of SASL PLAIN
// (RFC 4616) verified against the same stored credentials. It is pure: no
// I/O, no clock, no goroutines; randomness comes from an io.Reader the
// caller passes.
//
// # Credentials
//
// A Credential is what the controller stores for a user and a mechanism,
// Kafka's UserScramCredentialRecord: the salt, the iteration count,
// StoredKey and ServerKey, never the password. NewCredential derives one
// from a password; FromSaltedPassword derives the same one from the salt
// and SaltedPassword that Kafka's AlterUserScramCredentials request
// carries. Iteration counts are held to Kafka's bounds, MinIterations and
// MaxIterations.
//
// # SCRAM
//
// NewServer starts one conversation; its Step takes the client's two
// messages and returns the server's two. The conversation follows RFC 5802
// with these choices, Kafka's where Kafka has one:
//
//   - Channel binding is not supported. A client that asks for it ("p=")
//     is refused; "n" and "y" are accepted (Kafka's parser accepts only
//     "n"), and the client's final message must repeat the GS2 header it
//     sent.
//   - User names are taken as sent, without SASLprep, as in Kafka: only the
//     escapes "=2C" (',') and "=3D" ('=') are decoded, and any other '='
//     is refused. Names are any UTF-8 text without NUL (Kafka's own parser
//     accepts only ASCII).
//   - An authorization identity ("a=") is accepted only if it equals the
//     user name, both unescaped (Kafka compares the escaped identity with
//     the unescaped name, so a name with ',' or '=' cannot repeat itself
//     as the identity there).
//   - Extensions after the nonce are checked for syntax and ignored, as in
//     Kafka, except Kafka's "tokenauth": tokenauth=true (any case) asks for
//     delegation-token authentication, which is not supported, and is
//     refused. A mandatory extension ("m=") is refused, as RFC 5802
//     requires (Kafka's parser accepts and ignores it).
//   - The server nonce is 30 printable characters from the random reader.
//   - A user that is unknown, has no credential for the mechanism, or whose
//     stored credential is not valid, is not refused at the first message:
//     the server answers with a random 24-byte salt and MinIterations, and
//     fails at the proof as for a wrong password, so that one conversation
//     does not tell whether the user exists (Kafka refuses such a user at
//     the first message). Two conversations do tell, to a client that
//     compares the salts or finds an iteration count other than
//     MinIterations: the made-up salt is fresh every time.
//   - A failure ends the conversation without a server message; the caller
//     reports it in its SaslAuthenticate response. A conversation is
//     single-use: a message after the end is refused.
//   - A client message longer than 16 KiB is refused.
//
// # PLAIN
//
// VerifyPlain checks a PLAIN message against the user's SCRAM credentials:
// it derives SaltedPassword from the password with the credential's salt
// and iteration count and compares the StoredKey that follows with the
// stored one. The password thus never needs to be stored.
//
// # Errors
//
// Every error from Step and VerifyPlain is an *Error that errors.Is matches
// to exactly one of two sentinels. ErrAuthenticationFailed covers whatever
// depends on the stored credentials (wrong password, unknown user, invalid
// stored credential): the client must be told only that authentication
// failed. ErrMalformed covers what depends only on the client's messages
// (syntax, refused features, authorization identity, a message after the
// end), whose reason may be told to the client. Error.SafeMessage returns
// the text that may be sent.
package scram
