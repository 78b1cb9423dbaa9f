package brokertest

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/twinlog/twinlog"
	pb "github.com/twinlog/twinlog/api/proto/twinlog/v1"
)

// FuzzHandlers is issue 13's handler-level fuzzer: every input is a short
// sequence of requests, each to a unary RPC of any twinlog service (found
// through the registered descriptors, so new RPCs are fuzzed without
// editing this file), with fields drawn from the dangerous values: 0, ±1,
// MaxInt32/64, MinInt32/64, the cluster's real broker ids, epochs and
// offsets, real and internal topic names, empty, long and duplicated
// strings and lists, undefined enum numbers. One in-process cluster serves
// the whole fuzzing run. After every request:
//
//   - no handler panicked (a recovered panic answers codes.Internal);
//   - every ErrorCode in the response is one of the enum's values;
//   - the controller and every broker still run;
//
// and after every input topic "keep" still takes acks=all writes and every
// record acknowledged before fuzzing is still readable, unchanged. The
// sequence never deletes "keep" or changes its configs, and never forges the cluster's own brokers' heartbeats or
// registrations (a broker's identity is public until issue 17's security
// lands; what such a request may do is tested in the controller package).
//
// go test runs the seeds; `make fuzz` fuzzes it for FUZZTIME.
func FuzzHandlers(f *testing.F) {
	c := NewCluster(f, Options{LogOutput: io.Discard})
	ctx := f.Context()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	resp, err := c.Admin().CreateTopics(cctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{
		{Name: "keep", NumPartitions: 2, ReplicationFactor: 3},
	}})
	if err != nil || resp.GetTopics()[0].GetError() != pb.ErrorCode_ERROR_CODE_NONE {
		f.Fatalf("CreateTopics keep: %v %v", resp, err)
	}
	var kept [2][]Record
	for p := range int32(2) {
		for i := range 5 {
			c.MustProduce(cctx, "keep", p, -1, fmt.Appendf(nil, "keep-%d-%d", p, i))
		}
		kept[p], _ = c.ConsumeAll(cctx, "keep", p)
		if len(kept[p]) != 5 {
			f.Fatalf("keep-%d holds %d records, want 5", p, len(kept[p]))
		}
	}
	cancel()
	methods := fuzzMethods(f)

	f.Add([]byte{0})
	// The forged BumpLeaderEpoch of issue 13: keep-0's leader, in its real
	// broker and leader epochs, asks for LE MaxInt32.
	leader, _, _, _, _ := c.PartitionInfo("keep", 0)
	f.Add(fuzzSeed(methods, "BumpLeaderEpoch", map[string][]byte{
		"broker_id":        {1, 1, byte(slices.Index(c.IDs(), leader))},
		"broker_epoch":     {1, 1, byte(slices.Index(c.IDs(), leader))},
		"topic":            {1, byte(slices.Index(fuzzStrings, "keep"))},
		"partition":        {1, 1, 0},
		"leader_epoch":     {1, 1, 0},
		"min_leader_epoch": {1, 0, byte(slices.Index(fuzzInts, math.MaxInt32))},
	}))
	for i := range methods {
		// One seed per RPC: every field set from the first values.
		f.Add([]byte{byte(i), 1, 1, 1, 1, 1, 1, 1, 1})
		f.Add([]byte{byte(i), 0xff, 7, 0xff, 7, 0xff, 7, 2, 2, 2, 2})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &fuzzGen{data: data, c: c}
		for range 4 {
			if g.done() {
				break
			}
			m := methods[int(g.byte())%len(methods)]
			req := dynamicpb.NewMessage(m.Input())
			g.fill(req, 0)
			if g.forbidden(m, req) {
				continue
			}
			target := c.ctlAddr
			if serverOf(m) == "broker" {
				target = c.Addr(c.IDs()[int(g.byte())%len(c.IDs())])
			}
			out := dynamicpb.NewMessage(m.Output())
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.conn(target).Invoke(rctx, fullMethod(m), req, out)
			cancel()
			if grpcstatus.Code(err) == codes.Internal {
				t.Fatalf("%s answered %v to %v", fullMethod(m), err, req)
			}
			if bad := undefinedErrorCodes(out); len(bad) > 0 {
				t.Fatalf("%s answered undefined error codes %v to %v: %v", fullMethod(m), bad, req, out)
			}
			if !c.running(ctx) {
				t.Fatalf("a daemon stopped after %s %v", fullMethod(m), req)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for p := range int32(2) {
			// Still writable: no request may wedge the partition.
			for {
				_, err := c.Produce(cctx, "keep", p, -1, []byte("after"))
				if err == nil {
					break
				}
				if cctx.Err() != nil {
					t.Fatalf("keep-%d unwritable after the input: %v", p, err)
				}
				c.waitChangeOr(cctx, 50*time.Millisecond)
			}
		}
		for p := range int32(2) {
			got, err := c.readAll(cctx, "keep", p)
			if err != nil {
				t.Fatalf("keep-%d unreadable after the input: %v", p, err)
			}
			if len(got) < len(kept[p]) || fmt.Sprint(got[:len(kept[p])]) != fmt.Sprint(kept[p]) {
				t.Fatalf("keep-%d after the input: %v, want the acked %v first", p, got, kept[p])
			}
		}
	})
}

