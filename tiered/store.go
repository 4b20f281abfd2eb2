package tiered

import (
	"context"
	"errors"
	"io"
	"maps"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// generationKey is the metadata key under which a cold copy records the hot
// generation it was moved from, so an object keeps its generation across a
// move and IfGenerationMatch taken before the move still holds after it.
const generationKey = "zonalblob-tiered-generation"

// coldGenerationPrefix marks the generation of a cold object that was not put
// there by a compactor (it has no recorded hot generation).
const coldGenerationPrefix = "cold:"

// Defaults for Options.
const (
	DefaultAfter       = 5 * time.Minute
	DefaultConcurrency = 4
	DefaultMoveTimeout = time.Minute
)

// DefaultInterval is the time between the compactor's passes when
// Options.Interval is zero, for the compaction age after (zero:
// DefaultAfter): after/4, clamped to [10ms, 1m].
func DefaultInterval(after time.Duration) time.Duration {
	if after == 0 {
		after = DefaultAfter
	}
	return min(max(after/4, 10*time.Millisecond), time.Minute)
}

// Options configure a tiered Store. The zero value is usable: moves after
// DefaultAfter, DefaultConcurrency moves at once, no rate limit.
type Options struct {
	// After is the age (from the hot object's ModTime) at which an object is
	// moved to cold. Zero means DefaultAfter; use a tiny positive value such
	// as time.Nanosecond to move as soon as possible.
	After time.Duration
	// Interval is the time between compaction passes. Zero means
	// DefaultInterval(After): After/4, clamped to [10ms, 1m].
	Interval time.Duration
	// Concurrency bounds the moves in flight (default DefaultConcurrency).
	Concurrency int
	// MaxObjectsPerSecond and MaxBytesPerSecond bound the rate of moves; zero
	// is unlimited.
	MaxObjectsPerSecond float64
	MaxBytesPerSecond   float64
	// MoveTimeout bounds one move (default DefaultMoveTimeout).
	MoveTimeout time.Duration
	// Manual turns the background compactor off: moves happen only in
	// CompactOnce.
	Manual bool
	// Now is the clock used for ages (default time.Now); tests move it.
	Now func() time.Time
	// Owner names this process in move markers (default: random per Store).
	// A Store recovers the markers of its own Owner at once, and those of
	// others only after 2*MoveTimeout. Give a restarted process the Owner it
	// had (a stable, unique name such as a pod name) so it finishes its
	// crashed moves on its first pass; never give two live processes one Owner.
	Owner string
}

func (o Options) withDefaults() Options {
	if o.After == 0 {
		o.After = DefaultAfter
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval(o.After)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MoveTimeout <= 0 {
		o.MoveTimeout = DefaultMoveTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Owner == "" {
		o.Owner = newOwner()
	}
	return o
}

// Store is a hot Store in front of a cold one with a background compactor
// that moves objects from hot to cold. See the package documentation for
// its guarantees.
type Store struct {
	hot, cold blob.Store
	opts      Options

	locks   keyLocks
	life    driver.Lifecycle
	cancel  context.CancelFunc
	done    chan struct{}
	limiter *pacer

	stats statsCounters
}

var (
	_ blob.Store   = (*Store)(nil)
	_ blob.Creator = (*Store)(nil)
)

// New returns a Store over hot and cold and, unless opts.Manual, starts its
// compactor. The Store owns both: Close closes them.
func New(hot, cold blob.Store, opts Options) (*Store, error) {
	if hot == nil || cold == nil {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: hot and cold stores are required")
	}
	if opts.After < 0 || opts.Interval < 0 || opts.MaxObjectsPerSecond < 0 || opts.MaxBytesPerSecond < 0 {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: negative option")
	}
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		hot: hot, cold: cold, opts: opts,
		cancel:  cancel,
		done:    make(chan struct{}),
		limiter: newPacer(opts.MaxObjectsPerSecond, opts.MaxBytesPerSecond),
	}
	if opts.Manual {
		close(s.done)
	} else {
		go s.run(ctx)
	}
	return s, nil
}

// Hot and Cold return the tiers, for tools that inspect them.
func (s *Store) Hot() blob.Store  { return s.hot }
func (s *Store) Cold() blob.Store { return s.cold }

func (s *Store) check(op, key string) error {
	if err := s.life.Check(op, key); err != nil {
		return err
	}
	if isMarker(key) {
		return blob.Errorf(op, key, blob.ErrInvalidKey, "keys starting with U+10FFFD U+10FFFD are reserved for move markers")
	}
	return nil
}

// NewRangeReader reads from hot and, if hot does not have key, from cold.
// Hot is asked first, and cold only once hot has answered: cold is written
// before hot is deleted, so a reader that misses in hot after a move finds
// the object in cold, and a cold read that begins after hot's miss sees every
// move that deleted from hot before it. (Asking cold at the same time as hot
// would not: a cold answer given before a newer version's move completed, and
// a hot miss after it, would serve the older version.)
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	if err := s.check(driver.OpRead, key); err != nil {
		return nil, err
	}
	r, err := s.hot.NewRangeReader(ctx, key, offset, length)
	if err == nil {
		return &fallbackReader{s: s, ctx: ctx, key: key, off: offset, n: length, r: r}, nil
	}
	if !errors.Is(err, blob.ErrNotFound) {
		return nil, err
	}
	return s.readCold(ctx, key, offset, length)
}

func (s *Store) readCold(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	r, err := s.cold.NewRangeReader(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	return &coldReader{Reader: r}, nil
}

// fallbackReader covers a hot store that reports a missing key only on the
// first Read (the contract allows it): it then reads cold instead.
type fallbackReader struct {
	s      *Store
	ctx    context.Context
	key    string
	off, n int64
	r      blob.Reader
	read   bool
}

func (f *fallbackReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if !f.read && n == 0 && err != nil && errors.Is(err, blob.ErrNotFound) {
		f.read = true
		c, cerr := f.s.readCold(f.ctx, f.key, f.off, f.n)
		if cerr != nil {
			return 0, cerr
		}
		f.r.Close()
		f.r = c
		return f.r.Read(p)
	}
	f.read = true
	return n, err
}

func (f *fallbackReader) Close() error                 { return f.r.Close() }
func (f *fallbackReader) Attributes() *blob.Attributes { return f.r.Attributes() }

// coldReader shows a cold object's attributes as the tiered store's.
type coldReader struct{ blob.Reader }

func (r *coldReader) Attributes() *blob.Attributes { return fromCold(r.Reader.Attributes()) }

// fromCold returns a cold object's attributes with the generation it had in
// hot and without the bookkeeping metadata.
func fromCold(a *blob.Attributes) *blob.Attributes {
	if a == nil {
		return nil
	}
	out := *a
	if g, ok := a.Metadata[generationKey]; ok {
		out.Generation = g
		out.Metadata = maps.Clone(a.Metadata)
		delete(out.Metadata, generationKey)
		if len(out.Metadata) == 0 {
			out.Metadata = nil
		}
	} else if a.Generation != "" {
		out.Generation = coldGenerationPrefix + a.Generation
	}
	return &out
}

// NewWriter writes to hot. Unconditional writes are the hot store's own
// writer, with no added work. Conditional writes must also see cold, so their
// bytes are buffered and committed at Close under the key's lock (see
// commitConditional).
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	if err := s.check(driver.OpWrite, key); err != nil {
		return nil, err
	}
	if opts == nil || opts.If.IsZero() {
		return s.hot.NewWriter(ctx, key, opts)
	}
	if err := opts.If.Validate("write", key); err != nil {
		return nil, err
	}
	if _, ok := opts.Metadata[generationKey]; ok {
		return nil, blob.Errorf(driver.OpWrite, key, blob.ErrInvalidArgument, "metadata key %s is reserved", generationKey)
	}
	return &condWriter{s: s, ctx: ctx, key: key, opts: *opts}, nil
}

// Create makes a new object in hot under a name the store picks. The name is
// new, so unlike an IfNotExist write it need not be looked up in cold: Create
// costs exactly what the hot store's Create costs (one data round trip over a
// pooled gcsrapid store).
func (s *Store) Create(ctx context.Context, prefix string, opts *blob.WriterOptions) (string, blob.Writer, error) {
	if s.life.Closed() {
		return "", nil, driver.ClosedError(driver.OpCreate, prefix)
	}
	if isMarker(prefix) {
		return "", nil, blob.Errorf(driver.OpCreate, prefix, blob.ErrInvalidKey, "prefix reserved for move markers")
	}
	return blob.Create(ctx, s.hot, prefix, opts)
}

type condWriter struct {
	s      *Store
	ctx    context.Context
	key    string
	opts   blob.WriterOptions
	buf    []byte
	closed bool
}

func (w *condWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, driver.ClosedError(driver.OpWrite, w.key)
	}
	if err := w.ctx.Err(); err != nil {
		return 0, &blob.Error{Op: driver.OpWrite, Key: w.key, Err: err}
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *condWriter) Close() error {
	if w.closed {
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	w.closed = true
	if err := w.ctx.Err(); err != nil {
		return &blob.Error{Op: driver.OpWrite, Key: w.key, Err: err}
	}
	if w.s.life.Closed() {
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	return w.s.commitConditional(w.ctx, w.key, w.buf, w.opts)
}

// commitConditional checks a precondition against both tiers and commits to
// hot. The key's lock keeps this process's compactor from moving the key
// between the check and the commit; a compactor in another process cannot
// either, because it moves only objects older than After, and an object that
// was absent from hot when the check began cannot be both created and moved
// within one conditional write unless the write outlasts After.
func (s *Store) commitConditional(ctx context.Context, key string, data []byte, opts blob.WriterOptions) error {
	unlock, err := s.locks.lock(ctx, key)
	if err != nil {
		return &blob.Error{Op: driver.OpWrite, Key: key, Err: err}
	}
	defer unlock()
	if opts.If.NotExist() {
		if _, err := s.cold.Stat(ctx, key); err == nil {
			return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrExists}
		} else if !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		return blob.Put(ctx, s.hot, key, data, &opts)
	}
	want := opts.If.GenerationMatch()
	a, err := s.hot.Stat(ctx, key)
	switch {
	case err == nil:
		if a.Generation != want {
			return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition}
		}
		return blob.Put(ctx, s.hot, key, data, &opts)
	case !errors.Is(err, blob.ErrNotFound):
		return err
	}
	ca, err := s.cold.Stat(ctx, key)
	if errors.Is(err, blob.ErrNotFound) || (err == nil && fromCold(ca).Generation != want) {
		return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition}
	}
	if err != nil {
		return err
	}
	// The object lives in cold only; the new version goes to hot, where it
	// shadows the cold one until it is moved over it.
	o := opts
	o.If = blob.IfNotExist()
	err = blob.Put(ctx, s.hot, key, data, &o)
	if errors.Is(err, blob.ErrExists) {
		return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition, Err: err}
	}
	return err
}

