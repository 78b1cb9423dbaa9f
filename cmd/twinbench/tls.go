package main

// TLS cost. --tls starts the in-process cluster with mutual TLS on every
// hop, as a secured deployment runs: one CA made with security/pki in the
// data dir, a certificate per node (the controller, each broker, and the
// bench's clients) valid for 127.0.0.1, and a security/transport Transport
// per node, so that the controller's and brokers' gRPC listeners, the
// brokers' Kafka listeners, replication, heartbeats and metadata, and the
// bench's producers and consumers all handshake with TLS 1.3 and verify
// each other's certificates (tls.client.auth required). --compare-tls N
// runs the same benchmark N times in plaintext and N times with TLS, in
// pairs whose order alternates (plain tls, tls plain, ...), each on a fresh
// cluster, and prints each run and the medians: throughput, produce
// latency, and records per CPU second of the process (the figure to trust
// on a machine other work shares, where throughput follows the CPU the
// bench got). The issue's target, for acks=all 1 KiB records, is TLS
// throughput at least 70% of plaintext:
//
//	go run ./cmd/twinbench --inprocess --partitions 8 --rf 3 --min-isr 2 --acks -1 \
//	    --record-size 1024 --compare-tls 5 --duration 20s
//
// On a 2-core VM (AMD EPYC, AES-NI) with 5 pairs, TLS gave 72.5% of
// plaintext's throughput (median 158k against 218k records/s; p50 12.2
// against 9.0 ms, p99 29.9 against 23.0 ms) and 67% of its records per
// CPU second: in process, every byte is encrypted and decrypted on four
// hops (producer to leader, leader to each of two followers, leader to
// consumer), all on the same two cores, where AES-GCM took about 16% of
// the CPU.
//
// The cost of one connection's handshake (mutual, ECDSA P-256, full: the
// daemons keep no session cache) against a plain TCP connect is
// BenchmarkHandshake in tls_test.go:
//
//	go test -run '^$' -bench Handshake -benchtime 2000x ./cmd/twinbench/

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/twinlog/twinlog/security/pki"
	"github.com/twinlog/twinlog/security/tlsfiles"
	tlstransport "github.com/twinlog/twinlog/security/transport"
)

// benchPKI is a CA whose certificates are written to dir.
type benchPKI struct {
	dir    string
	ca     *pki.CA
	caFile string
}

