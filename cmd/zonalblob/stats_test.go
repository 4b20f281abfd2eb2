package main

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
)

// statsOutput returns the --stats line: the last line of stderr.
func statsOutput(t *testing.T, r result) statsLine {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	var s statsLine
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("last stderr line is not the stats: %v\n%s", err, r.stderr)
	}
	return s
}

func TestStatsFlag(t *testing.T) {
	mem := url.QueryEscape("mem://")
	t.Run("mem keeps none", func(t *testing.T) {
		for _, args := range [][]string{{"--stats", "ls", "mem://"}, {"ls", "mem://", "--stats"}} {
			s := statsOutput(t, zb(t, "", args...))
			if len(s.Stores) != 1 || s.Stores[0].URL != "mem://" || s.Stores[0].Stats != nil || !strings.Contains(s.Stores[0].Note, "no stats") {
				t.Errorf("%v: %+v", args, s)
			}
		}
	})
	t.Run("tiered", func(t *testing.T) {
		u := "tiered://?hot=" + mem + "&cold=" + mem
		s := statsOutput(t, zb(t, "hi", "--stats", "put", "-q", u, "k"))
		if len(s.Stores) != 1 {
			t.Fatalf("%+v", s)
		}
		st := s.Stores[0]
		m, ok := st.Stats.(map[string]any)
		if st.Type != "tiered.Store" || !ok || m["Passes"] == nil || st.Hot == nil || st.Cold == nil || st.Note != "" {
			t.Errorf("tiered stats: %+v", st)
		}
	})
	t.Run("pooled quorum", func(t *testing.T) {
		u := "quorum://?w=2&pool_size=2&replica=" + mem + "&replica=" + mem + "&replica=" + mem
		s := statsOutput(t, zb(t, "hi", "put", "-q", u, "k", "--stats"))
		st := s.Stores[0]
		if st.Type != "pool.Creator" || st.Wraps == nil || st.Wraps.Type != "quorum.Store" || len(st.Wraps.Replicas) != 3 {
			t.Fatalf("quorum stats: %+v", st)
		}
		q, ok := st.Wraps.Stats.(map[string]any)
		if !ok || q["Writes"] != float64(1) {
			t.Errorf("quorum stats %+v: want one acknowledged write", st.Wraps.Stats)
		}
	})
	t.Run("two stores", func(t *testing.T) {
		f := fileStore(t)
		mustZB(t, "x", "put", f, "k")
		s := statsOutput(t, zb(t, "", "--stats", "cp", "-q", f, "k", "mem://", "k"))
		if len(s.Stores) != 2 || s.Stores[0].URL != f || s.Stores[1].URL != "mem://" {
			t.Errorf("%+v", s)
		}
	})
	t.Run("gcsrapid", func(t *testing.T) {
		srv := gcsrapidtest.Start(t, gcsrapidtest.Options{Seed: 1, Buckets: []gcsrapidtest.Bucket{{Name: "zone", Zonal: true}}})
		s := statsOutput(t, zb(t, "hi", "--stats", "put", "-q", "gcsrapid://zone?endpoint="+srv.Endpoint(), "k"))
		st := s.Stores[0]
		if m, ok := st.Stats.(map[string]any); st.Type != "gcsrapid.Store" || !ok || m["Writes"] == nil {
			t.Errorf("gcsrapid stats: %+v", st)
		}
	})
	t.Run("no store", func(t *testing.T) {
		s := statsOutput(t, zb(t, "", "--stats", "version"))
		if len(s.Stores) != 0 || s.Note == "" {
			t.Errorf("%+v", s)
		}
	})
	t.Run("off", func(t *testing.T) {
		if r := zb(t, "", "ls", "mem://"); r.stderr != "" {
			t.Errorf("stats without --stats: %q", r.stderr)
		}
		if r := zb(t, "", "--stats=false", "ls", "mem://"); r.stderr != "" {
			t.Errorf("stats with --stats=false: %q", r.stderr)
		}
	})
}
