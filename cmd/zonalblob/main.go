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
	log.SetOutput(redactWriter{w: os.Stderr, secrets: argSecrets(os.Args[1:])})
	code := runContext(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	cancel(nil)
	os.Exit(code)
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
}

// command is one subcommand.
type command struct {
	name     string
	synopsis string // the arguments after the name, as in "STORE KEY"
	summary  string // one line for the command list
	details  string // what it does, notes and examples, for --help
	// minArgs and maxArgs bound the positional arguments; maxArgs < 0: unbounded.
	minArgs, maxArgs int
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

func (c *command) run(ctx context.Context, s streams, args []string) int {
	fs := c.flagSet()
	act := c.setup(fs)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		writeCommandHelp(s.stdout, c)
		return exitOK
	}
	if err == nil {
		err = c.checkArgs(pos)
	}
	if err != nil {
		fmt.Fprintf(s.stderr, "zonalblob: %s: %v\nusage: zonalblob %s %s\nRun 'zonalblob %s --help' for details.\n", c.name, err, c.name, c.synopsis, c.name)
		return exitUsage
	}
	err = act(ctx, s, pos)
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
		return exitCode(err)
	}
	return exitOK
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

func (c *command) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	// Errors and help are printed by run, in one place and format.
	fs.SetOutput(io.Discard)
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
  zonalblob COMMAND [flags] ARGS...
  zonalblob help COMMAND        (or: zonalblob COMMAND --help)

Commands:
`

const usageTail = `
Naming objects:
  STORE is a URL that opens a bucket; KEY is an object's name in it, given as a
  separate argument, exactly as stored (no URL escaping). Keeping them apart
  leaves the URL's query parameters to the store:

    zonalblob cat 'file:///tmp/b?create_dir=true' logs/2025/part-0001

  cp also takes a local PATH for either end: an argument that begins with a URL
  scheme is a store, anything else a local path. A KEY or PATH ending in "/" is
  a folder. Flags may come before or after the arguments, one-letter flags
  combine (-lh), and "--" ends the flags, for a KEY that begins with "-". Keys
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
	fs := c.flagSet()
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
