package tlsfiles

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMinReloadInterval is the MinReloadInterval of Options that leave
// it zero.
const DefaultMinReloadInterval = 5 * time.Second

// racyWindow is how recently a file may have been modified, at the time of
// a check, for the next check to read it even if its stat is unchanged. It
// covers file systems whose modification times are coarse (FAT keeps two
// seconds; Linux file systems advance by a scheduler tick).
const racyWindow = 2 * time.Second

// Files names the PEM files of a Source.
type Files struct {
	// CertFile holds the certificate presented to peers, followed by any
	// intermediate certificates to send with it; blocks other than
	// CERTIFICATE are skipped, so it may be the same file as KeyFile.
	CertFile string
	// KeyFile holds the certificate's private key: PKCS #8 ("PRIVATE
	// KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS #1 ("RSA PRIVATE KEY"),
	// unencrypted. The first private key block is used.
	KeyFile string
	// CAFile is the trust bundle: one or more CERTIFICATE blocks, the
	// authorities a peer's certificate must chain to.
	CAFile string
}

// Options tunes a Source. The zero value is ready to use.
type Options struct {
	// MinReloadInterval is the least time between two checks of the files
	// made by handshakes; zero means DefaultMinReloadInterval and a
	// negative value checks on every handshake. Check is not limited.
	MinReloadInterval time.Duration
	// Logger receives a record for every reload and every failed reload;
	// nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock of the rate limit above, for tests; nil means
	// time.Now. Certificate validity is always checked against time.Now.
	Now func() time.Time
}

// Source is TLS material loaded from Files and kept current. Its methods
// may be called from any goroutine.
type Source struct {
	files    Files
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	cur        atomic.Pointer[material]
	ok, failed atomic.Uint64

	// mu serialises checks and guards the fields below. Handshakes only
	// try it: while a check runs, they use the material in use.
	mu        sync.Mutex
	lastCheck time.Time
	stamps    [3]stamp
	racy      bool   // a file was modified within racyWindow of the last stat
	attempt   string // what the last read found: a digest, or a read error
	lastErr   error  // the failure of that attempt, nil if it was loaded
}

// stamp is what a stat of one file found.
type stamp struct {
	info os.FileInfo // nil when the path is empty or the stat failed
	err  string      // the stat's error
}

func (a stamp) same(b stamp) bool {
	if a.info == nil || b.info == nil {
		return a.info == nil && b.info == nil && a.err == b.err
	}
	return os.SameFile(a.info, b.info) && a.info.Size() == b.info.Size() && a.info.ModTime().Equal(b.info.ModTime())
}

// Load reads the files and returns a Source serving them. CertFile and
// KeyFile are both set or both empty (a client that presents no
// certificate); CAFile may be empty when the source only serves a
// listener that verifies no client certificates, in which case every
// verification of a peer fails. At least one of CertFile and CAFile is set.
func Load(f Files, o Options) (*Source, error) {
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("tlsfiles: CertFile and KeyFile must be set together")
	}
	if f.CertFile == "" && f.CAFile == "" {
		return nil, errors.New("tlsfiles: no files: set CertFile and KeyFile, CAFile, or all three")
	}
	s := &Source{files: f, interval: o.MinReloadInterval, log: o.Logger, now: o.Now}
	if s.interval == 0 {
		s.interval = DefaultMinReloadInterval
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.stamps, s.racy = s.statAll()
	data, err := s.readAll()
	if err != nil {
		return nil, err
	}
	m, err := parse(f, data)
	if err != nil {
		return nil, err
	}
	s.cur.Store(m)
	s.attempt = hex.EncodeToString(m.digest[:])
	s.lastCheck = s.now()
	return s, nil
}

// Check checks the files now, whatever the rate limit, and loads them if
// they changed. It returns nil when the material in use is what the files
// hold, and otherwise the error that keeps the files from loading (the
// previous material stays in use). A failure is logged and counted once,
// not on every Check that finds the same files.
func (s *Source) Check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkLocked(s.now())
}

