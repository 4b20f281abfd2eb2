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
)

func main() {
	// Interrupting a write cancels its context, so nothing half-written is committed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
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
		benchCommand(),
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
	s := streams{stdin: stdin, stdout: stdout, stderr: stderr}
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
		fmt.Fprintf(stderr, "zonalblob: unknown command %q\n\n", name)
		writeUsage(stderr)
		return exitUsage
	}
	return c.run(ctx, s, args[1:])
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
	// Whatever an action reports, no credential from its URL arguments reaches
	// the terminal, even if a driver put one in an error message.
	red := newRedactor(pos)
	if err := act(ctx, s, pos); err != nil {
		for line := range strings.Lines(red.redact(err.Error())) {
			fmt.Fprintf(s.stderr, "zonalblob: %s", strings.TrimSuffix(line, "\n")+"\n")
		}
		return exitCode(err)
	}
	return exitOK
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
		return fmt.Errorf("missing arguments: want %s", c.synopsis)
	case c.maxArgs >= 0 && len(pos) > c.maxArgs:
		return fmt.Errorf("too many arguments (%d): want %s", len(pos), c.synopsis)
	}
	return nil
}

// parseInterspersed parses fs from args allowing flags after positional
// arguments ("ls file:///tmp/b -l"), and returns the positional arguments.
// Everything after "--" is positional, for keys that begin with "-".
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
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

  Flags may come before or after the arguments; put "--" before a KEY that
  begins with "-". Keys are valid UTF-8, 1 to 1024 bytes, without NUL.

Store URLs (registered schemes: %s):
  file:///abs/dir           a local directory; add ?create_dir=true to create it
  mem://                    in memory, new and EMPTY on every run: useful only
                            in-process (tests, programs), not across commands.
                            To try put/ls/cat from a shell, use file:///tmp/x.
  gs://bucket               Google Cloud Storage
  s3://bucket?region=R      Amazon S3 and compatibles
  azblob://container        Azure Blob Storage
  Cloud URLs take their credentials from the environment, as the cloud SDKs do.
  Credentials in a URL (user:password@, key=, token=, sig=...) are never printed.

Exit codes:
  0  success
  1  the operation failed (I/O error, precondition failed, object exists, ...)
  2  usage error: bad command, flag, argument, URL or key
  3  not found: the object (or, for rm, one of the objects) does not exist

Examples:
  zonalblob put 'file:///tmp/demo?create_dir=true' hello.txt ./hello.txt
  echo hi | zonalblob put file:///tmp/demo greeting --content-type text/plain
  zonalblob ls -l file:///tmp/demo
  zonalblob cat file:///tmp/demo greeting
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
	fmt.Fprintf(w, "\nExit codes: 0 ok, 1 failed, 2 usage error, 3 not found.\n")
}
