// Command zonalblob lists, reads, writes, copies and deletes objects in any
// store that package blob can open by URL.
//
// Run "zonalblob help" for the commands, URL forms and exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/zonalblob/zonalblob/blob"
)

// Exit codes, documented in the top-level help.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitNotFound = 3
	// exitInterrupted is 128 + SIGINT, as shells report a command that
	// Ctrl-C stopped (SIGTERM gives 128 + 15).
	exitInterrupted = 130
)

func main() {
	// Interrupting a write cancels its context, so nothing half-written is
	// committed. A second signal ends the process at once.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		signal.Stop(sigs)
		cancel(interrupted{sig})
	}()
	// Libraries log through the standard logger (gcsrapid says how it
	// connects); no credential from the command line reaches stderr that way
	// either.
	stderr := redactWriter{w: os.Stderr, secrets: argSecrets(os.Args[1:])}
	log.SetOutput(stderr)
	// Standard output carries a command's result and nothing else (ls --json
	// | jq), but a library may print there: gocloud's gcsblob warns with
	// fmt.Printf when it finds no credentials. So os.Stdout, where fmt.Print
	// writes, becomes a pipe to stderr, and commands get the real stdout.
	stdout := os.Stdout
	flushStray := divertStdout(stderr)
	code := runContext(ctx, os.Args[1:], os.Stdin, stdout, os.Stderr)
	cancel(nil)
	flushStray()
	os.Exit(code)
}

// divertStdout makes os.Stdout a pipe whose every write is copied to w, as
// a line of its own (a library's message need not end in a newline), and
// returns a function that waits until all of it has been. If no pipe can be
// made, os.Stdout becomes os.Stderr.
func divertStdout(w io.Writer) (flush func()) {
	r, pw, err := os.Pipe()
	if err != nil {
		os.Stdout = os.Stderr
		return func() {}
	}
	os.Stdout = pw
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				line := buf[:n:n]
				if line[n-1] != '\n' {
					line = append(line, '\n')
				}
				w.Write(line)
			}
			if err != nil {
				return
			}
		}
	}()
	return func() {
		pw.Close()
		<-done
	}
}

// interrupted is the cause of a command's context when a signal stopped it.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted" }

// exitCode is 128 + the signal's number.
func (i interrupted) exitCode() int {
	if s, ok := i.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitInterrupted
}

// run executes one command line (without the program name) and returns the
// process exit code. Tests call it in-process.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// streams are a command's standard files.
type streams struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	args           []string // the whole command line, for redaction
	stats          bool     // --stats before the command name
}

// command is one subcommand.
type command struct {
	name     string
	synopsis string // the arguments after the name, as in "STORE KEY"
	summary  string // one line for the command list
	details  string // what it does, notes and examples, for --help
	// minArgs and maxArgs bound the positional arguments; maxArgs < 0: unbounded.
	minArgs, maxArgs int
	// checkForms, if set, checks the positional arguments beyond their count
	// (cp's ends), as the action will: a suggested command line must pass it.
	checkForms func(pos []string) error
	// setup defines the command's flags on fs and returns the action to run
	// once they are parsed. Flag values live in the closure, so every run
	// starts from fresh defaults.
	setup func(fs *flag.FlagSet) action
}

type action func(ctx context.Context, s streams, args []string) error

// commands returns the command table, in the order help lists it.
func commands() []*command {
	return []*command{
		lsCommand(),
		statCommand(),
		catCommand(),
		putCommand(),
		cpCommand(),
		mvCommand(),
		rmCommand(),
		duCommand(),
		benchCommand(),
		serveCommand(),
		versionCommand(),
	}
}

func findCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Whatever a command prints on stderr (its errors, usage errors quoting an
	// argument, a driver's message), no credential from its URL arguments
	// reaches the terminal. Stdout carries data and is left as is.
	stderr = redactWriter{w: stderr, secrets: argSecrets(args)}
	s := streams{stdin: stdin, stdout: stdout, stderr: stderr, args: args}
	// Global flags come before the command's name.
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		v, ok := globalStats(args[0])
		if !ok {
			break
		}
		s.stats, args = v, args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "zonalblob: no command given\n\n")
		writeUsage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			c := findCommand(args[1])
			if c == nil {
				fmt.Fprintf(stderr, "zonalblob: help: unknown command %q\n\n", args[1])
				writeUsage(stderr)
				return exitUsage
			}
			writeCommandHelp(stdout, c)
			return exitOK
		}
		writeUsage(stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	c := findCommand(name)
	if c == nil {
		hint := ""
		if near := nearestCommand(name); near != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", near)
		}
		fmt.Fprintf(stderr, "zonalblob: unknown command %q%s; run 'zonalblob help' for the list of commands\n", name, hint)
		return exitUsage
	}
	return c.run(ctx, s, args[1:])
}

// nearestCommand returns the command name closest to name, if it is close:
// one edit away, or two for longer names.
func nearestCommand(name string) string {
	best, bestD := "", 3
	for _, c := range commands() {
		d := editDistance(strings.ToLower(name), c.name)
		close := d <= max(1, len(c.name)/2) || d <= 2 && strings.HasPrefix(strings.ToLower(name), c.name)
		if d < bestD && close {
			best, bestD = c.name, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// globalStats reads arg as the global flag --stats (-stats, --stats=BOOL).
func globalStats(arg string) (value, ok bool) {
	name, v, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-"), "=")
	if name != "stats" {
		return false, false
	}
	if !hasValue {
		return true, true
	}
	b, err := strconv.ParseBool(v)
	return b, err == nil
}

func (c *command) run(ctx context.Context, s streams, args []string) int {
	fs := c.flagSet(&s.stats)
	act := c.setup(fs)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		writeCommandHelp(s.stdout, c)
		return exitOK
	}
	hint := ""
	if err == nil {
		if err = c.checkArgs(pos); err != nil {
			hint = c.gluedKeyHint(pos)
		}
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "zonalblob: %s: %v\n%susage: zonalblob %s %s\nRun 'zonalblob %s --help' for details.\n", c.name, err, hint, c.name, c.synopsis, c.name)
		return exitUsage
	}
	var opened *openedStores
	if s.stats {
		ctx, opened = withOpenedStores(ctx)
	}
	code := c.act(ctx, s, act, pos)
	if opened != nil {
		writeStats(s.stderr, opened)
	}
	return code
}

// act runs the action and reports its error.
func (c *command) act(ctx context.Context, s streams, act action, pos []string) int {
	err := act(ctx, s, pos)
	var intr interrupted
	if err != nil && errors.As(context.Cause(ctx), &intr) {
		// Whatever the action made of its cancelled context, say that the
		// user stopped it, and how far it got.
		msg := "interrupted"
		var p *partial
		if errors.As(err, &p) {
			msg = p.Error()
		}
		fmt.Fprintf(s.stderr, "zonalblob: %s\n", msg)
		return intr.exitCode()
	}
	if err != nil {
		for line := range strings.Lines(err.Error()) {
			fmt.Fprintf(s.stderr, "zonalblob: %s", strings.TrimSuffix(line, "\n")+"\n")
		}
		code := exitCode(err)
		if code == exitUsage {
			fmt.Fprint(s.stderr, c.gluedKeyHint(pos))
		}
		return code
	}
	return exitOK
}

// gluedKeyHint is a line for a usage error of a command line in which a
// store URL has its key glued on ("cat gs://b/k"), if splitting it gives
// arguments of the right form: "zonalblob: cat takes STORE KEY as two
// arguments: zonalblob cat gs://b k". Otherwise it is "".
func (c *command) gluedKeyHint(pos []string) string {
	for i, a := range pos {
		store, key, ok := gluedKey(a)
		if !ok {
			continue
		}
		split := append(append(slices.Clone(pos[:i]), store, key), pos[i+1:]...)
		if c.checkArgs(split) != nil || c.checkForms != nil && c.checkForms(split) != nil {
			return ""
		}
		second := "KEY"
		if f := strings.Fields(c.synopsis); len(f) > 1 && f[0] == "STORE" {
			second = strings.Trim(f[1], "[].")
		}
		quoted := make([]string, len(split))
		for j, a := range split {
			quoted[j] = shellQuote(a)
		}
		return fmt.Sprintf("zonalblob: %s takes STORE %s as two arguments: zonalblob %s %s\n", c.name, second, c.name, strings.Join(quoted, " "))
	}
	return ""
}

// partial is the error of a command stopped part of the way: "interrupted:
// 4 of 7 copied".
type partial struct {
	done, total int
	verb        string // copied, written, deleted
}

func (p *partial) Error() string {
	return fmt.Sprintf("interrupted: %d of %d %s", p.done, p.total, p.verb)
}

// flagSet returns the command's flag set, with the flags every command
// takes: --stats, into stats.
func (c *command) flagSet(stats *bool) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	// Errors and help are printed by run, in one place and format.
	fs.SetOutput(io.Discard)
	fs.BoolVar(stats, "stats", *stats, "at exit, print the stats of the stores the command opened on stderr, as one JSON line (also: zonalblob --stats COMMAND)")
	return fs
}