// NotAfter returns the expiry of the certificate in use, or the zero time
// when the source has none.
func (s *Source) NotAfter() time.Time {
	if m := s.cur.Load(); m.leaf != nil {
		return m.leaf.NotAfter
	}
	return time.Time{}
}

// Reloads returns how many times changed files were loaded and how many
// times changed files failed to load, since Load.
func (s *Source) Reloads() (ok, failed uint64) {
	return s.ok.Load(), s.failed.Load()
}

// maybeCheck is the check made by handshakes: it does nothing when a check
// ran less than the reload interval ago or is running now.
func (s *Source) maybeCheck() {
	now := s.now()
	if !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	if d := now.Sub(s.lastCheck); d >= 0 && d < s.interval {
		return
	}
	s.checkLocked(now)
}

func (s *Source) checkLocked(now time.Time) error {
	s.lastCheck = now
	stamps, racy := s.statAll()
	if !s.racy && stamps[0].same(s.stamps[0]) && stamps[1].same(s.stamps[1]) && stamps[2].same(s.stamps[2]) {
		return s.lastErr
	}
	s.stamps, s.racy = stamps, racy

	cur := s.cur.Load()
	data, err := s.readAll()
	attempt := ""
	if err != nil {
		attempt = "error: " + err.Error()
	} else {
		d := digest(data)
		attempt = hex.EncodeToString(d[:])
		if d == cur.digest {
			// Unchanged content (touched, or restored after a failure).
			if s.lastErr != nil {
				s.log.Info("tlsfiles: TLS files are valid again; the material in use is unchanged", "cert_file", s.files.CertFile, "ca_file", s.files.CAFile)
			}
			s.attempt, s.lastErr = attempt, nil
			return nil
		}
	}
	if attempt == s.attempt {
		return s.lastErr
	}
	s.attempt = attempt
	var m *material
	if err == nil {
		m, err = parse(s.files, data)
	}
	if err != nil {
		s.lastErr = err
		s.failed.Add(1)
		s.log.Error("tlsfiles: reload failed; the previous TLS material stays in use", "err", err, "cert_file", s.files.CertFile, "ca_file", s.files.CAFile)
		return err
	}
	s.cur.Store(m)
	s.lastErr = nil
	s.ok.Add(1)
	attrs := []any{"cert_file", s.files.CertFile, "ca_file", s.files.CAFile, "ca_certs", m.caCount}
	if m.leaf != nil {
		attrs = append(attrs, "subject", m.leaf.Subject.String(), "serial", m.leaf.SerialNumber.String(), "not_after", m.leaf.NotAfter)
	}
	s.log.Info("tlsfiles: reloaded TLS material", attrs...)
	return nil
}

// statAll stats the three files. racy reports whether one of them was
// modified within racyWindow of now.
func (s *Source) statAll() (st [3]stamp, racy bool) {
	start := time.Now()
	for i, path := range s.paths() {
		if path == "" {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			st[i].err = err.Error()
			continue
		}
		st[i].info = fi
		if fi.ModTime().After(start.Add(-racyWindow)) {
			racy = true
		}
	}
	return st, racy
}

func (s *Source) paths() [3]string {
	return [3]string{s.files.CertFile, s.files.KeyFile, s.files.CAFile}
}

var fileRoles = [3]string{"cert file", "key file", "CA file"}

// readAll reads the three files (nil for an empty path).
func (s *Source) readAll() (data [3][]byte, err error) {
	for i, path := range s.paths() {
		if path == "" {
			continue
		}
		if data[i], err = os.ReadFile(path); err != nil {
			return data, fmt.Errorf("tlsfiles: %s: %w", fileRoles[i], err)
		}
	}
	return data, nil
}

// digest is the SHA-256 of the three files' contents, each preceded by its
// length so that bytes cannot move from one file to the next unnoticed.
func digest(data [3][]byte) [32]byte {
	h := sha256.New()
	for _, d := range data {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(d)))
		h.Write(n[:])
		h.Write(d)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}
