package tiered_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
)

// Each case lets another process (a second tiered store over the same tiers,
// which shares no lock with the compactor) act on the object at one exact
// point of a move, then checks what the user sees and what cold holds.
func TestMoveRacesWithAnotherProcess(t *testing.T) {
	cases := []struct {
		name string
		// The hooked call the action runs before (or after, for
		// committed): its step, a prefix of its key (the pack's, in cold)
		// and which call of those it is.
		step, key string
		nth       int
		action    func(t *testing.T, user blob.Store)
		want      map[string]string
		gone      []string
	}{
		{"overwrite after the pack", "cold:committed", logPrefix, 1, overwrite, map[string]string{"k": "v2"}, nil},
		{"overwrite before the removal from hot", "hot:delete", "k", 1, overwrite, map[string]string{"k": "v2"}, nil},
		{"overwrite before the first read", "hot:read", "k", 1, overwrite, map[string]string{"k": "v2"}, nil},
		{"overwrite between the reads", "hot:read", "k", 2, overwrite, map[string]string{"k": "v2"}, nil},
		{"delete after the pack", "cold:committed", logPrefix, 1, remove, nil, []string{"k"}},
		{"delete before the pack lands", "cold:write", logPrefix, 1, remove, nil, []string{"k"}},
		{"delete before the first read", "hot:read", "k", 1, remove, nil, []string{"k"}},
		{"delete between the reads", "hot:read", "k", 2, remove, nil, []string{"k"}},
		{"delete before the removal from hot", "hot:delete", "k", 1, remove, nil, []string{"k"}},
		{"delete before the verify", "cold:stat", logPrefix, 1, remove, nil, []string{"k"}},
		{"no race", "none", "", 1, func(*testing.T, blob.Store) {}, map[string]string{"k": "v1"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hot, cold := memPair(t)
			user := manual(t, hot, cold)
			mustPut(t, user, "k", "v1")
			seen, fired := 0, 0
			at := func(step, key string) {
				if step != tc.step || !strings.HasPrefix(key, tc.key) {
					return
				}
				if seen++; seen == tc.nth {
					fired++
					tc.action(t, user)
				}
			}
			s := manual(t, &hooked{Store: hot, name: "hot", at: at}, &hooked{Store: cold, name: "cold", at: at})
			res := s.CompactOnce(ctxT(t))
			if res.Failed != 0 {
				t.Errorf("pass %+v failed", res)
			}
			if tc.step != "none" && fired != 1 {
				t.Fatalf("step %s of %q #%d never reached", tc.step, tc.key, tc.nth)
			}
			if tc.step == "none" && (res.Moved != 1 || len(listKeys(t, hot)) != 0) {
				t.Errorf("pass %+v, hot holds %q: want k moved", res, listKeys(t, hot))
			}
			checkModel(t, user, tc.want, tc.gone)
			// The next pass moves whatever survived.
			if res := s.CompactOnce(ctxT(t)); res.Failed != 0 {
				t.Errorf("second pass %+v", res)
			}
			checkModel(t, user, tc.want, tc.gone)
			retireGraves(t, hot, cold, aloneOpts)
			checkModel(t, user, tc.want, tc.gone)
			if left := listKeys(t, hot); len(left) != 0 {
				t.Errorf("hot still holds %q", left)
			}
			if left := markersIn(t, cold); len(left) != 0 {
				t.Errorf("cold still holds the move markers %q", left)
			}
		})
	}
}

func overwrite(t *testing.T, user blob.Store) { mustPut(t, user, "k", "v2") }

func remove(t *testing.T, user blob.Store) {
	if err := user.Delete(ctxT(t), "k", nil); err != nil {
		t.Error(err)
	}
}

// In one process a delete or a conditional write waits for a move of the same
// key to end instead of racing it.
func TestMoveRacesInOneProcess(t *testing.T) {
	for _, tc := range []struct {
		name   string
		action func(t *testing.T, s blob.Store) error
		want   map[string]string
		gone   []string
	}{
		{"delete", func(t *testing.T, s blob.Store) error { return s.Delete(ctxT(t), "k", nil) }, nil, []string{"k"}},
		{"IfNotExist", func(t *testing.T, s blob.Store) error {
			err := blob.Put(ctxT(t), s, "k", []byte("intruder"), &blob.WriterOptions{If: blob.IfNotExist()})
			if !errors.Is(err, blob.ErrExists) {
				t.Errorf("IfNotExist during a move: %v, want ErrExists", err)
			}
			return nil
		}, map[string]string{"k": "value 1"}, nil},
		{"IfGenerationMatch", func(t *testing.T, s blob.Store) error {
			a, err := s.Stat(ctxT(t), "k")
			if err != nil {
				return err
			}
			return blob.Put(ctxT(t), s, "k", []byte("v2"), &blob.WriterOptions{If: blob.IfGenerationMatch(a.Generation)})
		}, map[string]string{"k": "v2"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hot, cold := memPair(t)
			var s blob.Store
			var wg sync.WaitGroup
			var actErr error
			at := func(step, key string) {
				if step == "cold:committed" && strings.HasPrefix(key, logPrefix) {
					wg.Go(func() { actErr = tc.action(t, s) })
				}
			}
			ts := manual(t, hot, &hooked{Store: cold, name: "cold", at: at})
			s = ts
			mustPut(t, s, "k", "value 1")
			ts.CompactOnce(ctxT(t))
			wg.Wait()
			if actErr != nil {
				t.Fatal(actErr)
			}
			checkModel(t, s, tc.want, tc.gone)
			ts.CompactOnce(ctxT(t))
			checkModel(t, s, tc.want, tc.gone)
		})
	}
}
