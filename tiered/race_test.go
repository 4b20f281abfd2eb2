package tiered_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/tiered"
)

// Each case lets another process (a second tiered store over the same tiers,
// which shares no lock with the compactor) act on the object at one exact
// point of a move, then checks what the user sees and what cold holds.
func TestMoveRacesWithAnotherProcess(t *testing.T) {
	cases := []struct {
		name   string
		step   string // the hooked call the action runs before (or after, for committed)
		action func(t *testing.T, user blob.Store)
		want   map[string]string
		gone   []string
		// coldAfterPass is what cold holds for k right after the racing pass
		// ("" for nothing).
		coldAfterPass string
	}{
		{"overwrite after the copy", "cold:committed", overwrite, map[string]string{"k": "v2"}, nil, ""},
		{"overwrite before the hot delete", "hot:delete", overwrite, map[string]string{"k": "v2"}, nil, ""},
		{"overwrite before the read", "hot:read", overwrite, map[string]string{"k": "v2"}, nil, ""},
		{"delete after the copy", "cold:committed", remove, nil, []string{"k"}, ""},
		{"delete before the copy lands", "cold:write", remove, nil, []string{"k"}, ""},
		{"delete before the read", "hot:read", remove, nil, []string{"k"}, ""},
		{"delete before the hot delete", "hot:delete", remove, nil, []string{"k"}, ""},
		{"delete before the verify", "cold:stat", remove, nil, []string{"k"}, ""},
		{"no race", "none", func(*testing.T, blob.Store) {}, map[string]string{"k": "v1"}, nil, "v1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hot, cold := memPair(t)
			user := manual(t, hot, cold)
			mustPut(t, user, "k", "v1")
			fired := 0
			at := func(step, key string) {
				if step == tc.step && fired == 0 {
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
				t.Fatalf("step %s never reached", tc.step)
			}
			checkModel(t, user, tc.want, tc.gone)
			got, err := blob.ReadAll(ctxT(t), cold, "k")
			if tc.coldAfterPass == "" && !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("cold holds %q, %v after the pass; want no copy (stale or resurrected)", got, err)
			}
			if tc.coldAfterPass != "" && string(got) != tc.coldAfterPass {
				t.Errorf("cold holds %q, %v; want %q", got, err, tc.coldAfterPass)
			}
			// The next pass moves whatever survived.
			if res := s.CompactOnce(ctxT(t)); res.Failed != 0 {
				t.Errorf("second pass %+v", res)
			}
			retireGraves(t, hot, cold, tiered.Options{PackMaxObjects: -1})
			checkModel(t, user, tc.want, tc.gone)
			if left := listKeys(t, hot); len(left) != 0 {
				t.Errorf("hot still holds %q", left)
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
		}, map[string]string{"k": "v1"}, nil},
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
				if step == "cold:committed" {
					wg.Go(func() { actErr = tc.action(t, s) })
				}
			}
			ts := manual(t, hot, &hooked{Store: cold, name: "cold", at: at})
			s = ts
			mustPut(t, s, "k", "v1")
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
