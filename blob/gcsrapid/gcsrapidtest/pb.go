package gcsrapidtest

import (
	"fmt"
	"strings"
	"time"

	// The storage module keeps its generated stubs internal, but importing it
	// registers google/storage/v2/storage.proto and its message types, which
	// is all the server needs to speak the wire protocol.
	_ "cloud.google.com/go/storage"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const (
	storageService = "google.storage.v2.Storage"
	storageProto   = "google/storage/v2/storage.proto"
	pkgPrefix      = "google.storage.v2."
)

// msg is a google.storage.v2 message handled by field name through proto
// reflection. The zero msg (m == nil) reads as an empty message, like the
// generated getters do on a nil pointer.
type msg struct{ m protoreflect.Message }

// newMsg returns an empty message of the google.storage.v2 type name, or
// of the fully qualified name when it has a dot.
// It panics on an unknown name: the names are constants in this package and
// a typo must fail the first test that reaches it.
func newMsg(name string) msg {
	full := protoreflect.FullName(name)
	if !strings.Contains(name, ".") {
		full = protoreflect.FullName(pkgPrefix + name)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(full)
	if err != nil {
		panic(fmt.Sprintf("gcsrapidtest: message %s is not registered: %v", name, err))
	}
	return msg{mt.New()}
}

func (x msg) valid() bool { return x.m != nil && x.m.IsValid() }

func (x msg) proto() proto.Message { return x.m.Interface() }

func (x msg) field(name string) protoreflect.FieldDescriptor {
	fd := x.m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic(fmt.Sprintf("gcsrapidtest: %s has no field %s", x.m.Descriptor().FullName(), name))
	}
	return fd
}

// get reads a field, or reports false when the message is unset or its type
// has no such field: the request types differ (WriteObjectRequest has no
// state_lookup), and a missing field reads as its zero value.
func (x msg) get(name string) (protoreflect.Value, bool) {
	if !x.valid() {
		return protoreflect.Value{}, false
	}
	fd := x.m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil || !x.m.Has(fd) {
		return protoreflect.Value{}, false
	}
	return x.m.Get(fd), true
}

func (x msg) has(name string) bool {
	_, ok := x.get(name)
	return ok
}

func (x msg) str(name string) string {
	v, ok := x.get(name)
	if !ok {
		return ""
	}
	return v.String()
}

func (x msg) i64(name string) int64 {
	v, ok := x.get(name)
	if !ok {
		return 0
	}
	return v.Int()
}

func (x msg) u32(name string) uint32 {
	v, ok := x.get(name)
	if !ok {
		return 0
	}
	return uint32(v.Uint())
}

func (x msg) boolean(name string) bool {
	v, ok := x.get(name)
	if !ok {
		return false
	}
	return v.Bool()
}

func (x msg) bytes(name string) []byte {
	v, ok := x.get(name)
	if !ok {
		return nil
	}
	return v.Bytes()
}

// sub returns the message-typed field, or the zero msg when it is unset.
func (x msg) sub(name string) msg {
	v, ok := x.get(name)
	if !ok {
		return msg{}
	}
	return msg{v.Message()}
}

func (x msg) list(name string) []msg {
	v, ok := x.get(name)
	if !ok {
		return nil
	}
	l := v.List()
	out := make([]msg, l.Len())
	for i := range out {
		out[i] = msg{l.Get(i).Message()}
	}
	return out
}

func (x msg) strings(name string) []string {
	v, ok := x.get(name)
	if !ok {
		return nil
	}
	l := v.List()
	out := make([]string, l.Len())
	for i := range out {
		out[i] = l.Get(i).String()
	}
	return out
}

func (x msg) strMap(name string) map[string]string {
	v, ok := x.get(name)
	if !ok {
		return nil
	}
	out := map[string]string{}
	v.Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		out[k.String()] = v.String()
		return true
	})
	return out
}

func (x msg) time(name string) time.Time {
	s := x.sub(name)
	if !s.valid() {
		return time.Time{}
	}
	return time.Unix(s.i64("seconds"), s.i64("nanos")).UTC()
}

func (x msg) set(name string, v any) msg {
	fd := x.field(name)
	switch v := v.(type) {
	case string:
		x.m.Set(fd, protoreflect.ValueOfString(v))
	case int64:
		x.m.Set(fd, protoreflect.ValueOfInt64(v))
	case int32:
		x.m.Set(fd, protoreflect.ValueOfInt32(v))
	case uint32:
		x.m.Set(fd, protoreflect.ValueOfUint32(v))
	case bool:
		x.m.Set(fd, protoreflect.ValueOfBool(v))
	case []byte:
		x.m.Set(fd, protoreflect.ValueOfBytes(v))
	case msg:
		x.m.Set(fd, protoreflect.ValueOfMessage(v.m))
	case time.Time:
		ts := timestamppb.New(v)
		x.m.Set(fd, protoreflect.ValueOfMessage(ts.ProtoReflect()))
	case map[string]string:
		mp := x.m.Mutable(fd).Map()
		for k, s := range v {
			mp.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString(s))
		}
	case []string:
		l := x.m.Mutable(fd).List()
		for _, s := range v {
			l.Append(protoreflect.ValueOfString(s))
		}
	default:
		panic(fmt.Sprintf("gcsrapidtest: cannot set %s to %T", name, v))
	}
	return x
}

// mutable returns the message-typed field, creating it when unset.
func (x msg) mutable(name string) msg {
	return msg{x.m.Mutable(x.field(name)).Message()}
}

func (x msg) appendMsg(name string, v msg) {
	x.m.Mutable(x.field(name)).List().Append(protoreflect.ValueOfMessage(v.m))
}
