package quorum

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// NewWriter implements blob.Store. The writer buffers the object and commits
// it to the replicas in parallel at Close (see the package doc).
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	o, err := s.writerOptions(key, opts)
	if err != nil {
		return nil, err
	}
	return s.newWriter(ctx, key, o), nil
}

func (s *Store) writerOptions(key string, opts *blob.WriterOptions) (blob.WriterOptions, error) {
	var o blob.WriterOptions
	if err := s.check("write", key); err != nil {
		return o, err
	}
	if opts != nil {
		o = *opts
	}
	if err := o.If.Validate("write", key); err != nil {
		return o, err
	}
	if _, ok := o.Metadata[VersionKey]; ok {
		return o, blob.Errorf("write", key, blob.ErrInvalidArgument, "metadata key %s is reserved", VersionKey)
	}
	return o, nil
}

type writer struct {
	s    *Store
	ctx  context.Context
	key  string
	opts blob.WriterOptions
	buf  bytes.Buffer
	done bool

	// Replica writers live in wctx, detached from ctx once the write is
	// acknowledged so that stragglers can finish after the caller moves on.
	wctx      context.Context
	wcancel   context.CancelFunc
	stopAfter func() bool

	// Set by Prewarm: the version token and one warm writer per replica
	// (nil where none was asked for).
	tok  string
	warm []chan warmResult
}

type warmResult struct {
	w      blob.Writer
	cancel context.CancelFunc
	err    error
}

func (s *Store) newWriter(ctx context.Context, key string, o blob.WriterOptions) *writer {
	w := &writer{s: s, ctx: ctx, key: key, opts: o}
	w.wctx, w.wcancel = context.WithCancel(context.WithoutCancel(ctx))
	stopCaller := context.AfterFunc(ctx, w.wcancel)
	stopBG := context.AfterFunc(s.bg, w.wcancel)
	w.stopAfter = func() bool { stopBG(); return stopCaller() }
	return w
}

