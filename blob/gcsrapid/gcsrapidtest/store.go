package gcsrapidtest

import (
	"crypto/rand"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var crc32cTable = crc32.MakeTable(crc32.Castagnoli)

const bucketPrefix = "projects/_/buckets/"

// attrs is the client-settable metadata of an object.
type attrs struct {
	contentType, contentEncoding, contentDisposition, contentLanguage, cacheControl string
	storageClass                                                                    string
	metadata                                                                        map[string]string
	customTime                                                                      time.Time
	temporaryHold, eventBasedHold                                                   bool
}

// object is one generation of an object. data only grows (appends write past
// len), so a reader may keep data[:n] taken under the lock and read it
// without the lock while a writer appends.
type object struct {
	bucket, name   string
	generation     int64
	metageneration int64
	attrs          attrs
	data           content
	crc            uint32
	md5            []byte // set only for objects written in one piece
	appendable     bool
	finalized      bool
	created        time.Time
	updated        time.Time
	finalizedAt    time.Time
	// writeHandle identifies the one writer allowed to append; a takeover
	// replaces it so that the previous writer's next message fails.
	writeHandle []byte
	// flushed records the size and checksum at each flush of an unfinalized
	// appendable object after its first, for stale metadata (Profile.StaleSize).
	flushed []sizeAt
	// known is the size and checksum every metadata read reports at least:
	// what the object held at its first flush.
	known sizeAt
	// firstFlush is set once the object has been flushed.
	firstFlush bool
}

// sizeAt is an appendable object's size and checksum as of a flush.
type sizeAt struct {
	at   time.Time
	size int64
	crc  uint32
}

// recordFlushLocked notes a flush of an appendable object: the first sets what
// metadata reads report at least; later ones become visible to metadata reads
// only StaleSize after they happen.
func (o *object) recordFlushLocked(now time.Time) {
	cur := sizeAt{at: now, size: o.data.size(), crc: o.crc}
	if !o.firstFlush {
		o.firstFlush, o.known = true, cur
		return
	}
	o.flushed = append(o.flushed, cur)
}

// metaProto is toProto as a metadata read sees it: for an unfinalized
// appendable object, the size and checksum as of its last flush at least lag
// ago (or its first flush), as the real service may report out of date sizes
// for objects still being appended to. lag 0 reports the truth.
func (o *object) metaProto(now time.Time, lag time.Duration) msg {
	m := o.toProto()
	if lag <= 0 || !o.appendable || o.finalized || !o.firstFlush {
		return m
	}
	view := o.known
	// Flushes older than lag can be folded into what is known.
	i := 0
	for i < len(o.flushed) && now.Sub(o.flushed[i].at) >= lag {
		view = o.flushed[i]
		i++
	}
	if i > 0 {
		o.known = view
		o.flushed = o.flushed[i:]
	}
	if view.size != o.data.size() {
		m.set("size", view.size)
		m.mutable("checksums").set("crc32c", view.crc)
	}
	return m
}

type bucket struct {
	name    string
	zonal   bool
	created time.Time
	objects map[string]*object
	// names are the keys of objects, sorted, so that a listing finds its
	// prefix by binary search rather than scanning the bucket: a process
	// holding thousands of logs lists often in a bucket of many objects.
	names []string
}

// putLocked makes o the object named name.
func (b *bucket) putLocked(name string, o *object) {
	if _, ok := b.objects[name]; !ok {
		i, _ := slices.BinarySearch(b.names, name)
		b.names = slices.Insert(b.names, i, name)
	}
	b.objects[name] = o
}

// deleteLocked removes the object named name.
func (b *bucket) deleteLocked(name string) {
	if _, ok := b.objects[name]; !ok {
		return
	}
	delete(b.objects, name)
	if i, found := slices.BinarySearch(b.names, name); found {
		b.names = slices.Delete(b.names, i, i+1)
	}
}

// namesFrom returns the sorted names at or after from.
func (b *bucket) namesFrom(from string) []string {
	i, _ := slices.BinarySearch(b.names, from)
	return b.names[i:]
}

// upload is a resumable upload session (StartResumableWrite).
type upload struct {
	id     string
	bucket string
	spec   msg // WriteObjectSpec
	data   []byte
	done   *object
	// checksums are the whole-object checksums given at the start, if any.
	checksums msg
}

// store holds every bucket. One mutex: the emulator is for tests and
// benchmarks of clients, not of itself, and a single lock keeps each RPC's
// check-then-act atomic like the real service's per-object transactions.
type store struct {
	mu       sync.Mutex
	buckets  map[string]*bucket
	uploads  map[string]*upload
	used     int64
	maxBytes int64
	lastGen  int64
}

func newStore(maxBytes int64) *store {
	return &store{buckets: map[string]*bucket{}, uploads: map[string]*upload{}, maxBytes: maxBytes}
}

// nextGen returns a generation number like the real service's (microseconds
// since the epoch), strictly increasing so that every write is distinct.
func (s *store) nextGen() int64 {
	g := time.Now().UnixMicro()
	if g <= s.lastGen {
		g = s.lastGen + 1
	}
	s.lastGen = g
	return g
}

// reserve accounts n more bytes against the memory cap.
func (s *store) reserve(n int64) error {
	if n > 0 && s.used+n > s.maxBytes {
		return status.Errorf(codes.ResourceExhausted, "gcsrapidtest: memory cap of %d bytes reached (%d in use, %d more requested); raise Options.MaxBytes", s.maxBytes, s.used, n)
	}
	s.used += n
	return nil
}

func (s *store) release(n int64) { s.used -= n }

// bucketName strips the "projects/_/buckets/" prefix that every request carries.
func bucketName(resource string) (string, error) {
	name, ok := strings.CutPrefix(resource, bucketPrefix)
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", status.Errorf(codes.InvalidArgument, "bucket %q is not of the form projects/_/buckets/NAME", resource)
	}
	return name, nil
}