func (c *command) checkArgs(pos []string) error {
	switch {
	case len(pos) < c.minArgs:
		return fmt.Errorf("missing %s", strings.Join(c.argNames()[len(pos):c.minArgs], " and "))
	case c.maxArgs == 0 && len(pos) > 0:
		return fmt.Errorf("takes no arguments, got %q", shortArg(pos[0]))
	case c.maxArgs >= 0 && len(pos) > c.maxArgs:
		return fmt.Errorf("too many arguments (%d, at most %d): want %s", len(pos), c.maxArgs, c.synopsis)
	}
	return nil
}

// argNames are the names of the positional arguments in the synopsis, the
// required ones first ("STORE", "KEY").
func (c *command) argNames() []string {
	var names []string
	for f := range strings.FieldsSeq(c.synopsis) {
		if strings.HasPrefix(f, "[") || strings.HasPrefix(f, "-") || f == "..." {
			continue
		}
		names = append(names, strings.TrimSuffix(f, "..."))
	}
	for len(names) < c.minArgs {
		names = append(names, "ARG")
	}
	return names
}

// parseInterspersed parses fs from args allowing flags after positional
// arguments ("ls file:///tmp/b -l"), and returns the positional arguments.
// Everything after "--" is positional, for keys that begin with "-".
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	args = expandShortFlags(fs, args)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// expandShortFlags splits combined one-letter boolean flags ("-lh", "-rf")
// into separate ones, as Unix tools accept them, up to "--".
func expandShortFlags(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && !strings.Contains(a, "=") && fs.Lookup(a[1:]) == nil && allShortBools(fs, a[1:]) {
			for _, c := range a[1:] {
				out = append(out, "-"+string(c))
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

func allShortBools(fs *flag.FlagSet, letters string) bool {
	for _, c := range letters {
		f := fs.Lookup(string(c))
		if f == nil {
			return false
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			return false
		}
	}
	return true
}

// exitCode classifies an action's error.
func exitCode(err error) int {
	var ue usageError
	var f failures
	switch {
	case errors.As(err, &f):
		return f.exitCode()
	case errors.As(err, &ue), errors.Is(err, blob.ErrInvalidArgument), errors.Is(err, blob.ErrInvalidKey):
		return exitUsage
	case errors.Is(err, blob.ErrNotFound):
		return exitNotFound
	}
	return exitFailed
}

// usageError is a bad argument found by an action (a flag value out of range),
// reported with exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const usageHead = `zonalblob lists, reads, writes, copies and deletes objects in any store that
zonalblob can open by URL.

Usage:
  zonalblob [--stats] COMMAND [flags] ARGS...
  zonalblob help COMMAND        (or: zonalblob COMMAND --help)

Commands:
`

const usageTail = `
Naming objects:
  STORE is a URL that opens a bucket; KEY is an object's name in it, given as a
  separate argument, exactly as stored (no URL escaping). Keeping them apart
  leaves the URL's query parameters to the store:

    zonalblob cat 'file:///tmp/b?create_dir=true' logs/2025/part-0001

  A URL with the key glued on (cat gs://b/k) is a usage error that shows the
  two-argument form (zonalblob cat gs://b k).

  cp and mv also take a local PATH for either end: an argument that begins
  with a URL scheme is a store, anything else a local path. A KEY or PATH
  ending in "/" is a folder. A PREFIX (ls, du, rm -r) is a prefix, not a
  pattern: *, ? and [ are ordinary key characters. Flags may come before or
  after the arguments, one-letter flags combine (-lh), and "--" ends the
  flags, for a KEY that begins with "-". Keys
  are valid UTF-8, 1 to 1024 bytes, without NUL; a store may refuse more (a
  file:// key cannot begin with "/", nor have a path segment over 234 bytes),
  always before any I/O.

Store URLs (registered schemes: %s):
  file:///abs/dir           a local directory (file:///..., three slashes, or
                            file://localhost/...); add ?create_dir=true to
                            create it. Relative forms (file:dir) are refused.
  mem://                    in memory, new and EMPTY on every run: useful only
                            in-process (tests, programs), not across commands.
                            To try put/ls/cat from a shell, use file:///tmp/x.
  gs://bucket[/prefix/]     Google Cloud Storage
  s3://bucket[/prefix/]?region=R   Amazon S3 and compatibles
  azblob://container[/prefix/]     Azure Blob Storage
  A path in a cloud URL is a key prefix and ends in "/": every KEY is under it.
  Cloud URLs take their credentials from the environment, as the cloud SDKs do.
  Credentials in a URL (user:password@, key=, token=, sig=..., and in URLs
  nested in quorum:// and tiered:// URLs) are never printed.

Output:
  Standard output carries the command's result and nothing else; messages,
  summaries, progress bars and any library's warnings go to stderr. --json
  (ls, stat, put, cp, mv, rm, du, version) prints the result as JSON: one
  object per line (stat: one indented object); cat writes the object's
  bytes. bench writes its figures as JSON into --out (results.json).

Global flags (before the command, or among its flags):
  --stats   at exit, print on stderr one JSON line with the stats of every
            store the command opened: {"stores": [{"url", "type", "stats",
            "wraps", "hot", "cold", "replicas", "note"}]}, each layer of a
            store (pool, quorum, tiered, gcsrapid) with its Stats() as Go
            names them (durations in nanoseconds); "note" says when a store
            keeps none (mem://, file://, ...).

Exit codes:
  0    success
  1    the operation failed (I/O error, precondition failed, object exists, ...)
  2    usage error: bad command, flag, argument, URL or key
  3    not found: the object (or, for rm, one of the objects) does not exist
  130  interrupted (Ctrl-C); the command says how far it got

Examples:
  zonalblob put 'file:///tmp/demo?create_dir=true' hello.txt ./hello.txt
  echo hi | zonalblob put file:///tmp/demo greeting --content-type text/plain
  zonalblob ls -lh file:///tmp/demo
  zonalblob cat file:///tmp/demo greeting
  zonalblob cp ./report.csv file:///tmp/demo reports/
  zonalblob cp -r file:///tmp/demo reports/ ./backup/
  zonalblob cp file:///tmp/demo greeting 's3://bucket?region=eu-west-1' greeting
  zonalblob mv file:///tmp/demo inbox/report.csv file:///tmp/demo done/
  zonalblob --stats put 'tiered://?hot=mem%%3A%%2F%%2F&cold=mem%%3A%%2F%%2F' k ./hello.txt
`

func writeUsage(w io.Writer) {
	io.WriteString(w, usageHead)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, usageTail, strings.Join(blob.Schemes(), ", "))
}

func writeCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: zonalblob %s %s\n\n%s\n", c.name, c.synopsis, c.summary)
	if c.details != "" {
		fmt.Fprintf(w, "\n%s", c.details)
	}
	var stats bool
	fs := c.flagSet(&stats)
	c.setup(fs)
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	fmt.Fprintf(w, "\nExit codes: 0 ok, 1 failed, 2 usage error, 3 not found, 130 interrupted.\n")
}
