package rpcopt

import (
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

func TestPool(t *testing.T) {
	dials := map[string]int{}
	p := NewPool(func(addr string) (*grpc.ClientConn, error) {
		dials[addr]++
		if addr == "bad:1" {
			return nil, errors.New("refused")
		}
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	})
	a1, err := p.Get("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := p.Get("127.0.0.1:1")
	b, _ := p.Get("127.0.0.1:2")
	if a1 != a2 || a1 == b || dials["127.0.0.1:1"] != 1 {
		t.Fatalf("same address dialled %d times, shared %v; other address shared %v", dials["127.0.0.1:1"], a1 == a2, a1 == b)
	}
	// A failed dial is retried by the next Get.
	for range 2 {
		if _, err := p.Get("bad:1"); err == nil {
			t.Fatal("Get after a failed dial succeeded")
		}
	}
	if dials["bad:1"] != 2 {
		t.Fatalf("failed address dialled %d times, want 2", dials["bad:1"])
	}
	p.Close()
	if s := a1.(*grpc.ClientConn).GetState(); s != connectivity.Shutdown {
		t.Fatalf("connection state %v after Close, want Shutdown", s)
	}
	a3, err := p.Get("127.0.0.1:1")
	if err != nil || a3 == a1 || dials["127.0.0.1:1"] != 2 {
		t.Fatalf("Get after Close: err %v, same conn %v, dials %d", err, a3 == a1, dials["127.0.0.1:1"])
	}
	p.Close()
}
