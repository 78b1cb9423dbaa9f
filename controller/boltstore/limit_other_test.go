//go:build !unix

package boltstore

func limitChild() {}
