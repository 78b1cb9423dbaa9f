package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"

	"google.golang.org/protobuf/encoding/protowire"
)

// With --inprocess the brokers and the load generator share one process,
// so /proc gives their CPU together. --cpu-split tells them apart: every
// goroutine of the load (the workers, the consumers, the clients'
// connections) runs under loadLabel, because runOnce starts the load under
// pprof.Do and goroutines inherit their creator's labels, while the
// brokers' goroutines descend from ones started before it (accept loops
// included) and carry none. A CPU profile of the measured window then
// samples each side; the brokers' share of the samples times the process
// CPU is their CPU. The Go runtime's own background work (GC workers,
// scavenger) carries no label and counts as the brokers'.
const loadLabelKey, loadLabelValue = "twinbench", "load"

// withLoadLabel runs f with the load's profiler label on its goroutine and
// every goroutine started under it.
func withLoadLabel(ctx context.Context, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels(loadLabelKey, loadLabelValue), f)
}

// cpuSplit is a CPU profile being taken; nil when none could start.
type cpuSplit struct{ buf bytes.Buffer }

// startCPUSplit starts the profile (an error: another profile, as --pprof
// serves, is running).
func startCPUSplit() (*cpuSplit, error) {
	s := &cpuSplit{}
	if err := pprof.StartCPUProfile(&s.buf); err != nil {
		return nil, err
	}
	return s, nil
}

// stop ends the profile and returns the CPU nanoseconds sampled in the
// load's goroutines and in the others.
func (s *cpuSplit) stop() (load, other int64, err error) {
	pprof.StopCPUProfile()
	return splitProfile(&s.buf)
}

// splitProfile sums a gzipped pprof CPU profile's cpu values (the second
// sample value, nanoseconds) by whether the sample has the load's label.
// It reads the few profile.proto fields it needs with protowire:
// Profile.sample (2), Profile.string_table (6), Sample.value (2, packed or
// not), Sample.label (3), Label.key (1) and Label.str (2), string indexes.
func splitProfile(r io.Reader) (load, other int64, err error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return 0, 0, fmt.Errorf("cpu profile: %w", err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return 0, 0, fmt.Errorf("cpu profile: %w", err)
	}
	type sample struct {
		cpu    int64
		labels [][2]int64 // key, str
	}
	var samples []sample
	var strs []string
	err = eachField(data, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 2 && typ == protowire.BytesType:
			var s sample
			var values []int64
			err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				switch {
				case num == 2 && typ == protowire.VarintType:
					values = append(values, int64(x))
				case num == 2 && typ == protowire.BytesType:
					for len(v) > 0 {
						x, n := protowire.ConsumeVarint(v)
						if n < 0 {
							return protowire.ParseError(n)
						}
						values, v = append(values, int64(x)), v[n:]
					}
				case num == 3 && typ == protowire.BytesType:
					var l [2]int64
					err := eachField(v, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
						if typ == protowire.VarintType && (num == 1 || num == 2) {
							l[num-1] = int64(x)
						}
						return nil
					})
					if err != nil {
						return err
					}
					s.labels = append(s.labels, l)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if len(values) < 2 {
				return errors.New("sample without a cpu value")
			}
			s.cpu = values[1]
			samples = append(samples, s)
		case num == 6 && typ == protowire.BytesType:
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("cpu profile: %w", err)
	}
	str := func(i int64) string {
		if i < 0 || i >= int64(len(strs)) {
			return ""
		}
		return strs[i]
	}
	for _, s := range samples {
		isLoad := false
		for _, l := range s.labels {
			if str(l[0]) == loadLabelKey && str(l[1]) == loadLabelValue {
				isLoad = true
			}
		}
		if isLoad {
			load += s.cpu
		} else {
			other += s.cpu
		}
	}
	return load, other, nil
}

// eachField calls f with each field of a protobuf message: its number,
// type, bytes (BytesType) or value (VarintType); other types are skipped.
func eachField(b []byte, f func(protowire.Number, protowire.Type, []byte, uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.BytesType || typ == protowire.VarintType {
			if err := f(num, typ, v, x); err != nil {
				return err
			}
		}
	}
	return nil
}
