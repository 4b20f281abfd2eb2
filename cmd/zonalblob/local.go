package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// openLocalFile opens a local file to read, refusing a directory with a hint.
func openLocalFile(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, usagef("%s is a directory: copy a directory with cp -r %s STORE PREFIX/", path, path)
	}
	return os.Open(path)
}

// interruptible returns r, made to fail at once when ctx ends if r is a file
// whose reads can block (a terminal, a pipe, a FIFO): such a read would
// otherwise outlive Ctrl-C.
func interruptible(ctx context.Context, r io.Reader) io.Reader {
	f, ok := r.(*os.File)
	if !ok {
		return r
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		return f
	}
	if err := f.SetReadDeadline(time.Time{}); err == nil {
		stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
		return &stopOnEOF{r: f, stop: stop}
	}
	// A blocking descriptor (standard input from a pipe or a terminal) has
	// no deadline: read it from a goroutine, so that the copy can give up
	// when ctx ends while that read still waits.
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, f)
		pw.CloseWithError(err)
	}()
	context.AfterFunc(ctx, func() { pr.CloseWithError(context.Cause(ctx)) })
	return pr
}

type stopOnEOF struct {
	r    io.Reader
	stop func() bool
}

func (s *stopOnEOF) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil {
		s.stop()
	}
	return n, err
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// tally counts a command's objects and bytes, from many goroutines.
type tally struct {
	objects atomic.Int64
	bytes   atomic.Int64
}

// summary is the line a command ends with on stderr: "copied 7 objects,
// 1234 bytes (1.2 KiB) in 0.3s".
func summary(verb string, objects int, bytes int64, elapsed time.Duration) string {
	s := fmt.Sprintf("%s %s", verb, plural(objects, "object"))
	if bytes >= 0 {
		s += ", " + byteCount(bytes)
	}
	return fmt.Sprintf("%s in %.1fs", s, elapsed.Seconds())
}

// shortArg keeps an argument quoted in a message readable however long it is.
func shortArg(s string) string {
	if len(s) <= 64 {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:48], len(s))
}
