package quorum

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime"
)

// spillBytes is how much of a version's bytes a body keeps in memory; past
// it the bytes go to an unlinked temporary file, so that writing, promising
// over or settling a large object costs O(spillBytes) of heap, not
// O(object), however many replicas it is sent to.
const spillBytes = 8 << 20

// body is the bytes of a version: written once (by a Writer or a replica
// read), then read any number of times, concurrently, by the replica writes
// that accept or repair it. The stragglers of a write outlive its Close, so
// the file is closed when the last reference to the body goes, not by a
// caller.
type body struct {
	mem  []byte
	file *os.File
	size int64
	crc  uint32 // CRC32C of the bytes
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// bodyOf returns a body holding b (not copied).
func bodyOf(b []byte) *body {
	return &body{mem: b, size: int64(len(b)), crc: crc32.Checksum(b, castagnoli)}
}

// checksum is the body's CRC32C as ChecksumKey records it.
func (b *body) checksum() string { return fmt.Sprintf("%08x", b.crc) }

// spool collects bytes into a body, in memory up to spillBytes and in a
// temporary file beyond.
type spool struct {
	b   *body
	buf bytes.Buffer
	err error
}

func (sp *spool) Write(p []byte) (int, error) {
	if sp.err != nil {
		return 0, sp.err
	}
	if sp.b == nil {
		sp.b = &body{}
	}
	if sp.b.file == nil && sp.buf.Len()+len(p) > spillBytes {
		f, err := os.CreateTemp("", "zonalblob-quorum-*")
		if err != nil {
			sp.err = err
			return 0, err
		}
		// Unlinked at once: nothing is left behind by a crash, and the
		// descriptor keeps the bytes until the body is unreachable.
		os.Remove(f.Name())
		runtime.AddCleanup(sp.b, func(f *os.File) { f.Close() }, f)
		sp.b.file = f
		if _, err := f.Write(sp.buf.Bytes()); err != nil {
			sp.err = err
			return 0, err
		}
		sp.buf = bytes.Buffer{}
	}
	var n int
	var err error
	if sp.b.file != nil {
		n, err = sp.b.file.Write(p)
	} else {
		n, err = sp.buf.Write(p)
	}
	sp.b.size += int64(n)
	sp.b.crc = crc32.Update(sp.b.crc, castagnoli, p[:n])
	if err != nil {
		sp.err = err
	}
	return n, err
}

// body returns what was written.
func (sp *spool) body() *body {
	if sp.b == nil {
		return bodyOf(nil)
	}
	if sp.b.file == nil {
		sp.b.mem = sp.buf.Bytes()
	}
	return sp.b
}

// readBody reads r whole into a body.
func readBody(r io.Reader) (*body, error) {
	var sp spool
	if _, err := io.Copy(&sp, r); err != nil {
		return nil, err
	}
	return sp.body(), nil
}

// reader returns a reader of the bytes from offset, length bytes (length < 0:
// to the end). Readers are independent of each other.
func (b *body) reader(offset, length int64) io.Reader {
	offset = min(max(offset, 0), b.size)
	end := b.size
	if length >= 0 && offset+length < end {
		end = offset + length
	}
	if b.file == nil {
		return bytes.NewReader(b.mem[offset:end])
	}
	return &keepAlive{io.NewSectionReader(b.file, offset, end-offset), b}
}

// keepAlive keeps a body (and so its file) reachable while a reader of it is.
type keepAlive struct {
	io.Reader
	b *body
}

// bytes returns the whole body in memory.
func (b *body) bytes() ([]byte, error) {
	if b.file == nil {
		return b.mem, nil
	}
	return io.ReadAll(b.reader(0, -1))
}
