package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Drawing a bar for a copy that ends at once would only flicker, so the bar
// appears once a transfer has run this long.
const (
	progressDelay    = 500 * time.Millisecond
	progressInterval = 200 * time.Millisecond
	progressBarWidth = 24
)

// progress draws a one-line progress bar for a transfer of total bytes: bytes
// done, percentage and rate. Add is safe from many goroutines; drawing happens
// in tick and finish, which take the time so that tests can fake the clock.
type progress struct {
	w     io.Writer
	start time.Time
	total atomic.Int64 // <= 0: unknown
	done  atomic.Int64

	objects, objectsDone atomic.Int64 // objects == 0: not counted

	mu      sync.Mutex
	shown   bool
	lastLen int
}

func newProgress(w io.Writer, total int64, start time.Time) *progress {
	p := &progress{w: w, start: start}
	p.total.Store(total)
	return p
}

func (p *progress) Add(n int64)          { p.done.Add(n) }
func (p *progress) SetTotal(total int64) { p.total.Store(total) }
func (p *progress) SetObjects(n int)     { p.objects.Store(int64(n)) }
func (p *progress) AddObject()           { p.objectsDone.Add(1) }

// tick redraws the bar as of now, once the transfer has run for progressDelay.
func (p *progress) tick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.start) < progressDelay {
		return
	}
	p.draw(now)
	p.shown = true
}

// finish draws the final state and ends the line if the transfer lasted
// progressDelay or more: a fast transfer leaves stderr untouched.
func (p *progress) finish(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.shown && now.Sub(p.start) < progressDelay {
		return
	}
	p.draw(now)
	fmt.Fprintln(p.w)
	p.shown = false
}

func (p *progress) draw(now time.Time) {
	line := p.line(now)
	// Carriage return redraws in place; spaces erase a longer previous line
	// without terminal escapes, which would be noise in a forced log file.
	pad := max(p.lastLen-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.lastLen = len(line)
}

// line renders "[=====>     ]  42%  3/7 objects  1.5 MiB / 3.5 MiB  750.0 KiB/s".
func (p *progress) line(now time.Time) string {
	done, total := p.done.Load(), p.total.Load()
	var b strings.Builder
	objects := ""
	if n := p.objects.Load(); n > 0 {
		objects = fmt.Sprintf("  %d/%d objects", p.objectsDone.Load(), n)
	}
	if total > 0 {
		frac := min(float64(done)/float64(total), 1)
		filled := int(frac * progressBarWidth)
		b.WriteByte('[')
		b.WriteString(strings.Repeat("=", filled))
		if filled < progressBarWidth {
			b.WriteByte('>')
			b.WriteString(strings.Repeat(" ", progressBarWidth-filled-1))
		}
		fmt.Fprintf(&b, "] %3d%%%s  %s / %s", int(frac*100), objects, formatBytes(done), formatBytes(total))
	} else {
		b.WriteString(strings.TrimPrefix(objects+"  ", "  "))
		b.WriteString(formatBytes(done))
	}
	if secs := now.Sub(p.start).Seconds(); secs > 0 {
		fmt.Fprintf(&b, "  %s/s", formatBytes(int64(float64(done)/secs)))
	}
	return b.String()
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[i])
}

// run redraws the bar on the real clock until stop is called; stop draws the
// final state.
func (p *progress) run() (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				p.tick(now)
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		p.finish(time.Now())
	}
}

// isTerminal reports whether w is a terminal, where a redrawn line makes sense.
func isTerminal(w io.Writer) bool {
	f, ok := underlying(w).(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// autoBool is a boolean flag that also knows whether it was given, so that
// "--progress" forces the bar, "--progress=false" suppresses it and no flag
// leaves the choice to isTerminal.
type autoBool struct{ set, value bool }

func (b *autoBool) IsBoolFlag() bool { return true }
func (b *autoBool) String() string {
	if b == nil || !b.set {
		return "auto"
	}
	return strconv.FormatBool(b.value)
}

func (b *autoBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.set, b.value = true, v
	return nil
}

func (b *autoBool) resolve(auto bool) bool {
	if b.set {
		return b.value
	}
	return auto
}
