package tiered

import (
	"bytes"
	"context"
	"hash"
	"hash/crc32"
	"io"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"github.com/zonalblob/zonalblob/tiered/internal/packlog"
)

// wholeEntryRead: a range read of a checksummed entry up to this size reads
// the whole entry, to verify it; of a larger one, only its length is.
const wholeEntryRead = 4 << 20

// readPacked reads a range of a packed object: one ranged read of its pack.
// What it serves is verified: the length of every read, and the entry's
// CRC32C for a read of the whole entry (checked at its end, before io.EOF)
// or of part of an entry of up to wholeEntryRead bytes (the whole entry is
// read). Bytes that do not verify are ErrCorrupt, naming the key and pack.
func (s *Store) readPacked(ctx context.Context, p packlog.Packed, offset, length int64) (blob.Reader, error) {
	e := p.Entry
	if offset < 0 {
		return nil, blob.Errorf(driver.OpRead, e.Key, blob.ErrInvalidArgument, "negative offset %d", offset)
	}
	n := max(e.Len-offset, 0)
	if length >= 0 {
		n = min(n, length)
	}
	a := *e.Attrs
	if end := p.Pack.Base + e.Off + e.Len; end > p.Pack.Size {
		return nil, s.corruptEntry(p, "ends at byte %d of a %d-byte pack", end, p.Pack.Size)
	}
	if n == 0 {
		return &packedReader{r: io.NopCloser(bytes.NewReader(nil)), attrs: &a}, nil
	}
	at := p.Pack.Base + e.Off
	switch {
	case p.Pack.Checked && offset == 0 && n == e.Len:
		r, err := s.cold.NewRangeReader(ctx, p.Pack.Name, at, n)
		if err != nil {
			return nil, err
		}
		return &packedReader{r: &verifier{s: s, r: r, p: p, want: n, crc: crc32.New(packlog.Castagnoli)}, attrs: &a}, nil
	case p.Pack.Checked && e.Len <= wholeEntryRead:
		b, err := blob.ReadRange(ctx, s.cold, p.Pack.Name, at, e.Len)
		if err != nil {
			return nil, err
		}
		if int64(len(b)) != e.Len {
			return nil, s.corruptEntry(p, "read %d of its %d bytes", len(b), e.Len)
		}
		if crc32.Checksum(b, packlog.Castagnoli) != e.CRC {
			return nil, s.corruptEntry(p, "checksum mismatch")
		}
		return &packedReader{r: io.NopCloser(bytes.NewReader(b[min(offset, e.Len) : min(offset, e.Len)+n])), attrs: &a}, nil
	}
	r, err := s.cold.NewRangeReader(ctx, p.Pack.Name, at+offset, n)
	if err != nil {
		return nil, err
	}
	return &packedReader{r: &verifier{s: s, r: r, p: p, want: n}, attrs: &a}, nil
}

// corruptEntry is the error of a packed entry whose bytes do not verify.
func (s *Store) corruptEntry(p packlog.Packed, format string, args ...any) error {
	s.stats.corruptReads.Add(1)
	return blob.Errorf(driver.OpRead, p.Entry.Key, blob.ErrCorrupt, "tiered: %q in pack %s: "+format, append([]any{p.Entry.Key, p.Pack.Name}, args...)...)
}

// verifier checks, before it reports the end of a packed read, that it
// served want bytes and, if crc is set, that they have the entry's CRC32C.
type verifier struct {
	s    *Store
	r    io.ReadCloser
	p    packlog.Packed
	want int64
	got  int64
	crc  hash.Hash32
	err  error
}

func (v *verifier) Read(b []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(b)
	v.got += int64(n)
	if v.crc != nil {
		v.crc.Write(b[:n])
	}
	switch {
	case v.got > v.want:
		v.err = v.s.corruptEntry(v.p, "read more than its %d bytes", v.want)
	case err == io.EOF && v.got < v.want:
		v.err = v.s.corruptEntry(v.p, "read %d of %d bytes", v.got, v.want)
	case err == io.EOF && v.crc != nil && v.crc.Sum32() != v.p.Entry.CRC:
		v.err = v.s.corruptEntry(v.p, "checksum mismatch")
	default:
		return n, err
	}
	return 0, v.err
}

func (v *verifier) Close() error { return v.r.Close() }

// packedReader shows a pack's range as the object it holds.
type packedReader struct {
	r     io.ReadCloser
	attrs *blob.Attributes
}

func (r *packedReader) Read(p []byte) (int, error) { return r.r.Read(p) }

func (r *packedReader) Close() error { return r.r.Close() }

func (r *packedReader) Attributes() *blob.Attributes { return r.attrs }
