package quorum

import (
	"testing"

	"github.com/zonalblob/zonalblob/blob"
)

// FuzzParseState: no replica state, however damaged, panics the parser or
// parses into a state with a token that is not one; what does not parse is
// damaged, never absent or a value.
func FuzzParseState(f *testing.F) {
	tok := "18ed82d3c4104aaae050f686"
	f.Add(tok, tok, tok, tok+" "+tok, "", "0123abcd")
	f.Add(tok, "", "", "", "deleted", "")
	f.Add("", "", tok, "", "empty", "")
	f.Add("zz", "7fffffffffffffff00000000", "garbage", "x y", "maybe", "xyz")
	f.Fuzz(func(t *testing.T, ver, acc, prom, chain, state, sum string) {
		md := map[string]string{}
		for k, v := range map[string]string{VersionKey: ver, BallotKey: acc, PromiseKey: prom, ChainKey: chain, StateKey: state, ChecksumKey: sum} {
			if v != "" {
				md[k] = v
			}
		}
		x := parseState(&replica{idx: 1}, &blob.Attributes{Size: 3, Generation: "g", Metadata: md}, nil)
		if x.damaged {
			if x.ok() || x.attrs == nil {
				t.Fatalf("damaged state %+v reads as answered, or lost its attributes", x)
			}
			return
		}
		if !x.ok() {
			t.Fatalf("undamaged state with an error: %v", x.err)
		}
		for _, tk := range append([]string{x.ver, x.acc, x.prom}, x.chain...) {
			if tk != "" && !validToken(tk) {
				t.Fatalf("parsed an invalid token %q", tk)
			}
		}
		if x.kind != empty && x.ver == "" {
			t.Fatalf("a value or tombstone without a version: %+v", x)
		}
	})
}