// fuzzSeed encodes one request to the named method for fuzzGen: per field
// in descriptor order, the bytes given (the set byte, then the value's) or
// a 0 that leaves the field unset.
func fuzzSeed(methods []protoreflect.MethodDescriptor, name string, fields map[string][]byte) []byte {
	for i, m := range methods {
		if string(m.Name()) != name {
			continue
		}
		out := []byte{byte(i)}
		fds := m.Input().Fields()
		for j := range fds.Len() {
			if b, ok := fields[string(fds.Get(j).Name())]; ok {
				out = append(out, b...)
			} else {
				out = append(out, 0)
			}
		}
		return out
	}
	panic("no method " + name)
}

// fuzzMethods lists every unary RPC of the twinlog.v1 services.
func fuzzMethods(tb testing.TB) []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("twinlog.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				if !md.IsStreamingClient() && !md.IsStreamingServer() {
					out = append(out, md)
				}
			}
		}
		return true
	})
	slices.SortFunc(out, func(a, b protoreflect.MethodDescriptor) int { return strings.Compare(fullMethod(a), fullMethod(b)) })
	if len(out) < 20 {
		tb.Fatalf("found %d twinlog RPCs: is the api package linked?", len(out))
	}
	return out
}

func fullMethod(m protoreflect.MethodDescriptor) string {
	return "/" + string(m.Parent().FullName()) + "/" + string(m.Name())
}

// serverOf says which daemon serves m's service.
func serverOf(m protoreflect.MethodDescriptor) string {
	switch m.Parent().Name() {
	case "ControllerService", "AdminService", "MirrorService":
		return "controller"
	}
	return "broker"
}

// running reports whether the controller answers and every broker still
// runs.
func (c *Cluster) running(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.Admin().ListBrokers(ctx, &pb.ListBrokersRequest{}); err != nil {
		return false
	}
	for _, id := range c.IDs() {
		if !c.Running(id) {
			return false
		}
	}
	return true
}

// undefinedErrorCodes walks a response for ErrorCode values the enum does
// not define.
func undefinedErrorCodes(m protoreflect.Message) []int32 {
	var bad []int32
	ed := pb.ErrorCode(0).Descriptor()
	var walk func(protoreflect.Message)
	walk = func(m protoreflect.Message) {
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			check := func(v protoreflect.Value) {
				switch {
				case fd.Kind() == protoreflect.EnumKind && fd.Enum().FullName() == ed.FullName():
					if ed.Values().ByNumber(v.Enum()) == nil {
						bad = append(bad, int32(v.Enum()))
					}
				case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
					walk(v.Message())
				}
			}
			switch {
			case fd.IsList():
				for i := range v.List().Len() {
					check(v.List().Get(i))
				}
			case fd.IsMap():
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					if fd.MapValue().Kind() == protoreflect.MessageKind {
						walk(mv.Message())
					}
					return true
				})
			default:
				check(v)
			}
			return true
		})
	}
	walk(m)
	return bad
}

// fuzzGen draws field values from the input bytes; past the end it draws
// zeros.
type fuzzGen struct {
	data []byte
	pos  int
	c    *Cluster
}

func (g *fuzzGen) done() bool { return g.pos >= len(g.data) }

func (g *fuzzGen) byte() byte {
	if g.pos >= len(g.data) {
		return 0
	}
	b := g.data[g.pos]
	g.pos++
	return b
}

func (g *fuzzGen) pick(n int) int { return int(g.byte()) % n }

// ints are the integers every field draws from; real ids, epochs and
// offsets of the running cluster are added by int64s.
var fuzzInts = []int64{0, 1, -1, 2, 3, 5, 100, 1 << 20, math.MaxInt32, math.MaxInt32 - 1, math.MinInt32,
	math.MaxInt64, math.MinInt64, math.MaxUint32, 1 << 40}

// int64s is the pool an integer field draws from: most of the time the
// cluster's real values for what the field's name says it holds (broker
// ids, broker and leader epochs, partition indexes, offsets), which is what
// makes a forged request dangerous; else the generic extremes.
func (g *fuzzGen) int64s(fd protoreflect.FieldDescriptor) []int64 {
	name := string(fd.Name())
	var real []int64
	switch {
	case strings.Contains(name, "broker_epoch"):
		for _, id := range g.c.IDs() {
			if b := g.c.Broker(id); b != nil {
				real = append(real, int64(b.BrokerEpoch()))
			}
		}
	case strings.Contains(name, "epoch"):
		for p := range int32(2) {
			if _, le, _, _, ok := g.c.PartitionInfo("keep", p); ok {
				real = append(real, int64(le), int64(le)+1)
			}
		}
	case strings.Contains(name, "broker") || strings.Contains(name, "leader") || strings.Contains(name, "replica") ||
		strings.Contains(name, "isr") || name == "id":
		for _, id := range g.c.IDs() {
			real = append(real, int64(id))
		}
	case strings.Contains(name, "partition") || name == "index":
		real = []int64{0, 1}
	case strings.Contains(name, "offset"):
		real = []int64{0, 5, 6, 100}
	}
	if len(real) > 0 && g.byte()%4 != 0 {
		return real
	}
	return fuzzInts
}