// Stat returns hot's attributes if hot has key, else cold's (with the
// generation the object had in hot).
func (s *Store) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if err := s.check(driver.OpStat, key); err != nil {
		return nil, err
	}
	a, err := s.hot.Stat(ctx, key)
	if err == nil || !errors.Is(err, blob.ErrNotFound) {
		return a, err
	}
	a, err = s.cold.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	return fromCold(a), nil
}

// List merges one page of each tier. Hot is listed before cold: an object
// moved after hot's listing was already in cold before it, so an object that
// exists for the whole listing is never missed. An object in both tiers (mid
// move, or overwritten after a move) appears once, with hot's attributes.
// Objects listed from cold only have an empty Generation (cold listings do
// not carry the metadata that holds it); Stat returns it.
func (s *Store) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	if s.life.Closed() {
		return nil, driver.ClosedError(driver.OpList, "")
	}
	var o blob.ListOptions
	if opts != nil {
		o = *opts
	}
	after := o.StartAfter
	if o.PageToken != "" {
		k, err := driver.DecodePageToken(o.PageToken)
		if err != nil {
			return nil, err
		}
		after = max(after, k)
	}
	size := o.PageSize
	if size <= 0 {
		size = blob.DefaultPageSize
	}
	for {
		page, bound, err := s.listOnce(ctx, &blob.ListOptions{Prefix: o.Prefix, Delimiter: o.Delimiter, StartAfter: after, PageSize: size})
		if err != nil || len(page.Objects) > 0 || bound == "" {
			return page, err
		}
		// A page of markers only: go on after them rather than return an
		// empty page that is not the last.
		after = bound
	}
}

