package tiered

import (
	"context"
	"errors"
	"sync"

	"github.com/zonalblob/zonalblob/blob"
)

// writtenMax bounds how many keys a Store remembers the hot generation of:
// an LSM engine deletes the tables it wrote not long after, and what falls
// out only costs its Delete a Stat.
const writtenMax = 4096

// written remembers the generation hot gave to versions this Store wrote,
// so that a Delete of one (an LSM engine deleting a table it wrote) can
// write its grave on condition of that generation at once, instead of a
// Stat of hot and then the grave: one round trip, as the hot store's own
// Delete. An entry is only a guess. The grave's condition is what decides:
// if hot no longer holds that version (replaced, moved, deleted by another
// process) the write fails and the Delete looks at hot as always.
//
// A guess that holds is as good as the Stat it replaces. Hot holding the
// version when the grave lands makes it the key's current version, unless
// it is a copy that a retirement left behind (a pack holds it or a newer
// one, whose version the grave then deletes: it is the current one, and a
// retirement of the grave kills whatever packs hold of the key), or a copy
// of a version already deleted, which cannot be: a grave that deleted it
// is retired only once no replica may hold it.
type written struct {
	mu    sync.Mutex
	m     map[string]writtenGen
	order []writtenSlot // the keys in the order written, oldest first
	seq   uint64
}

type writtenGen struct {
	gen string
	seq uint64
}

type writtenSlot struct {
	key string
	seq uint64
}

// note records that generation gen of key is the version this Store just
// wrote (gen "" forgets key).
func (w *written) note(key, gen string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen == "" {
		delete(w.m, key)
		return
	}
	if w.m == nil {
		w.m = make(map[string]writtenGen)
	}
	w.seq++
	w.m[key] = writtenGen{gen: gen, seq: w.seq}
	w.order = append(w.order, writtenSlot{key: key, seq: w.seq})
	// A key written again leaves its older slot behind: the slice is
	// compacted when such slots make up half of it.
	for len(w.m) > writtenMax || len(w.order) > 2*writtenMax {
		if len(w.order) > 2*writtenMax {
			w.compactLocked()
			continue
		}
		old := w.order[0]
		w.order = w.order[1:]
		if e, ok := w.m[old.key]; ok && e.seq == old.seq {
			delete(w.m, old.key)
		}
	}
}

func (w *written) compactLocked() {
	kept := make([]writtenSlot, 0, len(w.m))
	for _, sl := range w.order {
		if e, ok := w.m[sl.key]; ok && e.seq == sl.seq {
			kept = append(kept, sl)
		}
	}
	w.order = kept
}

// gen returns the generation this Store last wrote key at, if it remembers.
func (w *written) gen(key string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[key]
	return e.gen, ok
}

// len is how many keys are remembered.
func (w *written) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}

// recordingHot is hot as this Store writes the user's versions to it: its
// writers remember the generation of what they commit (see written).
type recordingHot struct {
	blob.Store
	s *Store
}

func (h recordingHot) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	w, err := h.Store.NewWriter(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return &recordingWriter{Writer: w, s: h.s, key: key}, nil
}

// recordingWriter remembers, once it commits, the generation hot reports
// (if it does); a write that failed may have replaced the version
// remembered, which is forgotten.
type recordingWriter struct {
	blob.Writer
	s   *Store
	key string
}

func (w *recordingWriter) Close() error {
	err := w.Writer.Close()
	g := ""
	if err == nil {
		g, _ = blob.WrittenGeneration(w.Writer)
	}
	w.s.written.note(w.key, g)
	return err
}

// WrittenGeneration implements blob.GenerationReporter: hot's writer's.
func (w *recordingWriter) WrittenGeneration() (string, bool) {
	return blob.WrittenGeneration(w.Writer)
}

// putHotRecorded is blob.Put to hot for a version the user wrote, with its
// generation remembered.
func (s *Store) putHotRecorded(ctx context.Context, key string, data []byte, opts *blob.WriterOptions) error {
	return blob.Put(ctx, recordingHot{Store: s.hot, s: s}, key, data, opts)
}

// deleteWritten is Delete's first try for a key this Store wrote: a grave
// on condition of the generation written (see written). done is false when
// the guess did not hold, and the Delete goes on as for any key.
func (s *Store) deleteWritten(ctx context.Context, key, want string) (done bool, err error) {
	g, ok := s.written.gen(key)
	if !ok || (want != "" && want != g) {
		return false, nil
	}
	err = s.writeGrave(ctx, key, g)
	// Whatever came of it, the version may be gone.
	s.written.note(key, "")
	if errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound) {
		s.stats.writtenMissed.Add(1)
		return false, nil
	}
	if err == nil {
		s.stats.writtenDeleted.Add(1)
	}
	return true, err
}