func (w *writer) Write(p []byte) (int, error) {
	if w.done {
		return 0, &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	if err := w.ctx.Err(); err != nil {
		return 0, driver.WrapError("write", w.key, err, nil)
	}
	return w.buf.Write(p)
}

// abort releases warm replica writers without committing anything.
func (w *writer) abort() {
	w.wcancel()
	w.stopAfter()
	for _, ch := range w.warm {
		if ch == nil {
			continue
		}
		go func() {
			if r := <-ch; r.err == nil {
				r.cancel()
				r.w.Close()
			}
		}()
	}
}

func (w *writer) Close() error {
	if w.done {
		return &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	w.done = true
	if err := w.ctx.Err(); err != nil {
		w.abort()
		return driver.WrapError("write", w.key, err, nil)
	}
	if w.s.closed.Load() {
		w.abort()
		return &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	data := w.buf.Bytes()
	if len(w.opts.ContentMD5) > 0 {
		if sum := md5.Sum(data); !bytes.Equal(sum[:], w.opts.ContentMD5) {
			w.abort()
			return blob.Errorf("write", w.key, blob.ErrInvalidArgument, "content MD5 %x does not match the declared %x", sum, w.opts.ContentMD5)
		}
	}
	switch {
	case w.opts.If.NotExist():
		return w.create(data)
	case w.opts.If.GenerationMatch() != "":
		return w.conditional(data)
	}
	return w.plain(data)
}

// plan is one replica's part of a write.
type plan struct {
	r    *replica
	opts blob.WriterOptions
	warm chan warmResult
}

func (w *writer) optsWith(tok string) blob.WriterOptions {
	o := w.opts
	o.If = blob.Condition{}
	o.Metadata = make(map[string]string, len(w.opts.Metadata)+1)
	for k, v := range w.opts.Metadata {
		o.Metadata[k] = v
	}
	o.Metadata[VersionKey] = tok
	return o
}

func (w *writer) plain(data []byte) error {
	tok := w.s.newToken("")
	var plans []plan
	for _, r := range w.s.upReplicas(w.s.w) {
		plans = append(plans, plan{r: r, opts: w.optsWith(tok)})
	}
	f := w.s.startFan(w, tok, data, plans)
	if f.wait(w.s.w) {
		return nil
	}
	return f.fail(ErrNoQuorum, nil)
}

func (w *writer) conditional(data []byte) error {
	s, g := w.s, w.opts.If.GenerationMatch()
	tok := s.newToken(g)
	s.update(w.key, func(st *keyState) { st.starting() })
	flying := true
	defer func() {
		if !flying {
			return
		}
		// Giving up: an operation this one overlapped (a repair, say) left
		// the key for a later pass to check.
		contended := false
		s.update(w.key, func(st *keyState) {
			st.flying--
			contended = st.contended
		})
		if contended {
			s.rq.add(w.key)
		}
	}()
	// Each replica is written only if it holds g (or an older version: it
	// missed a write and is caught up), with its own generation as the
	// condition, so that a concurrent writer is caught per replica.
	st := s.snapshot(w.key)
	ans := s.statAll(w.ctx, w.key, s.upReplicas(s.w))
	var plans []plan
	matched, refused := 0, 0
	for _, a := range ans {
		if a.err != nil {
			if errors.Is(a.err, blob.ErrNotFound) {
				refused++
			}
			continue
		}
		t := tokenOf(a.attrs)
		switch {
		case t == g:
			matched++
		case t > g && !st.failedTok(t):
			refused++
			continue
		}
		o := w.optsWith(tok)
		o.If = blob.IfGenerationMatch(a.attrs.Generation)
		plans = append(plans, plan{r: a.r, opts: o})
	}
	if matched == 0 || refused > len(s.reps)-s.w {
		w.abort()
		return blob.Errorf("write", w.key, blob.ErrPrecondition, "quorum version is not %s", g)
	}
	flying = false
	s.update(w.key, func(st *keyState) { st.flying-- })
	f := s.startFan(w, tok, data, plans)
	f.refused = refused
	if f.wait(s.w) {
		return nil
	}
	return f.fail(ErrNoQuorum, blob.ErrPrecondition)
}

const createAttempts = 6

// create is an IfNotExist write: it succeeds only on max(W, N/2+1) replicas,
// so two creators can never both succeed. When creators split the replicas so
// that none has a majority, each removes its own copies and tries again after
// a random pause.
func (w *writer) create(data []byte) error {
	s := w.s
	for attempt := 0; ; attempt++ {
		tok := w.tok
		var plans []plan
		if attempt == 0 && w.warm != nil {
			for i, ch := range w.warm {
				if ch != nil {
					plans = append(plans, plan{r: s.reps[i], opts: w.optsWith(tok), warm: ch})
				}
			}
		} else {
			if attempt > 0 {
				// A fresh writer context: the last attempt's was cancelled.
				w.wctx, w.wcancel = context.WithCancel(context.WithoutCancel(w.ctx))
				stopCaller := context.AfterFunc(w.ctx, w.wcancel)
				stopBG := context.AfterFunc(s.bg, w.wcancel)
				w.stopAfter = func() bool { stopBG(); return stopCaller() }
			}
			tok = s.newToken("")
			for _, r := range s.upReplicas(s.ine) {
				o := w.optsWith(tok)
				o.If = blob.IfNotExist()
				plans = append(plans, plan{r: r, opts: o})
			}
		}
		f := s.startFan(w, tok, data, plans)
		if f.wait(s.ine) {
			return nil
		}
		f.abortAndWait()
		exists := f.count(blob.ErrExists)
		if exists == 0 || w.ctx.Err() != nil {
			return f.fail(ErrNoQuorum, nil)
		}
		// Our own copies go (only those carrying our token, each removed on
		// condition of its replica generation), so they cannot block the winner.
		f.finishFailed(!s.removeOwn(w.ctx, w.key, tok), false)
		if attempt == createAttempts-1 || s.majorityHeld(w.ctx, w.key) {
			return &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrExists}
		}
		s.stats.createRetries.Add(1)
		pause := time.Duration(rand.Int64N(int64(time.Millisecond) * int64(attempt+1)))
		select {
		case <-time.After(pause):
		case <-w.ctx.Done():
			return driver.WrapError("write", w.key, w.ctx.Err(), nil)
		}
	}
}

// majorityHeld reports whether one version of key is on an IfNotExist quorum.
func (s *Store) majorityHeld(ctx context.Context, key string) bool {
	n := map[string]int{}
	for _, a := range s.statAll(ctx, key, s.reps) {
		if a.err == nil {
			t := tokenOf(a.attrs)
			if n[t]++; n[t] >= s.ine {
				return true
			}
		}
	}
	return false
}

// removeOwn deletes the copies of key carrying version tok, each on condition
// of its replica's generation, and reports whether no such copy remains.
func (s *Store) removeOwn(ctx context.Context, key, tok string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.StragglerTimeout)
	defer cancel()
	clean := true
	for _, a := range s.statAll(ctx, key, s.reps) {
		switch {
		case errors.Is(a.err, blob.ErrNotFound):
		case a.err != nil:
			clean = false
		case tokenOf(a.attrs) == tok:
			err := a.r.s.Delete(ctx, key, &blob.DeleteOptions{IfGenerationMatch: a.attrs.Generation})
			if err != nil && !errors.Is(err, blob.ErrNotFound) && !errors.Is(err, blob.ErrPrecondition) {
				clean = false
			}
			if err == nil || errors.Is(err, blob.ErrNotFound) {
				s.changed(key, tok, true, a.r.idx, true)
			}
		}
	}
	return clean
}

// fan is one write's commits to its replicas.
type fan struct {
	s       *Store
	w       *writer
	tok     string
	n       int // commits started
	results chan outcome
	got     int
	ok      uint64
	errs    []error
	skipped int
	refused int // replicas a conditional write found changed, so never tried
	started int // the key's seq when the write started
	ackd    bool
}

type outcome struct {
	i   int
	err error
}

func (s *Store) startFan(w *writer, tok string, data []byte, plans []plan) *fan {
	f := &fan{s: s, w: w, tok: tok, results: make(chan outcome, len(plans)), errs: make([]error, len(s.reps))}
	f.skipped = len(s.reps) - len(plans)
	s.update(w.key, func(st *keyState) {
		st.starting()
		f.started = st.seq
		if st.writing == nil {
			st.writing = map[string]bool{}
		}
		st.writing[tok] = true
	})
	for _, p := range plans {
		if !s.goTask(func() {
			err := s.commitOne(w, p, data)
			switch {
			case err == nil:
				s.landed(w.key, tok, p.r.idx)
			case !refusal(err):
				s.changed(w.key, tok, false, p.r.idx, false)
			}
			f.results <- outcome{p.r.idx, err}
		}) {
			f.results <- outcome{p.r.idx, &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}}
		}
		f.n++
	}
	return f
}