// newBenchPKI makes a CA valid for a day and writes it to dir.
func newBenchPKI(dir string) (*benchPKI, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ca, err := pki.NewCA("twinbench CA", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	p := &benchPKI{dir: dir, ca: ca, caFile: filepath.Join(dir, "ca.crt")}
	if err := ca.WriteFiles(p.caFile, filepath.Join(dir, "ca.key")); err != nil {
		return nil, err
	}
	return p, nil
}

// files issues name a certificate for both ends of a connection, valid for
// 127.0.0.1 and localhost, and returns the files of it, its key and the CA.
func (p *benchPKI) files(name string) (tlsfiles.Files, error) {
	cert, key, err := p.ca.Issue(pki.LeafOptions{CommonName: name, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Client: true})
	if err != nil {
		return tlsfiles.Files{}, err
	}
	cf, kf, err := pki.WriteLeaf(p.dir, name, cert, key)
	if err != nil {
		return tlsfiles.Files{}, err
	}
	return tlsfiles.Files{CertFile: cf, KeyFile: kf, CAFile: p.caFile}, nil
}

// transport is name's TLS as a daemon configured with tls.*.file and
// tls.client.auth=required has it.
func (p *benchPKI) transport(name string) (*tlstransport.Transport, error) {
	f, err := p.files(name)
	if err != nil {
		return nil, err
	}
	return tlstransport.New(tlstransport.Config{Files: f, ClientAuth: tls.RequireAndVerifyClientCert})
}

// kafkaOpts are the franz-go options of the bench's Kafka clients: with
// TLS, a dialer that handshakes with the client's certificate and verifies
// each broker for the address it dials (an IP address, which crypto/tls
// does not send as a server name; tlsfiles checks it instead).
func kafkaOpts(o options) []kgo.Opt {
	if o.client == nil {
		return nil
	}
	var d net.Dialer
	return []kgo.Opt{kgo.Dialer(o.client.Source().TLSDialer(d.DialContext))}
}

// compareTLS runs the benchmark o.compareTLS times in plaintext and as
// many times with TLS, alternately, and prints (or, with --json, encodes)
// every run and the medians.
func compareTLS(ctx context.Context, o options) error {
	if !o.inprocess {
		return fmt.Errorf("--compare-tls needs --inprocess")
	}
	var plain, secure []*Result
	for i := range o.compareTLS {
		// Pairs alternate which kind goes first (plain, tls, tls, plain,
		// ...): the process's first run, and whatever load the machine
		// drifts into, would otherwise always fall on the same kind.
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, withTLS := range order {
			ro := o
			ro.tls = withTLS
			if o.dataDir != "" {
				ro.dataDir = filepath.Join(o.dataDir, fmt.Sprintf("run-%d-tls-%v", i, withTLS))
			}
			res, err := runOnce(ctx, ro)
			if err != nil {
				return fmt.Errorf("run %d (tls=%v): %w", i+1, withTLS, err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if withTLS {
				secure = append(secure, res)
			} else {
				plain = append(plain, res)
			}
			if !o.jsonOut {
				printTable(res)
				fmt.Println()
			}
		}
	}
	cmp := TLSComparison{Plaintext: medianOf(plain), TLS: medianOf(secure), PlaintextRuns: plain, TLSRuns: secure}
	if cmp.Plaintext.RecordsPerSec > 0 {
		cmp.ThroughputRatio = cmp.TLS.RecordsPerSec / cmp.Plaintext.RecordsPerSec
	}
	if cmp.Plaintext.RecordsPerCPUSec > 0 {
		cmp.CPUEfficiencyRatio = cmp.TLS.RecordsPerCPUSec / cmp.Plaintext.RecordsPerCPUSec
	}
	if o.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(&cmp)
	}
	printComparison(&cmp)
	return nil
}

// TLSComparison is --compare-tls's result: the medians over the runs of
// each kind, TLS's throughput as a fraction of plaintext's, and the runs.
// CPUEfficiencyRatio compares records per CPU second of this process
// instead: on a machine shared with other work the throughput follows the
// CPU the bench got, which the efficiency leaves out.
type TLSComparison struct {
	Plaintext          Medians   `json:"plaintext"`
	TLS                Medians   `json:"tls"`
	ThroughputRatio    float64   `json:"tls_throughput_ratio"`
	CPUEfficiencyRatio float64   `json:"tls_records_per_cpu_second_ratio"`
	PlaintextRuns      []*Result `json:"plaintext_runs"`
	TLSRuns            []*Result `json:"tls_runs"`
}

// Medians are the medians of a kind's runs, each figure on its own.
type Medians struct {
	Runs          int     `json:"runs"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	P50Ms         float64 `json:"produce_p50_ms"`
	P99Ms         float64 `json:"produce_p99_ms"`
	CPUCores      float64 `json:"cpu_cores_avg"`
	// RecordsPerCPUSec is records/s per core of this process (brokers
	// and load generator together).
	RecordsPerCPUSec float64 `json:"records_per_cpu_second"`
	Errors           int     `json:"errors"`
}

func medianOf(rs []*Result) Medians {
	med := func(f func(*Result) float64) float64 {
		var v []float64
		for _, r := range rs {
			v = append(v, f(r))
		}
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	m := Medians{Runs: len(rs),
		RecordsPerSec: med(func(r *Result) float64 { return r.RecordsPerSec }),
		MBPerSec:      med(func(r *Result) float64 { return r.MBPerSec }),
		P50Ms:         med(func(r *Result) float64 { return r.ProduceLatencyMs.P50 }),
		P99Ms:         med(func(r *Result) float64 { return r.ProduceLatencyMs.P99 }),
		CPUCores: med(func(r *Result) float64 {
			if r.Process == nil {
				return 0
			}
			return r.Process.CPUCores
		}),
		RecordsPerCPUSec: med(recordsPerCPUSec),
	}
	for _, r := range rs {
		for _, n := range r.Errors {
			m.Errors += n
		}
	}
	return m
}

func recordsPerCPUSec(r *Result) float64 {
	if r.Process == nil || r.Process.CPUCores <= 0 {
		return 0
	}
	return r.RecordsPerSec / r.Process.CPUCores
}

func printComparison(c *TLSComparison) {
	fmt.Printf("twinbench --compare-tls  medians of %d plaintext and %d TLS runs, alternated\n", c.Plaintext.Runs, c.TLS.Runs)
	fmt.Printf("%-12s %12s %9s %9s %9s %10s %14s %7s\n", "", "records/s", "MB/s", "p50 ms", "p99 ms", "CPU cores", "records/CPU-s", "errors")
	for _, row := range []struct {
		name string
		m    Medians
	}{{"plaintext", c.Plaintext}, {"tls", c.TLS}} {
		fmt.Printf("%-12s %12.0f %9.2f %9.3f %9.3f %10.2f %14.0f %7d\n", row.name, row.m.RecordsPerSec, row.m.MBPerSec, row.m.P50Ms, row.m.P99Ms,
			row.m.CPUCores, row.m.RecordsPerCPUSec, row.m.Errors)
	}
	fmt.Printf("tls/plain: throughput %.1f%%, records per CPU second %.1f%%\n", 100*c.ThroughputRatio, 100*c.CPUEfficiencyRatio)
	for i := range c.PlaintextRuns {
		p, t := c.PlaintextRuns[i], c.TLSRuns[i]
		fmt.Printf("pair %d: plaintext %.0f records/s p50 %.3f p99 %.3f (%.0f/CPU-s); tls %.0f records/s p50 %.3f p99 %.3f (%.0f/CPU-s)\n", i+1,
			p.RecordsPerSec, p.ProduceLatencyMs.P50, p.ProduceLatencyMs.P99, recordsPerCPUSec(p),
			t.RecordsPerSec, t.ProduceLatencyMs.P50, t.ProduceLatencyMs.P99, recordsPerCPUSec(t))
	}
}
