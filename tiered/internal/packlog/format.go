package packlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// A pack is a header, its index (JSON), then the objects' bytes one after
// another. The header is packMagic, the index's length in 11 decimal
// digits, a space, the index's CRC32C in 8 hex digits, and a newline (29
// bytes). Packs written before checksums (packMagicV1, a 20-byte header
// without the CRC) are still read, their entries unverified.
const (
	packMagic      = "zbpack2 "
	packHeaderSize = 29
	packMagicV1    = "zbpack1 "
	packHeaderV1   = 20
	// indexPeek is what a first read of a pack asks for: the header and, for
	// packs of up to a few thousand objects, the whole index.
	indexPeek = 1 << 20
	// maxIndexLen bounds the index length a header may claim: a damaged
	// header must not make a reader allocate what it says.
	maxIndexLen = 1 << 30
)

// Castagnoli is the table of the log's checksums (CRC32C): of a pack's
// index and entries, of a tombstone, of the inventory.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Entry is one object in a pack: where its bytes are (Off from the start
// of the pack's data) and the attributes it had in hot, Generation included:
// the generation it was moved at, which users keep seeing.
type Entry struct {
	Key   string           `json:"k"`
	Off   int64            `json:"o"`
	Len   int64            `json:"n"`
	Attrs *blob.Attributes `json:"a"`
	// CRC is the CRC32C of the entry's bytes (set by the move), which
	// every read of the entry verifies; absent from packs written before
	// checksums.
	CRC uint32 `json:"c,omitempty"`
}

// Version names a version of a key: the key and its generation. In a
// pack's Kills and in a tombstone it is a kill: a version that no pack may
// serve any more (it was deleted, or overwritten and moved again). Kills are
// by generation, whatever pack holds the version, so a copy made by a pack
// rewrite is killed as well as the original.
type Version struct {
	Key string `json:"k"`
	Gen string `json:"g"`
}

// Index is a pack's index: its entries, and the older versions of their
// keys that the pack supersedes.
type Index struct {
	Entries []Entry   `json:"entries"`
	Kills   []Version `json:"kills,omitempty"`
	// DataBytes is the size of all entries' bytes.
	DataBytes int64 `json:"data_bytes"`
}

// Head lays out what comes before a pack's data: the header and the
// index, whose entries carry their CRCs and whose DataBytes is set. A pack
// whose data is streamed (a pack of one object larger than PackMaxBytes)
// is its head, then those bytes.
func Head(idx *Index) ([]byte, error) {
	js, err := json.Marshal(idx)
	if err != nil {
		return nil, err
	}
	hdr := fmt.Sprintf("%s%011d %08x\n", packMagic, len(js), crc32.Checksum(js, Castagnoli))
	return append([]byte(hdr), js...), nil
}

// packHeader is a pack's parsed header.
type packHeader struct {
	size    int   // of the header
	n       int   // of the index
	crc     int64 // of the index; -1 for a pack without checksums
	checked bool  // its entries carry CRCs
}

// parsePackHeader parses the header at the start of head.
func parsePackHeader(head []byte) (packHeader, error) {
	digits := func(b []byte, base int) (int64, bool) {
		v, err := strconv.ParseInt(string(b), base, 64)
		for _, c := range b {
			if !(c >= '0' && c <= '9' || base == 16 && c >= 'a' && c <= 'f') {
				return 0, false
			}
		}
		return v, err == nil
	}
	switch {
	case len(head) >= packHeaderSize && bytes.HasPrefix(head, []byte(packMagic)) &&
		head[19] == ' ' && head[packHeaderSize-1] == '\n':
		n, ok1 := digits(head[8:19], 10)
		crc, ok2 := digits(head[20:28], 16)
		if ok1 && ok2 {
			return packHeader{size: packHeaderSize, n: int(n), crc: crc, checked: true}, nil
		}
	case len(head) >= packHeaderV1 && bytes.HasPrefix(head, []byte(packMagicV1)) && head[packHeaderV1-1] == '\n':
		if n, ok := digits(head[8:19], 10); ok {
			return packHeader{size: packHeaderV1, n: int(n), crc: -1}, nil
		}
	}
	return packHeader{}, errors.New("malformed pack header")
}