// bucketLocked returns the bucket named by a request's resource name.
func (s *store) bucketLocked(resource string) (*bucket, error) {
	name, err := bucketName(resource)
	if err != nil {
		return nil, err
	}
	b, ok := s.buckets[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "bucket %q not found", name)
	}
	return b, nil
}

func checkObjectName(name string) error {
	if name == "" {
		return status.Error(codes.InvalidArgument, "object name is required")
	}
	if len(name) > 1024 {
		return status.Errorf(codes.InvalidArgument, "object name is %d bytes, longer than 1024", len(name))
	}
	return nil
}

// lookupLocked returns the live object, or the given generation of it when
// gen is not zero, or a NotFound status.
func (s *store) lookupLocked(bucketRes, name string, gen int64) (*bucket, *object, error) {
	b, err := s.bucketLocked(bucketRes)
	if err != nil {
		return nil, nil, err
	}
	if err := checkObjectName(name); err != nil {
		return b, nil, err
	}
	o, ok := b.objects[name]
	if !ok || (gen != 0 && o.generation != gen) {
		return b, nil, status.Errorf(codes.NotFound, "object %q (generation %d) not found in bucket %q", name, gen, b.name)
	}
	return b, o, nil
}

// conds are the generation and metageneration preconditions of a request.
// The real service answers a failed precondition with FAILED_PRECONDITION
// (HTTP 412), including if_generation_match=0 on an existing object; the
// client maps neither to AlreadyExists.
type conds struct {
	genMatch, genNotMatch, metaMatch, metaNotMatch *int64
}

func condsFrom(m msg) conds {
	var c conds
	opt := func(name string) *int64 {
		if !m.has(name) {
			return nil
		}
		v := m.i64(name)
		return &v
	}
	c.genMatch = opt("if_generation_match")
	c.genNotMatch = opt("if_generation_not_match")
	c.metaMatch = opt("if_metageneration_match")
	c.metaNotMatch = opt("if_metageneration_not_match")
	return c
}

