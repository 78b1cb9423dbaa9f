package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// compression is --compression: how the producers' batches are compressed.
// twinbench builds its batches itself (the stamper) and sends them as
// Produce requests of its own on both APIs, so kgo.ProducerBatchCompression,
// which applies to kgo.Client.Produce's batches, would change nothing; the
// stamper compresses each request's records with the compressor that
// option installs (kgo.DefaultCompressor) and keeps them uncompressed when
// that is not shorter, as kgo's producer does. The zero value is none.
type compression string

// compressionCodecs are --compression's choices, franz-go's codecs.
var compressionCodecs = map[compression]func() kgo.CompressionCodec{
	"none": kgo.NoCompression, "gzip": kgo.GzipCompression, "snappy": kgo.SnappyCompression,
	"lz4": kgo.Lz4Compression, "zstd": kgo.ZstdCompression,
}

func (c compression) String() string {
	if c == "" {
		return "none"
	}
	return string(c)
}

// Set accepts the name of one of compressionCodecs.
func (c *compression) Set(s string) error {
	if _, ok := compressionCodecs[compression(s)]; !ok {
		return fmt.Errorf("unknown compression %q (want one of %s)", s, choices(compressionCodecs))
	}
	*c = compression(s)
	return nil
}

// compressor is franz-go's compressor of the codec, nil for none.
func (c compression) compressor() kgo.Compressor {
	codec, ok := compressionCodecs[compression(c.String())]
	if !ok {
		panic(fmt.Sprintf("twinbench: compression %q was not checked by Set", string(c)))
	}
	comp, err := kgo.DefaultCompressor(codec())
	if err != nil {
		panic(err) // only for a codec franz-go does not define
	}
	return comp
}

// payload is --payload: what fills each record's value after its first 8
// bytes (the send time). zeros, the zero value, is what twinbench always
// sent: it compresses about as far as a codec goes, a best case no real
// data has. random is incompressible, a worst case: franz-go then sends
// the batch uncompressed. text is JSON log lines with random ids, times
// and numbers, each record different, which compresses about as logs do.
type payload string

var payloadKinds = map[payload]bool{"zeros": true, "random": true, "text": true}

func (p payload) String() string {
	if p == "" {
		return "zeros"
	}
	return string(p)
}

// Set accepts one of payloadKinds.
func (p *payload) Set(s string) error {
	if !payloadKinds[payload(s)] {
		return fmt.Errorf("unknown payload %q (want one of %s)", s, choices(payloadKinds))
	}
	*p = payload(s)
	return nil
}

// values are n values of size bytes, the same for the same seed.
func (p payload) values(n, size int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 0x7477696e62656e63)) // "twinbenc"
	out := make([][]byte, n)
	for i := range out {
		v := make([]byte, size)
		switch p.String() {
		case "random":
			for j := range v {
				v[j] = byte(rng.Uint32())
			}
		case "text":
			var line []byte
			for len(line) < size {
				line = appendLogLine(line, rng)
			}
			copy(v, line)
		}
		out[i] = v
	}
	return out
}

var (
	logLevels   = []string{"debug", "info", "info", "info", "warn", "error"}
	logServices = []string{"checkout", "payments", "inventory", "search", "auth", "shipping", "catalog"}
	logMethods  = []string{"GET", "GET", "GET", "POST", "PUT", "DELETE"}
	logPaths    = []string{"/api/v2/orders/", "/api/v2/users/", "/api/v1/cart/", "/api/v2/items/", "/healthz?id="}
	logMessages = []string{"request completed", "cache miss, loading from database", "retrying upstream call",
		"slow query", "user session refreshed", "payment authorized", "rate limit exceeded"}
)

// appendLogLine appends one JSON log line like a service's structured
// log: fixed keys and a few vocabularies, random ids, times and numbers.
func appendLogLine(b []byte, rng *rand.Rand) []byte {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	hex := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteByte("0123456789abcdef"[rng.IntN(16)])
		}
		return sb.String()
	}
	b = fmt.Appendf(b, `{"ts":"2026-12-04T%02d:%02d:%02d.%06dZ","level":%q,"service":%q,"host":"ip-10-0-%d-%d",`,
		rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e6), pick(logLevels), pick(logServices), rng.IntN(8), rng.IntN(256))
	b = fmt.Appendf(b, `"trace_id":%q,"user_id":%d,"method":%q,"path":"%s%d","status":%d,`,
		hex(32), rng.IntN(1e6), pick(logMethods), pick(logPaths), rng.IntN(1e7), []int{200, 200, 200, 201, 204, 404, 500}[rng.IntN(7)])
	b = fmt.Appendf(b, `"latency_ms":%s,"bytes":%d,"msg":%q}`+"\n",
		strconv.FormatFloat(rng.Float64()*250, 'f', 2, 64), rng.IntN(1e5), pick(logMessages))
	return b
}

// choices lists a flag's choices, sorted, for its help and errors.
func choices[K ~string, V any](m map[K]V) string {
	var names []string
	for k := range m {
		names = append(names, string(k))
	}
	slices.Sort(names)
	return strings.Join(names, "|")
}