// validate checks what a pack's index says against itself: every entry
// names a key, a generation and a range within the pack's data, and every
// kill a key and a generation. It refuses what would otherwise panic or
// serve bytes from outside an entry.
func (idx *Index) validate() error {
	if idx.DataBytes < 0 {
		return fmt.Errorf("negative data size %d", idx.DataBytes)
	}
	for i, e := range idx.Entries {
		switch {
		case blob.ValidateKey(driver.OpRead, e.Key) != nil:
			return fmt.Errorf("entry %d: bad key %q", i, e.Key)
		case e.Attrs == nil || e.Attrs.Generation == "":
			return fmt.Errorf("entry %d (%q): no attributes or generation", i, e.Key)
		case e.Off < 0 || e.Len < 0 || e.Off > idx.DataBytes || e.Len > idx.DataBytes-e.Off:
			return fmt.Errorf("entry %d (%q): range %d+%d outside %d data bytes", i, e.Key, e.Off, e.Len, idx.DataBytes)
		}
	}
	for i, k := range idx.Kills {
		if k.Key == "" || k.Gen == "" {
			return fmt.Errorf("kill %d: no key or generation", i)
		}
	}
	return nil
}

// dataStart is where a pack's data begins, given its header and index.
func dataStart(h packHeader) int64 { return int64(h.size + h.n) }

// ReadIndex reads the header and index of a pack, and checks them: a
// pack that does not parse or verify is ErrCorrupt, naming it.
func ReadIndex(ctx context.Context, cold blob.Store, name string) (*LoadedPack, error) {
	r, err := cold.NewRangeReader(ctx, name, 0, indexPeek)
	if err != nil {
		return nil, err
	}
	head, err := io.ReadAll(r)
	size := r.Attributes().Size
	r.Close()
	if err != nil {
		return nil, err
	}
	corrupt := func(format string, args ...any) error {
		return blob.Errorf(driver.OpRead, name, blob.ErrCorrupt, "tiered: pack "+name+": "+format, args...)
	}
	h, err := parsePackHeader(head)
	if err != nil {
		return nil, corrupt("%v", err)
	}
	if h.n > maxIndexLen || int64(h.size+h.n) > size {
		return nil, corrupt("header claims a %d-byte index in a %d-byte pack", h.n, size)
	}
	js := head[h.size:]
	if len(js) < h.n {
		rest, err := blob.ReadRange(ctx, cold, name, int64(len(head)), int64(h.n-len(js)))
		if err != nil {
			return nil, err
		}
		js = append(js, rest...)
	}
	if len(js) < h.n {
		return nil, corrupt("index truncated: %d of %d bytes", len(js), h.n)
	}
	js = js[:h.n]
	if h.crc >= 0 && int64(crc32.Checksum(js, Castagnoli)) != h.crc {
		return nil, corrupt("index checksum mismatch")
	}
	var idx Index
	if err := json.Unmarshal(js, &idx); err != nil {
		return nil, corrupt("malformed index: %v", err)
	}
	if err := idx.validate(); err != nil {
		return nil, corrupt("%v", err)
	}
	lp := newLoadedPack(name, &idx, dataStart(h), size, int64(h.n))
	lp.Checked = h.checked
	return lp, nil
}

// tombCRCKey is the metadata of a tombstone that holds its CRC32C.
const tombCRCKey = "zonalblob-tiered-crc"

// EncodeTombstone returns the body of a tombstone of the kills ks and its
// metadata: the range of keys it kills, and its CRC32C.
func EncodeTombstone(ks []Version) (body []byte, md map[string]string, err error) {
	b, err := json.Marshal(ks)
	if err != nil {
		return nil, nil, err
	}
	keys := make([]string, len(ks))
	for i, k := range ks {
		keys[i] = k.Key
	}
	md = Metadata(keys)
	if md == nil {
		md = map[string]string{}
	}
	md[tombCRCKey] = fmt.Sprintf("%08x", crc32.Checksum(b, Castagnoli))
	return b, md, nil
}

// readTombstone reads and checks a tombstone: its CRC32C if its writer gave
// one, and every kill naming a key and a generation; ErrCorrupt otherwise.
func readTombstone(ctx context.Context, cold blob.Store, name string) ([]Version, error) {
	// Readers of some stores carry no metadata: the CRC comes from a Stat
	// (a tombstone's bytes never change under its name).
	a, err := cold.Stat(ctx, name)
	if err != nil {
		return nil, err
	}
	md := a.Metadata
	b, err := blob.ReadAll(ctx, cold, name)
	if err != nil {
		return nil, err
	}
	corrupt := func(format string, args ...any) error {
		return blob.Errorf(driver.OpRead, name, blob.ErrCorrupt, "tiered: tombstone "+name+": "+format, args...)
	}
	if v, ok := md[tombCRCKey]; ok && v != fmt.Sprintf("%08x", crc32.Checksum(b, Castagnoli)) {
		return nil, corrupt("checksum mismatch")
	}
	var ks []Version
	if err := json.Unmarshal(b, &ks); err != nil {
		return nil, corrupt("malformed: %v", err)
	}
	for i, k := range ks {
		if k.Key == "" || k.Gen == "" {
			return nil, corrupt("kill %d names no key or generation", i)
		}
	}
	return ks, nil
}