// check applies the preconditions to o, which is nil when the object does
// not exist.
func (c conds) check(o *object) error {
	var gen, meta int64
	if o != nil {
		gen, meta = o.generation, o.metageneration
	}
	fail := func(what string) error {
		return status.Errorf(codes.FailedPrecondition, "precondition failed: %s (generation %d, metageneration %d)", what, gen, meta)
	}
	if c.genMatch != nil && *c.genMatch != gen {
		return fail("if_generation_match")
	}
	if c.genNotMatch != nil && *c.genNotMatch == gen {
		return fail("if_generation_not_match")
	}
	if c.metaMatch != nil && (o == nil || *c.metaMatch != meta) {
		return fail("if_metageneration_match")
	}
	if c.metaNotMatch != nil && o != nil && *c.metaNotMatch == meta {
		return fail("if_metageneration_not_match")
	}
	return nil
}

// attrsFrom reads the settable fields of an Object message.
func attrsFrom(o msg) attrs {
	return attrs{
		contentType:        o.str("content_type"),
		contentEncoding:    o.str("content_encoding"),
		contentDisposition: o.str("content_disposition"),
		contentLanguage:    o.str("content_language"),
		cacheControl:       o.str("cache_control"),
		storageClass:       o.str("storage_class"),
		metadata:           o.strMap("metadata"),
		customTime:         o.time("custom_time"),
		temporaryHold:      o.boolean("temporary_hold"),
		eventBasedHold:     o.boolean("event_based_hold"),
	}
}

// toProto renders o as a google.storage.v2.Object; the caller holds the
// store lock so that size, checksum and data agree.
func (o *object) toProto() msg {
	m := newMsg("Object")
	m.set("name", o.name)
	m.set("bucket", bucketPrefix+o.bucket)
	m.set("generation", o.generation)
	m.set("metageneration", o.metageneration)
	m.set("size", o.data.size())
	m.set("etag", etag(o))
	sc := o.attrs.storageClass
	if sc == "" {
		sc = "STANDARD"
	}
	m.set("storage_class", sc)
	m.set("content_type", o.attrs.contentType)
	m.set("content_encoding", o.attrs.contentEncoding)
	m.set("content_disposition", o.attrs.contentDisposition)
	m.set("content_language", o.attrs.contentLanguage)
	m.set("cache_control", o.attrs.cacheControl)
	if len(o.attrs.metadata) > 0 {
		m.set("metadata", o.attrs.metadata)
	}
	if !o.attrs.customTime.IsZero() {
		m.set("custom_time", o.attrs.customTime)
	}
	m.set("temporary_hold", o.attrs.temporaryHold)
	if o.attrs.eventBasedHold {
		m.set("event_based_hold", true)
	}
	m.set("create_time", o.created)
	m.set("update_time", o.updated)
	if o.finalized {
		m.set("finalize_time", o.finalizedAt)
	}
	cs := m.mutable("checksums")
	cs.set("crc32c", o.crc)
	if o.md5 != nil {
		cs.set("md5_hash", o.md5)
	}
	return m
}

func etag(o *object) string {
	return strconv.FormatInt(o.generation, 36) + "." + strconv.FormatInt(o.metageneration, 36)
}

func newHandle() []byte {
	h := make([]byte, 16)
	_, _ = rand.Read(h)
	return h
}

// newObject builds an empty object of a new generation from a WriteObjectSpec.
func (s *store) newObjectLocked(b *bucket, spec msg, appendable bool) *object {
	res := spec.sub("resource")
	now := time.Now().UTC()
	return &object{
		bucket:         b.name,
		name:           res.str("name"),
		generation:     s.nextGen(),
		metageneration: 1,
		attrs:          attrsFrom(res),
		appendable:     appendable,
		created:        now,
		updated:        now,
	}
}

// commitLocked makes o the live generation of its name, releasing the
// memory of the generation it replaces (there is no object versioning).
func (s *store) commitLocked(b *bucket, o *object) {
	if old, ok := b.objects[o.name]; ok && old != o {
		s.release(old.data.size())
	}
	b.putLocked(o.name, o)
}

func finalizeLocked(o *object, wholeMD5 bool) {
	now := time.Now().UTC()
	o.finalized = true
	o.finalizedAt = now
	o.updated = now
	if wholeMD5 {
		sum := o.data.md5()
		o.md5 = sum[:]
	}
}
