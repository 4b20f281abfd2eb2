package quorum

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// Each replica holds, under the key itself, one object that is both the
// value and the acceptor state of the key (see the package doc): reserved
// metadata carries the version of the value (VersionKey), the ballot at which
// the replica accepted it (BallotKey), the highest ballot it promised
// (PromiseKey) and what the object is (StateKey: absent for a value,
// "deleted" for a tombstone, "empty" for a promise made before any value was
// accepted). Every change of a replica's object is a write or delete on
// condition of the replica generation read just before, so the replica moves
// only forward.
const (
	// BallotKey is the reserved metadata key of the ballot at which a
	// replica accepted its version.
	BallotKey = "zonalblob-quorum-ballot"
	// PromiseKey is the reserved metadata key of the highest ballot a
	// replica promised for the key.
	PromiseKey = "zonalblob-quorum-promise"
	// StateKey is the reserved metadata key marking tombstones ("deleted")
	// and placeholders ("empty").
	StateKey = "zonalblob-quorum-state"
	// ChainKey lists the versions that took effect up to this one, newest
	// first (at most chainLen): an operation whose accepts failed on some
	// replicas learns from it whether it took effect before it tries again.
	ChainKey = "zonalblob-quorum-chain"
	// ChecksumKey holds a value's CRC32C (8 hex digits). Every read of a
	// whole value verifies it, and no promise, replay or repair copies bytes
	// that do not verify.
	ChecksumKey = "zonalblob-quorum-crc32c"
	// SizeKey holds a value's length in bytes. A replica object of another
	// size is a write of the version still under way (a store that shows a
	// streamed object's prefix before its writer closes), not the version:
	// it is read as the replica not answering.
	SizeKey = "zonalblob-quorum-size"
)

// errIncomplete: a replica object is shorter or longer than the value it
// names; its write has not finished.
var errIncomplete = errors.New("replica object is not the whole value its state names")

// maxTokenAhead is how far past this process's clock a token may lie and
// still parse: a ballot or version further ahead is damage, not a writer's
// clock, and trusting it would put it above every ballot ever issued.
const maxTokenAhead = 24 * time.Hour

// errDamaged: a replica's acceptor state under the key does not parse (a
// token that is not one, an unknown state, an object without a version
// that is not a placeholder: written by another tool). That replica is
// unavailable for the key, never read as its highest value, until repair
// rewrites it from a majority.
var errDamaged = errors.New("damaged quorum state")

// errCorruptBytes: a replica's bytes do not verify against the checksum
// its state records.
var errCorruptBytes = fmt.Errorf("%w: bytes do not match their checksum", blob.ErrCorrupt)