var fuzzStrings = []string{"", "keep", "t", "__mirror_state", "__consumer_offsets", "x", "keep.", "..", "a/b",
	"min.insync.replicas", "unclean.leader.election.enable", "true", "-1", "2147483648", "bufnet://a-1:9092",
	"a-1:9092", "a-controller:9090", "\x00", strings.Repeat("k", 300), strings.Repeat("long", 64<<10)}

func (g *fuzzGen) scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(g.byte()&1 == 1)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		if i := g.pick(vals.Len() + 2); i < vals.Len() {
			return protoreflect.ValueOfEnum(vals.Get(i).Number())
		} else if i == vals.Len() {
			return protoreflect.ValueOfEnum(-1)
		}
		return protoreflect.ValueOfEnum(999)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		vals := g.int64s(fd)
		return protoreflect.ValueOfInt32(int32(vals[g.pick(len(vals))]))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		vals := g.int64s(fd)
		return protoreflect.ValueOfUint32(uint32(vals[g.pick(len(vals))]))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		vals := g.int64s(fd)
		return protoreflect.ValueOfInt64(vals[g.pick(len(vals))])
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		vals := g.int64s(fd)
		return protoreflect.ValueOfUint64(uint64(vals[g.pick(len(vals))]))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(g.pick(3)) - 1)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(g.pick(3)) - 1)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fuzzStrings[g.pick(len(fuzzStrings))])
	case protoreflect.BytesKind:
		switch g.pick(4) {
		case 0:
			return protoreflect.ValueOfBytes(nil)
		case 1:
			return protoreflect.ValueOfBytes(g.data[g.pos:])
		case 2:
			return protoreflect.ValueOfBytes(make([]byte, 1<<20))
		}
		return protoreflect.ValueOfBytes(make([]byte, g.pick(64)))
	}
	return fd.Default()
}

// fill sets some of m's fields: lists of 0–3 entries, sometimes one value
// repeated, nested messages to depth 3.
func (g *fuzzGen) fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if g.byte()%3 == 0 {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range g.pick(3) {
				k := g.scalar(fd.MapKey())
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					if depth < 3 {
						v := mp.NewValue()
						g.fill(v.Message(), depth+1)
						mp.Set(k.MapKey(), v)
					}
					continue
				}
				mp.Set(k.MapKey(), g.scalar(fd.MapValue()))
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			n, dup := g.pick(4), g.byte()&1 == 1
			var first protoreflect.Value
			for j := range n {
				var v protoreflect.Value
				switch {
				case j > 0 && dup:
					v = first
				case fd.Kind() == protoreflect.MessageKind:
					if depth >= 3 {
						continue
					}
					v = l.NewElement()
					g.fill(v.Message(), depth+1)
				default:
					v = g.scalar(fd)
				}
				if j == 0 {
					first = v
				}
				l.Append(v)
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth < 3 {
				g.fill(m.Mutable(fd).Message(), depth+1)
			}
		default:
			m.Set(fd, g.scalar(fd))
		}
	}
}

// forbidden: requests the sequence must not send (see FuzzHandlers): a
// deletion of "keep", and registrations or heartbeats in the name of one of
// the cluster's brokers.
func (g *fuzzGen) forbidden(m protoreflect.MethodDescriptor, req protoreflect.Message) bool {
	switch m.Name() {
	case "DeleteTopics", "AlterConfigs", "IncrementalAlterConfigs":
		// Deleting "keep", or legitimately making it unwritable (say
		// min.insync.replicas 4), is the operator's right.
		return strings.Contains(fmt.Sprint(req), `"keep"`)
	case "RegisterBroker", "BrokerHeartbeat", "UnregisterBroker":
		fd := req.Descriptor().Fields().ByName("broker_id")
		return fd == nil || slices.Contains(g.c.IDs(), twinlog.BrokerID(req.Get(fd).Int()))
	}
	return false
}

// readAll is ConsumeAll without c.T (a fuzz target may not call the F's
// helpers): it retries until ctx ends.
func (c *Cluster) readAll(ctx context.Context, topic string, p int32) ([]Record, error) {
	for {
		recs, _, err := c.consumeOnce(ctx, topic, p)
		if err == nil {
			return recs, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		c.waitChangeOr(ctx, 50*time.Millisecond)
	}
}
