package pki

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WriteLeaf writes an issued certificate and its key as <dir>/<name>.crt
// (mode 0644) and <dir>/<name>.key (mode 0600), each atomically, creating
// dir (mode 0755) if it is missing, and returns the two paths. name must be
// a plain file name: not empty, not "." or "..", without a path separator.
func WriteLeaf(dir, name string, certPEM, keyPEM []byte) (certFile, keyFile string, err error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return "", "", fmt.Errorf("pki: leaf name %q is not a plain file name", name)
	}
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return "", "", errors.New("pki: empty certificate or key")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("pki: %w", err)
	}
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := writeAtomic(certFile, certPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := writeAtomic(keyFile, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// writeAtomic replaces path with data: it writes a temporary file in the
// same directory (created with mode 0600, so a key is never readable by
// others, then set to perm), syncs it, renames it over path and syncs the
// directory. On failure the temporary file is removed and path is left as
// it was.
func writeAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("pki: write %s: %w", path, err)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename in dir durable. Some systems cannot sync a
// directory; the rename has happened by then, so a failure is not reported.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	d.Sync()
	d.Close()
}
