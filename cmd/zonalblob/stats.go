package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered"
)

// statsLine is what --stats prints on stderr at exit, as one JSON line:
// every store the command opened, in the order it opened them.
type statsLine struct {
	Stores []storeStats `json:"stores"`
	Note   string       `json:"note,omitempty"`
}

// storeStats is one opened store: its URL (credentials redacted) and the
// stats of each layer of it.
type storeStats struct {
	URL string `json:"url"`
	statsNode
	Note string `json:"note,omitempty"`
}

// statsNode is one layer of a store: its Go type, its Stats() if it has
// any, and the stores it is made of: the store a wrapper wraps (pool's
// Creator in front of a quorum, a wrapper's Unwrap), a tiered store's hot and
// cold tiers, a quorum's replicas.
type statsNode struct {
	Type     string      `json:"type"`
	Stats    any         `json:"stats,omitempty"`
	Wraps    *statsNode  `json:"wraps,omitempty"`
	Hot      *statsNode  `json:"hot,omitempty"`
	Cold     *statsNode  `json:"cold,omitempty"`
	Replicas []statsNode `json:"replicas,omitempty"`
}

// maxStatsDepth bounds the walk down a store's layers.
const maxStatsDepth = 8

// statsOf walks st's layers. found says whether any layer had stats.
func statsOf(st blob.Store, depth int) (n statsNode, found bool) {
	n.Type = strings.TrimPrefix(fmt.Sprintf("%T", st), "*")
	if depth >= maxStatsDepth {
		return n, false
	}
	// The stores that keep stats: each has a Stats method of its own type.
	switch s := st.(type) {
	case *gcsrapid.Store:
		n.Stats = s.Stats()
	case *quorum.Store:
		n.Stats = s.Stats()
	case *tiered.Store:
		n.Stats = s.Stats()
	case *pool.Creator:
		n.Stats = s.Stats()
	}
	found = n.Stats != nil
	child := func(inner blob.Store) *statsNode {
		c, f := statsOf(inner, depth+1)
		found = found || f
		return &c
	}
	var inner blob.Store
	switch s := st.(type) {
	case *pool.Creator:
		inner = s.Store
	case interface{ Unwrap() blob.Store }:
		inner = s.Unwrap()
	}
	if inner != nil {
		n.Wraps = child(inner)
	}
	if t, ok := st.(interface{ Hot() blob.Store }); ok {
		n.Hot = child(t.Hot())
	}
	if t, ok := st.(interface{ Cold() blob.Store }); ok {
		n.Cold = child(t.Cold())
	}
	if q, ok := st.(interface{ Replicas() []blob.Store }); ok {
		for _, r := range q.Replicas() {
			n.Replicas = append(n.Replicas, *child(r))
		}
	}
	return n, found
}

// writeStats prints the stats of the stores in o, after the command has
// closed them: what they counted over the whole command.
func writeStats(w io.Writer, o *openedStores) {
	line := statsLine{Stores: []storeStats{}}
	for _, s := range o.list() {
		n, found := statsOf(s.st, 0)
		ss := storeStats{URL: blob.Redact(s.url), statsNode: n}
		if !found {
			ss.Note = "no stats: no layer of this store keeps any"
		}
		line.Stores = append(line.Stores, ss)
	}
	if len(line.Stores) == 0 {
		line.Note = "no stats: the command opened no store"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // URLs keep their "&"
	if err := enc.Encode(line); err != nil {
		fmt.Fprintf(w, "zonalblob: --stats: %v\n", err)
		return
	}
	w.Write(b.Bytes())
}