// listOnce merges one page of each tier. bound, when not empty, is the last
// key a tier listed before it cut its page: entries after it are unknown for
// that tier, so the merged page stops there.
func (s *Store) listOnce(ctx context.Context, inner *blob.ListOptions) (page *blob.ListPage, bound string, err error) {
	hp, err := s.hot.List(ctx, inner)
	if err != nil {
		return nil, "", err
	}
	cp, err := s.cold.List(ctx, inner)
	if err != nil {
		return nil, "", err
	}
	for _, p := range []*blob.ListPage{hp, cp} {
		if p.NextPageToken != "" && len(p.Objects) > 0 {
			if last := p.Objects[len(p.Objects)-1].Key; bound == "" || last < bound {
				bound = last
			}
		}
	}
	size := inner.PageSize
	page = &blob.ListPage{Objects: make([]blob.ListObject, 0, min(size, len(hp.Objects)+len(cp.Objects)))}
	h, c := hp.Objects, cp.Objects
	more := false
	for len(h) > 0 || len(c) > 0 {
		var next blob.ListObject
		switch {
		case len(c) == 0 || (len(h) > 0 && h[0].Key < c[0].Key):
			next, h = h[0], h[1:]
		case len(h) == 0 || c[0].Key < h[0].Key:
			next, c = c[0], c[1:]
			next.Generation = ""
		default:
			next, h, c = h[0], h[1:], c[1:]
		}
		if bound != "" && next.Key > bound {
			more = true
			break
		}
		if isMarker(next.Key) {
			continue
		}
		if len(page.Objects) == size {
			more = true
			break
		}
		page.Objects = append(page.Objects, next)
	}
	if bound != "" {
		more = true
	}
	if more && len(page.Objects) > 0 {
		page.NextPageToken = driver.EncodePageToken(page.Objects[len(page.Objects)-1].Key)
	}
	return page, bound, nil
}