func (s *Store) commitOne(w *writer, p plan, data []byte) error {
	start := time.Now()
	var rw blob.Writer
	var cancel context.CancelFunc
	if p.warm != nil {
		r := <-p.warm
		rw, cancel = r.w, r.cancel
		if r.err != nil {
			rw = nil
		}
	}
	if rw == nil {
		var ctx context.Context
		ctx, cancel = context.WithCancel(w.wctx)
		var err error
		if rw, err = p.r.s.NewWriter(ctx, w.key, &p.opts); err != nil {
			cancel()
			s.observe(p.r, time.Since(start), err, w.wctx.Err() != nil)
			return err
		}
	}
	defer cancel()
	_, err := rw.Write(data)
	if err != nil {
		cancel()
		rw.Close()
	} else {
		err = rw.Close()
	}
	s.observe(p.r, time.Since(start), err, w.wctx.Err() != nil)
	return err
}

func (f *fan) record(o outcome) {
	f.got++
	if o.err == nil {
		f.ok |= 1 << o.i
	} else {
		f.errs[o.i] = o.err
	}
}

func (f *fan) count(kind error) int {
	n := 0
	for _, e := range f.errs {
		if e != nil && errors.Is(e, kind) {
			n++
		}
	}
	return n
}

func (f *fan) oks() int {
	n := 0
	for i := range f.s.reps {
		if f.ok&(1<<i) != 0 {
			n++
		}
	}
	return n
}