// validToken reports whether tok is a token a Store issues: 16 hex digits
// of Unix nanoseconds, not too far ahead, and 8 random ones.
func validToken(tok string) bool {
	if len(tok) != 24 {
		return false
	}
	for i := range len(tok) {
		if c := tok[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	t := tokenTime(tok)
	return t > 0 && t <= time.Now().Add(maxTokenAhead).UnixNano()
}

// chainLen bounds ChainKey. An operation retrying after a partial accept
// that finds chainLen later versions cannot tell, and reports ErrUncertain.
const chainLen = 32

func reserved(k string) bool {
	return k == VersionKey || k == BallotKey || k == PromiseKey || k == StateKey || k == ChainKey || k == ChecksumKey || k == SizeKey
}

// hiddenBytes is the content of tombstones and placeholders, so that a
// listing (which carries no metadata) can tell them from values by size and
// MD5, and a read of a replica can tell them by content. A user object with
// exactly these bytes is told apart by its metadata.
var hiddenBytes = []byte("\x00zonalblob-quorum: no object under this key\x00")

var hiddenMD5 = md5.Sum(hiddenBytes)

// maybeHidden reports whether a listing entry may be a tombstone or a placeholder.
func maybeHidden(o blob.ListObject) bool {
	return o.Size == int64(len(hiddenBytes)) && (len(o.MD5) == 0 || bytes.Equal(o.MD5, hiddenMD5[:]))
}

type kind int

const (
	absent kind = iota // no object on the replica (never written, or collected)
	empty              // a placeholder: a promise, no version accepted
	live               // a version with a value
	tomb               // a tombstone: a version that deletes the key
)

// rstate is what one replica holds for a key.
type rstate struct {
	r     *replica
	err   error            // the replica did not answer
	attrs *blob.Attributes // nil when absent
	kind  kind
	ver   string // version (the quorum's generation); "" for absent and placeholders
	acc   string // ballot at which ver was accepted
	prom  string // highest ballot promised
	chain []string
	sum   string // the value's CRC32C, "" where not recorded
	// damaged: the replica answered, but its state does not parse (err is
	// errDamaged); attrs is set, so repair can rewrite it in place.
	damaged bool
}

func (x *rstate) ok() bool { return x.err == nil }

// top is the highest ballot the replica has seen.
func (x *rstate) top() string { return max(x.acc, x.prom) }

// visible reports whether the state is a value (not absent, tombstone or placeholder).
func (x *rstate) visible() bool { return x.kind == live }

// gone reports whether the state reads as no object.
func (x *rstate) gone() bool { return x.kind != live }

func parseState(r *replica, a *blob.Attributes, err error) rstate {
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return rstate{r: r, kind: absent}
	case err != nil:
		return rstate{r: r, err: err}
	}
	x := rstate{r: r, attrs: a, kind: live}
	m := a.Metadata
	x.ver, x.acc, x.prom = m[VersionKey], m[BallotKey], m[PromiseKey]
	x.chain = strings.Fields(m[ChainKey])
	x.sum = m[ChecksumKey]
	damaged := func(format string, args ...any) rstate {
		return rstate{r: r, attrs: a, damaged: true, err: fmt.Errorf("%w: replica %d: %s", errDamaged, r.idx, fmt.Sprintf(format, args...))}
	}
	switch m[StateKey] {
	case "":
	case "deleted":
		x.kind = tomb
	case "empty":
		x.kind, x.ver, x.acc = empty, "", ""
	default:
		return damaged("state %q", m[StateKey])
	}
	if x.kind != empty && x.ver == "" {
		return damaged("no version: not written by a quorum")
	}
	if x.acc == "" && x.kind != empty {
		// Written before ballots were recorded: its version orders it.
		x.acc = x.ver
	}
	for _, tok := range append([]string{x.ver, x.acc, x.prom}, x.chain...) {
		if tok != "" && !validToken(tok) {
			return damaged("token %q", tok)
		}
	}
	if x.sum != "" && (len(x.sum) != 8 || strings.Trim(x.sum, "0123456789abcdef") != "") {
		return damaged("checksum %q", x.sum)
	}
	if n, ok := m[SizeKey]; ok && x.kind == live {
		size, err := strconv.ParseInt(n, 10, 64)
		if err != nil || size < 0 {
			return damaged("size %q", n)
		}
		if size != a.Size {
			// Damaged, or a write of the version still under way: either
			// way not the version, and repair may rewrite it (a write under
			// way then finds its replica changed, as after any promise).
			return rstate{r: r, attrs: a, damaged: true, err: fmt.Errorf("replica %d: %w: %d bytes of %d", r.idx, errIncomplete, a.Size, size)}
		}
	}
	return x
}

// statReplica stats key on one replica.
func (s *Store) statReplica(ctx context.Context, r *replica, key string) rstate {
	start := time.Now()
	a, err := r.s.Stat(ctx, key)
	s.observe(r, time.Since(start), err, ctx.Err() != nil)
	if err == nil {
		progressed(ctx, a.Size)
	}
	x := parseState(r, a, err)
	if x.damaged {
		s.noteCorrupt(key, r)
	}
	return x
}

// value is what a write puts on the replicas: the bytes and user attributes
// of a version, or a tombstone.
type value struct {
	body  *body              // nil for a tombstone or placeholder
	opts  blob.WriterOptions // user attributes only
	kind  kind               // live or tomb
	ver   string
	chain []string // this version and those that took effect before it, newest first
}

// size is how many bytes writing v moves.
func (v *value) size() int64 {
	if v.body == nil {
		return int64(len(hiddenBytes))
	}
	return v.body.size
}

// chainAfter returns the chain of a version ver that replaces cur: ver
// first, then cur's chain.
func chainAfter(ver string, cur *rstate) []string {
	c := []string{ver}
	if cur != nil && cur.kind != empty && cur.kind != absent {
		if len(cur.chain) == 0 && cur.ver != "" {
			c = append(c, cur.ver)
		}
		c = append(c, cur.chain...)
	}
	return c[:min(len(c), chainLen)]
}

// tookEffect reports whether cur is, or follows, one of the versions in mine;
// unknown reports that cur's chain is too short to tell.
func tookEffect(cur *rstate, mine []string) (took, unknown bool) {
	for _, m := range mine {
		if cur.ver == m || slices.Contains(cur.chain, m) {
			return true, false
		}
	}
	if len(cur.chain) == chainLen && len(mine) > 0 && cur.chain[chainLen-1] > slices.Min(mine) {
		return false, true
	}
	return false, false
}

// replicaOptions returns the options of a replica write of v accepted at acc
// with promise prom, on condition of what x holds.
func replicaOptions(v *value, acc, prom string, x *rstate) blob.WriterOptions {
	o := v.opts
	o.If, o.ContentMD5 = blob.Condition{}, nil
	o.Metadata = make(map[string]string, len(v.opts.Metadata)+5)
	for k, val := range v.opts.Metadata {
		o.Metadata[k] = val
	}
	switch v.kind {
	case tomb:
		o.Metadata[StateKey] = "deleted"
		o.ContentType = "application/octet-stream"
	case empty:
		o.Metadata[StateKey] = "empty"
		o.ContentType = "application/octet-stream"
	}
	if v.ver != "" {
		o.Metadata[VersionKey] = v.ver
		o.Metadata[BallotKey] = acc
	}
	if v.kind == live && v.body != nil {
		o.Metadata[ChecksumKey] = v.body.checksum()
		o.Metadata[SizeKey] = strconv.FormatInt(v.body.size, 10)
	}
	if prom != "" {
		o.Metadata[PromiseKey] = prom
	}
	if len(v.chain) > 0 {
		o.Metadata[ChainKey] = strings.Join(v.chain, " ")
	}
	switch {
	case x == nil || x.attrs == nil:
		o.If = blob.IfNotExist()
	default:
		o.If = blob.IfGenerationMatch(x.attrs.Generation)
	}
	return o
}

// writeReplica writes v onto replica x.r on condition that it still holds x,
// as accepted at ballot acc with promise prom.
func (s *Store) writeReplica(ctx context.Context, key string, x *rstate, v *value, acc, prom string) error {
	o := replicaOptions(v, acc, prom, x)
	b := v.body
	if v.kind != live || b == nil {
		b = bodyOf(hiddenBytes)
	}
	start := time.Now()
	err := putBody(ctx, x.r.s, key, b, &o)
	s.observe(x.r, time.Since(start), err, ctx.Err() != nil)
	if err == nil {
		progressed(ctx, 0)
	}
	return err
}

// putBody writes b under key, committing nothing if a write fails.
func putBody(ctx context.Context, st blob.Store, key string, b *body, o *blob.WriterOptions) error {
	if b.file == nil {
		return blob.Put(ctx, st, key, b.mem, o)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := st.NewWriter(ctx, key, o)
	if err != nil {
		return err
	}
	return copyAndClose(w, b, cancel)
}

// copyAndClose writes b to w and commits, cancelling (so committing
// nothing) if a write fails.
func copyAndClose(w blob.Writer, b *body, cancel context.CancelFunc) error {
	if _, err := io.Copy(w, b.reader(0, -1)); err != nil {
		cancel()
		w.Close()
		return err
	}
	return w.Close()
}

// refusal reports whether a replica call's error proves it changed nothing.
func refusal(err error) bool {
	return errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrExists)
}

// errChanged: a replica no longer holds the version just read from it.
var errChanged = errors.New("replica changed while being read")

// readValue reads the value x describes from its replica and checks that the
// bytes are that version's: the replica reader's size and modification time
// must be the ones Stat gave, or, when the reader does not report a time, a
// Stat after the read must show the same replica generation.
func (s *Store) readValue(ctx context.Context, key string, x *rstate) (*value, error) {
	v := &value{kind: x.kind, ver: x.ver, chain: x.chain}
	if x.kind != live {
		return v, nil
	}
	v.opts = userOptions(x.attrs)
	rd, err := x.r.s.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	b, err := readBody(rd)
	ra := rd.Attributes()
	rd.Close()
	if err != nil {
		return nil, err
	}
	if !sameObject(ra, x.attrs) {
		after := s.statReplica(ctx, x.r, key)
		if !after.ok() {
			return nil, after.err
		}
		if after.attrs == nil || after.attrs.Generation != x.attrs.Generation {
			return nil, errChanged
		}
	}
	if b.size != x.attrs.Size {
		return nil, errChanged
	}
	if x.sum != "" && b.checksum() != x.sum {
		s.noteCorrupt(key, x.r)
		return nil, fmt.Errorf("replica %d: %w", x.r.idx, errCorruptBytes)
	}
	v.body = b
	return v, nil
}

// sameObject reports whether a reader's attributes prove it read the object
// the replica Stat st describes: the same replica generation where the
// reader reports one, the same quorum version and state where it reports
// metadata, and otherwise the same size and modification time, as exact as
// the backend's clock (every version is a new write).
func sameObject(ra, st *blob.Attributes) bool {
	if ra == nil || st == nil || ra.Size != st.Size {
		return false
	}
	if ra.Metadata != nil {
		for _, k := range []string{VersionKey, StateKey} {
			if ra.Metadata[k] != st.Metadata[k] {
				return false
			}
		}
	}
	if ra.Generation != "" && st.Generation != "" {
		// Equal generations are one object, or (an S3 ETag) equal bytes.
		return ra.Generation == st.Generation
	}
	return !ra.ModTime.IsZero() && ra.ModTime.Equal(st.ModTime)
}

// userOptions returns the user attributes of a replica object.
func userOptions(a *blob.Attributes) blob.WriterOptions {
	o := blob.WriterOptionsFrom(a)
	o.Metadata = userMetadata(o.Metadata)
	return o
}

// userMetadata returns m without the quorum's reserved keys (nil if nothing
// is left).
func userMetadata(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !reserved(k) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// publicAttrs returns a copy of replica attributes as the quorum shows them.
func publicAttrs(x *rstate) *blob.Attributes {
	out := *x.attrs
	out.Metadata = userMetadata(x.attrs.Metadata)
	if x.ver != "" {
		out.Generation = x.ver
	} else {
		// Written around the quorum: no version. Its replica generation
		// still identifies it, though only on that replica.
		out.Generation = "r:" + x.attrs.Generation
	}
	return &out
}
