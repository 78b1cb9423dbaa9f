//go:build unix

package boltstore

import "syscall"

// limitChild caps an isolated child's address space and file size, so the
// crash a test is about (an allocation or a file of gigabytes) comes quickly
// and fills neither memory nor disk.
func limitChild() {
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: 2 << 30, Max: 2 << 30})
	_ = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 64 << 20, Max: 64 << 20})
}