// wait collects commits until need succeeded (the write is acknowledged and
// the rest finish in the background) or success is impossible.
func (f *fan) wait(need int) bool {
	for f.oks() < need && f.got-f.oks()+f.skipped <= len(f.s.reps)-need && f.got < f.n {
		f.record(<-f.results)
	}
	if f.oks() < need {
		return false
	}
	f.ackd = true
	f.w.stopAfter()
	f.s.stats.writes.Add(1)
	f.s.acked(f.w.key, f.tok, false, f.ok, f.started)
	key := f.w.key
	if !f.s.goTask(func() { f.stragglers(key) }) {
		f.stragglers(key)
	}
	return true
}

// stragglers lets the remaining commits finish (within StragglerTimeout) and
// queues the key for repair if any replica missed the write.
func (f *fan) stragglers(key string) {
	timer := time.AfterFunc(f.s.opts.StragglerTimeout, f.w.wcancel)
	defer timer.Stop()
	for f.got < f.n {
		o := <-f.results
		f.record(o)
		if o.err == nil {
			f.s.landed(key, f.tok, o.i)
		}
	}
	f.w.wcancel()
	contended := false
	f.s.update(key, func(st *keyState) {
		st.flying--
		delete(st.writing, f.tok)
		contended = st.contended
	})
	if f.oks() < len(f.s.reps) || contended {
		f.s.rq.add(key)
	}
}

func (f *fan) abortAndWait() {
	f.w.wcancel()
	f.w.stopAfter()
	for f.got < f.n {
		f.record(<-f.results)
	}
}

// finishFailed records a failed write. When copies may have landed
// (mustRepair), its version must never be served and the repairer restores
// what it replaced. undoing: the write undoes its copies before it reports
// (fail), and learns whether a repair had to keep them instead; otherwise it
// reports a refusal whatever becomes of its copies, and they are never kept.
func (f *fan) finishFailed(mustRepair, undoing bool) {
	key := f.w.key
	f.s.stats.failedWrites.Add(1)
	contended := false
	f.s.update(key, func(st *keyState) {
		st.flying--
		delete(st.writing, f.tok)
		contended = st.contended
		if mustRepair {
			if st.failed == nil {
				st.failed = map[string]bool{}
			}
			st.failed[f.tok] = true
			if undoing {
				if st.undo == nil {
					st.undo = map[string]bool{}
				}
				st.undo[f.tok] = false
			} else {
				if st.refuse == nil {
					st.refuse = map[string]bool{}
				}
				st.refuse[f.tok] = true
			}
		}
	})
	if mustRepair || contended {
		f.s.rq.add(key)
	}
}