// Delete removes key from both tiers, under the key's lock so that this
// process's compactor is not moving it meanwhile. Cold is deleted first, so a
// reader never sees an older cold version once hot's is gone. Hot is deleted
// at the generation it has (Stat, then a conditional delete), so that a move
// of that generation by a compactor in another process can be told through
// its marker (noteDelete). If hot no longer had the object, such a compactor
// may have moved it between the two deletes, so cold is deleted once more.
func (s *Store) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := s.check(driver.OpDelete, key); err != nil {
		return err
	}
	unlock, err := s.locks.lock(ctx, key)
	if err != nil {
		return &blob.Error{Op: driver.OpDelete, Key: key, Err: err}
	}
	defer unlock()
	if opts != nil && opts.IfGenerationMatch != "" {
		return s.deleteIfGeneration(ctx, key, opts.IfGenerationMatch)
	}
	found := false
	if err := s.cold.Delete(ctx, key, nil); err == nil {
		found = true
	} else if !errors.Is(err, blob.ErrNotFound) {
		return err
	}
	for range 10 {
		a, err := s.hot.Stat(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			break
		} else if err != nil {
			return err
		}
		err = s.hot.Delete(ctx, key, &blob.DeleteOptions{IfGenerationMatch: a.Generation})
		switch {
		case err == nil:
			return s.noteDelete(ctx, key, a.Generation)
		case errors.Is(err, blob.ErrNotFound):
		case errors.Is(err, blob.ErrPrecondition):
			continue // overwritten meanwhile: delete the new version
		default:
			return err
		}
		break
	}
	return s.deleteColdAgain(ctx, key, found)
}

// deleteColdAgain ends a Delete that found hot empty: a compactor elsewhere
// may have copied the object to cold after the first cold delete.
func (s *Store) deleteColdAgain(ctx context.Context, key string, found bool) error {
	if err := s.cold.Delete(ctx, key, nil); err == nil {
		found = true
	} else if !errors.Is(err, blob.ErrNotFound) {
		return err
	}
	if !found {
		return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrNotFound}
	}
	return nil
}

func (s *Store) deleteIfGeneration(ctx context.Context, key, want string) error {
	a, err := s.hot.Stat(ctx, key)
	switch {
	case err == nil:
		if a.Generation != want {
			return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition}
		}
		// What cold holds is an older version, shadowed by hot's: it goes too.
		if err := s.cold.Delete(ctx, key, nil); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		err := s.hot.Delete(ctx, key, &blob.DeleteOptions{IfGenerationMatch: want})
		switch {
		case err == nil:
			return s.noteDelete(ctx, key, want)
		case errors.Is(err, blob.ErrNotFound):
			// Moved to cold by another process since the Stat: it is the
			// generation asked for, and its copy goes.
			if err := s.deleteColdAgain(ctx, key, false); errors.Is(err, blob.ErrNotFound) {
				return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition, Err: err}
			} else if err != nil {
				return err
			}
			return nil
		}
		return err
	case !errors.Is(err, blob.ErrNotFound):
		return err
	}
	ca, err := s.cold.Stat(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition, Err: err}
	}
	if err != nil {
		return err
	}
	if fromCold(ca).Generation != want {
		return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition}
	}
	return s.cold.Delete(ctx, key, &blob.DeleteOptions{IfGenerationMatch: ca.Generation})
}

// Close stops the compactor, waits for the moves in flight to end, and
// closes both tiers.
func (s *Store) Close() error {
	if !s.life.Close() {
		return driver.ClosedError(driver.OpClose, "")
	}
	s.cancel()
	<-s.done
	return errors.Join(s.hot.Close(), s.cold.Close())
}

var _ io.Closer = (*Store)(nil)
