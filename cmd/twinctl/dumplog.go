package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/twinlog/twinlog/cmd/twinctl/internal/cli"
	"github.com/twinlog/twinlog/storage"
	"github.com/twinlog/twinlog/storage/epoch"
)

// segmentDumper is cli.LogDumper over the files of a partition directory.
// It only ever opens files read-only (os.Open): storage.Open would run
// recovery, which may truncate a torn tail, and dump-log must show the
// directory exactly as it is.
type segmentDumper struct{}

// Batch framing (SPEC §2.2): baseOffset int64, batchLength int32
// (batchPrefix, codec.go), then batchLength bytes. The CRC (Castagnoli) at
// byte 17 covers everything from the attributes (byte 21) to the end.
const (
	crcField = 17
	crcStart = 21
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segmentFiles returns the "<20-digit base offset>.log" files of dir in
// base-offset order (SPEC §2.1).
func segmentFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		stem, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || len(stem) != 20 || e.IsDir() {
			continue
		}
		if _, err := strconv.ParseUint(stem, 10, 63); err != nil {
			continue
		}
		names = append(names, e.Name())
	}
	slices.Sort(names) // fixed width: lexical order is offset order
	return names, nil
}

func (segmentDumper) Batches(ctx context.Context, dir string, visit func(cli.DumpedBatch) error) error {
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("%w: pass a partition directory such as run/cluster-a/broker-1/demo-0", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory: pass a partition directory such as run/cluster-a/broker-1/demo-0", dir)
	}
	names, err := segmentFiles(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := dumpSegment(ctx, filepath.Join(dir, name), name, visit); err != nil {
			return err
		}
	}
	return nil
}

func dumpSegment(ctx context.Context, path, name string, visit func(cli.DumpedBatch) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	var pos int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var prefix [batchPrefix]byte
		n, err := io.ReadFull(r, prefix[:])
		if err == io.EOF {
			return nil
		}
		bad := func(why string) error {
			return visit(cli.DumpedBatch{Segment: name, Position: pos, Err: why})
		}
		if err != nil {
			return bad(fmt.Sprintf("torn tail: %d bytes cannot hold a batch header", n))
		}
		length := int64(int32(binary.BigEndian.Uint32(prefix[8:])))
		if length < storage.BatchHeaderSize-batchPrefix {
			return bad(fmt.Sprintf("batchLength %d is below the %d-byte header", length, storage.BatchHeaderSize))
		}
		buf := make([]byte, batchPrefix+length)
		copy(buf, prefix[:])
		if n, err := io.ReadFull(r, buf[batchPrefix:]); err != nil {
			return bad(fmt.Sprintf("torn tail: batchLength %d but only %d bytes follow", length, n))
		}
		if err := visit(describeBatch(name, pos, buf)); err != nil {
			return err
		}
		pos += int64(len(buf))
	}
}

// describeBatch reports the header of buf (one whole batch by its length
// field) and validates it with storage.DecodeBatch.
func describeBatch(name string, pos int64, buf []byte) cli.DumpedBatch {
	v := storage.BatchView(buf)
	d := cli.DumpedBatch{
		Segment:      name,
		Position:     pos,
		BaseOffset:   int64(v.BaseOffset()),
		LastOffset:   int64(v.LastOffset()),
		LeaderEpoch:  int32(v.LeaderEpoch()),
		Count:        v.RecordCount(),
		Size:         int64(len(buf)),
		MaxTimestamp: v.MaxTimestamp(),
		ProducerID:   v.ProducerID(), ProducerEpoch: v.ProducerEpoch(), BaseSequence: v.BaseSequence(),
		Compression: v.Codec().String(),
		CRCValid:    crc32.Checksum(buf[crcStart:], castagnoli) == binary.BigEndian.Uint32(buf[crcField:]),
	}
	b, _, err := storage.DecodeBatch(buf)
	if err == nil {
		var recs []storage.Record
		recs, err = b.Records()
		for _, r := range recs {
			d.Records = append(d.Records, cli.Record{Offset: int64(r.Offset), Timestamp: r.Timestamp, Key: r.Key, Value: r.Value})
		}
	}
	if err != nil {
		d.Err, d.Records = err.Error(), nil
	}
	return d
}

func (segmentDumper) EpochCheckpoint(dir string) ([]cli.EpochEntry, bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, epoch.CheckpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	entries, err := epoch.ParseCheckpoint(data)
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", filepath.Join(dir, epoch.CheckpointFile), err)
	}
	out := make([]cli.EpochEntry, len(entries))
	for i, e := range entries {
		out[i] = cli.EpochEntry{Epoch: int32(e.Epoch), StartOffset: int64(e.StartOffset)}
	}
	return out, true, nil
}