// fail ends a write that did not reach its quorum. The copies that landed
// (including ones whose commit reported an error) are undone before fail
// returns when the replicas allow: a new key's copies are deleted, an
// overwrite's are replaced by the version they overwrote. What cannot be
// undone now is queued for the repairer, and this Store never serves it.
func (f *fan) fail(cause, kindIfRefused error) error {
	f.abortAndWait()
	key := f.w.key
	// Only a refusal proves that a commit left nothing behind.
	mustRepair := f.ok != 0 || f.count(blob.ErrNotFound)+f.count(blob.ErrPrecondition)+f.count(blob.ErrExists) < f.got-f.oks()
	f.finishFailed(mustRepair, true)
	uncertain := false
	if mustRepair {
		ctx, cancel := context.WithTimeout(f.s.bg, f.s.opts.StragglerTimeout)
		done, promoted := f.s.repair(ctx, key)
		cancel()
		if done {
			f.s.rq.remove(key)
		}
		// Another repair (the repairer's) may have kept this version.
		kept := false
		f.s.update(key, func(st *keyState) {
			kept = st.undo[f.tok]
			delete(st.undo, f.tok)
		})
		uncertain = !done || promoted || kept
	}
	if err := f.w.ctx.Err(); err != nil {
		return driver.WrapError("write", key, err, nil)
	}
	var kind error
	if kindIfRefused != nil && f.count(kindIfRefused)+f.refused > len(f.s.reps)-f.s.w {
		kind = kindIfRefused
	}
	if uncertain {
		cause = fmt.Errorf("%w (%w)", cause, ErrUncertain)
	}
	return &blob.Error{Op: "write", Key: key, Kind: kind, Err: fmt.Errorf("%w: %d of %d replicas committed, %d needed: %v",
		cause, f.oks(), len(f.s.reps), f.s.w, f.summary())}
}

func (f *fan) summary() string {
	var b bytes.Buffer
	for i, e := range f.errs {
		if e != nil {
			fmt.Fprintf(&b, "[replica %d: %v] ", i, e)
		}
	}
	if f.skipped > 0 {
		fmt.Fprintf(&b, "[%d replicas down]", f.skipped)
	}
	return b.String()
}

// goTask runs fn as a task Close waits for, unless the store is closing.
func (s *Store) goTask(fn func()) bool {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return false
	}
	s.tasks.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.tasks.Done()
		fn()
	}()
	return true
}

// Prewarm implements blob.Prewarmer: it prewarms key on every replica that is
// up (natively where the replica is a Prewarmer) and returns once an
// IfNotExist quorum of them is ready. Closing the writer commits as an
// IfNotExist write through the warm handles.
func (s *Store) Prewarm(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	o, err := s.writerOptions(key, opts)
	if err != nil {
		return nil, err
	}
	if o.If.GenerationMatch() != "" {
		return nil, blob.Errorf("prewarm", key, blob.ErrInvalidArgument, "a prewarmed write is IfNotExist")
	}
	o.If = blob.IfNotExist()
	w := s.newWriter(ctx, key, o)
	w.tok = s.newToken("")
	w.warm = make([]chan warmResult, len(s.reps))
	ready := make(chan error, len(s.reps))
	ups := s.upReplicas(s.ine)
	for _, r := range ups {
		ch := make(chan warmResult, 1)
		w.warm[r.idx] = ch
		ro := w.optsWith(w.tok)
		ro.If = blob.IfNotExist()
		go func() {
			rctx, cancel := context.WithCancel(w.wctx)
			start := time.Now()
			rw, err := blob.Prewarm(rctx, r.s, key, &ro)
			s.observe(r, time.Since(start), err, w.wctx.Err() != nil)
			if err != nil {
				cancel()
			}
			ch <- warmResult{rw, cancel, err}
			ready <- err
		}()
	}
	var errs []error
	for okN := 0; okN < s.ine; {
		select {
		case err := <-ready:
			if err == nil {
				okN++
				continue
			}
			errs = append(errs, err)
			if len(errs) > len(ups)-s.ine {
				w.done = true
				w.abort()
				kind := error(nil)
				for _, e := range errs {
					if errors.Is(e, blob.ErrExists) {
						kind = blob.ErrExists
					}
				}
				return nil, &blob.Error{Op: "prewarm", Key: key, Kind: kind, Err: fmt.Errorf("%w: %v", ErrNoQuorum, errors.Join(errs...))}
			}
		case <-ctx.Done():
			w.done = true
			w.abort()
			return nil, driver.WrapError("prewarm", key, ctx.Err(), nil)
		}
	}
	return w, nil
}
