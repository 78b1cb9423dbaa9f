// Package pki makes a small certificate authority and the certificates it
// issues, for `make run`, for tests and for the `twinctl certs` command. It
// is not a production CA: it has no revocation, no intermediate
// authorities and no policy beyond what LeafOptions says.
//
// # Keys and certificates
//
// Every key is an ECDSA key on the NIST P-256 curve. A CA certificate is
// self-signed, has basic constraints CA:TRUE with a path length of zero
// (it may sign only end-entity certificates), the key usages certSign and
// cRLSign, and a random serial number of at most 128 bits. An issued
// certificate carries the extended key usage serverAuth, clientAuth or
// both, the key usage digitalSignature, the subject and the subject
// alternative names of its LeafOptions, and is signed by the CA with
// ECDSA-SHA256. Its validity is not clipped to the CA's: a peer refuses a
// leaf once the CA that issued it has expired, whatever the leaf says.
//
// # Files
//
// Certificates are written as PEM "CERTIFICATE" blocks with mode 0644, and
// private keys as PKCS #8 PEM "PRIVATE KEY" blocks with mode 0600. Every
// file is written atomically: the bytes go to a temporary file in the same
// directory, which is synced, renamed over the destination, and the
// directory is synced. A reader (security/tlsfiles, reloading on change)
// therefore sees either the old or the new file, never a part of one; a
// certificate and its key are still two files, so a reader may see a new
// certificate with the old key for a moment, which tlsfiles reports as a
// mismatch and retries.
package pki
