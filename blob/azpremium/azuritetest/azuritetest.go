// Package azuritetest runs Azurite, the Azure Storage emulator, for tests:
// the blob service on a free 127.0.0.1 port, in memory, killed with its whole
// process group on Close.
//
// Azurite is an npm package pinned in tools/package.json and installed into
// tools/node_modules by `make tools` (which `make test` runs), never globally.
// Start ends the test through internal/emulators when it cannot run: a skip
// that names `make test`, or a failure under ZONALBLOB_REQUIRE_EMULATORS=1.
//
//	srv := azuritetest.Start(t, azuritetest.Options{})
//	// srv.Endpoint() is "http://127.0.0.1:PORT/devstoreaccount1"
//	client, err := srv.Client(nil) // azblob, signed with the account key
//
// Outside a test, NewServer starts one and returns an error instead; the
// caller closes it.
package azuritetest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/zonalblob/zonalblob/internal/emulators"
)

// Azurite's well-known development account (published in its README and in
// Microsoft's emulator documentation); it is not a secret.
const (
	Account = "devstoreaccount1"
	Key     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Options configures a Server. Azurite runs with fixed settings (in memory,
// on a free loopback port, the well-known account), so there is nothing to
// set yet; the type gives NewServer and Start the signatures of the other
// emulators' (gcsrapidtest, s3expresstest), and room to grow.
type Options struct{}

// Server is a running Azurite blob service.
type Server struct {
	Account string
	Key     string
	Port    int

	endpoint  string
	cmd       *exec.Cmd
	dir       string
	out       *lockedBuffer
	exited    chan struct{}
	closeOnce sync.Once
}

// Endpoint is the blob service URL including the account path segment, as
// emulators address accounts: http://127.0.0.1:PORT/devstoreaccount1.
func (s *Server) Endpoint() string { return s.endpoint }

// ConnectionString is the Azure connection string for the server.
func (s *Server) ConnectionString() string {
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;", s.Account, s.Key, s.endpoint)
}

// Client returns an azblob client for the server's blob service, signed with
// the account key; ServiceClient().NewContainerClient reaches one container.
// opts may be nil.
func (s *Server) Client(opts *azblob.ClientOptions) (*azblob.Client, error) {
	cred, err := azblob.NewSharedKeyCredential(s.Account, s.Key)
	if err != nil {
		return nil, err
	}
	return azblob.NewClientWithSharedKeyCredential(s.endpoint, cred, opts)
}

// Start starts a server for t and stops it when t ends. When Azurite cannot
// start, t ends through emulators.Unavailable.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := NewServer(opts)
	if err != nil {
		emulators.Unavailable(t, "azurite", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Binary returns the path of azurite-blob under the module's tools/
// directory, found by walking up from the working directory to go.mod.
func Binary() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
	bin := filepath.Join(dir, "tools", "node_modules", ".bin", "azurite-blob")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s not installed (make tools installs it from tools/package-lock.json)", bin)
	}
	return bin, nil
}

// NewServer starts a server; the caller must Close it.
func NewServer(opts Options) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("node"); err != nil {
		return nil, fmt.Errorf("node not found: %w", err)
	}
	var lastErr error
	// A port picked free can be taken before Azurite binds it; try again.
	for range 3 {
		s, err := start(bin)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(bin string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "azurite-")
	if err != nil {
		return nil, err
	}
	s := &Server{
		endpoint: fmt.Sprintf("http://127.0.0.1:%d/%s", port, Account),
		Account:  Account,
		Key:      Key,
		Port:     port,
		dir:      dir,
		out:      &lockedBuffer{},
		exited:   make(chan struct{}),
	}
	s.cmd = exec.Command(bin,
		"--blobHost", "127.0.0.1",
		"--blobPort", strconv.Itoa(port),
		// Nothing on disk; the temporary working directory catches any
		// debug or state file Azurite writes regardless.
		"--inMemoryPersistence",
		"--silent",
		// azblob v1.8.3 sends an x-ms-version newer than Azurite knows.
		"--skipApiVersionCheck",
		// Tolerate headers and parameters Azurite does not implement
		// (for example list's startFrom) instead of failing the request.
		"--loose",
		"--disableTelemetry",
	)
	s.cmd.Dir = dir
	s.cmd.Stdout = s.out
	s.cmd.Stderr = s.out
	setProcessGroup(s.cmd)
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(30 * time.Second); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// waitReady polls until the service answers HTTP. Any status counts: an
// unauthenticated request is refused with 403, which proves it listens.
func (s *Server) waitReady(timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("azurite exited before answering: %s", s.out.String())
		default:
		}
		resp, err := client.Get(s.endpoint + "?comp=list")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("azurite did not answer on port %d within %v: %v; output: %s", s.Port, timeout, err, s.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Close kills Azurite and every process it started, then waits for it.
// Azurite ignores SIGTERM while requests are open, so it gets SIGKILL.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		killProcessGroup(s.cmd)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
		}
		os.RemoveAll(s.dir)
	})
}

// Output returns what Azurite printed so far, for failure messages.
func (s *Server) Output() string { return s.out.String() }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Bounded: a long benchmark must not grow the log without limit.
	if b.b.Len() > 1<<20 {
		return len(p), nil
	}
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
