package main

import (
	"encoding/binary"

	"github.com/twinlog/twinlog/cmd/twinctl/internal/cli"
	"github.com/twinlog/twinlog/storage"
)

// storageCodec adapts the storage batch codec (SPEC §2.2) to cli.BatchCodec,
// so twinctl carries no codec of its own.
var storageCodec = cli.CodecFuncs{EncodeFunc: encodeBatch, DecodeFunc: decodeBatches}

func encodeBatch(records []cli.Record, p cli.Producer) ([]byte, error) {
	recs := make([]storage.Record, len(records))
	for i, r := range records {
		recs[i] = storage.Record{Timestamp: r.Timestamp, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			recs[i].Headers = append(recs[i].Headers, storage.Header{Key: h.Key, Value: h.Value})
		}
	}
	// Base offset 0, dense deltas; the leader re-stamps offset and epoch
	// (SPEC §4.1).
	var opt storage.BatchOptions
	if p.ID != cli.NoProducer.ID {
		opt.Producer = &storage.Producer{ID: p.ID, Epoch: p.Epoch, BaseSequence: p.BaseSequence}
	}
	return storage.EncodeBatch(recs, opt)
}

// batchPrefix is baseOffset int64 + batchLength int32 (SPEC §2.2).
const batchPrefix = 12

// decodeBatches parses a Fetch response's records. A trailing batch cut by
// maxBytes is dropped (the next fetch starts at it); any other damage is an
// error.
func decodeBatches(buf []byte) ([]cli.Batch, error) {
	var out []cli.Batch
	for len(buf) > 0 {
		if len(buf) < batchPrefix || batchPrefix+int64(int32(binary.BigEndian.Uint32(buf[8:12]))) > int64(len(buf)) {
			break // partial trailing batch
		}
		b, rest, err := storage.DecodeBatch(buf)
		if err != nil {
			return out, err
		}
		recs, err := b.Records()
		if err != nil {
			return out, err
		}
		cb := cli.Batch{BaseOffset: int64(b.BaseOffset()), LastOffset: int64(b.LastOffset()), LeaderEpoch: int32(b.LeaderEpoch())}
		for _, r := range recs {
			rec := cli.Record{Offset: int64(r.Offset), Timestamp: r.Timestamp, Key: r.Key, Value: r.Value}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, cli.RecordHeader{Key: h.Key, Value: h.Value})
			}
			cb.Records = append(cb.Records, rec)
		}
		out = append(out, cb)
		buf = rest
	}
	return out, nil
}
