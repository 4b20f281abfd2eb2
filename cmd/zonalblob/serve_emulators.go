package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zonalblob/zonalblob/blob/azpremium"
	"github.com/zonalblob/zonalblob/blob/azpremium/azuritetest"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

// The emulators' fixed test credentials and names, printed by serve: none is
// a secret (Azurite's key is its published development key).
const (
	s3Region          = s3expresstest.Region
	s3AccessKeyID     = s3expresstest.DefaultAccessKeyID
	s3SecretAccessKey = s3expresstest.DefaultSecretAccessKey
	azureAccount      = azuritetest.Account
)

// azureEndpoint is the blob service URL of the Azurite at addr, account
// path segment included, as emulators address accounts.
func azureEndpoint(addr string) string { return "http://" + addr + "/" + azureAccount }

func azureConnectionString(addr string) string {
	return "DefaultEndpointsProtocol=http;AccountName=" + azureAccount + ";AccountKey=" + azuritetest.Key +
		";BlobEndpoint=" + azureEndpoint(addr) + ";"
}

// zonalEmulator is one zonal GCS bucket on an emulator of its own.
type zonalEmulator struct {
	label, bucket, addr string
}

// runningEmulators are the running emulators and the addresses clients use for
// them: their own ports, or with --port-base the relays in front of them.
type runningEmulators struct {
	zonal    []zonalEmulator
	regional string // host:port of the regional GCS emulator; "" if none
	s3       string // host:port of the S3 Express emulator; "" if none
	azure    string // host:port of Azurite; "" if none or not installed

	relays  []*relay
	closers []func() // the emulators, in the order they started
}

// close stops the relays first, cutting the connections of clients in other
// processes, so that the emulators need not wait for their streams.
func (em *runningEmulators) close() {
	for _, r := range em.relays {
		r.close()
	}
	for i := len(em.closers) - 1; i >= 0; i-- {
		em.closers[i]()
	}
}

// grpcHost is the endpoint STORAGE_EMULATOR_HOST_GRPC names, which can be
// one only: the regional emulator, whose buckets take the ordinary writes
// every gRPC client makes, else the first zone's; reaches says which buckets
// it serves.
func (em *runningEmulators) grpcHost(p *servePlan) (host, reaches string) {
	switch {
	case em.regional != "":
		return em.regional, "the regional bucket(s) " + strings.Join(p.regional, ", ")
	case len(em.zonal) > 0:
		z := em.zonal[0]
		return z.addr, fmt.Sprintf("%s's bucket %s only", z.label, z.bucket)
	}
	return "", ""
}

// startEmulators starts what p asks for. With a port base every port is
// bound first, so a taken one fails serve before anything starts. A missing
// Azurite is a note on stderr, not an error.
func startEmulators(ctx context.Context, p *servePlan, stderr io.Writer) (_ *runningEmulators, err error) {
	em := &runningEmulators{}
	var what []string
	for i := range p.zones {
		what = append(what, fmt.Sprintf("zone %d", i))
	}
	for _, name := range p.zonal {
		what = append(what, "gcsrapid "+name)
	}
	if len(p.regional) > 0 {
		what = append(what, "the regional GCS emulator")
	}
	if len(p.s3express) > 0 {
		what = append(what, "the S3 Express emulator")
	}
	if len(p.azure) > 0 {
		what = append(what, "Azurite")
	}
	var ports []net.Listener
	if p.portBase != 0 {
		if ports, err = bindPorts(p.portBase, what); err != nil {
			return nil, err
		}
	}
	next := 0
	defer func() {
		for _, l := range ports[next:] {
			l.Close()
		}
		if err != nil {
			em.close()
		}
	}()
	// expose returns the address clients use for the emulator at addr, the
	// next in the order of what.
	expose := func(addr string) string {
		if ports == nil {
			return addr
		}
		r := newRelay(ports[next], addr)
		next++
		em.relays = append(em.relays, r)
		return r.addr()
	}
	zero := p.profile.Name == gcsrapidtest.Zero().Name
	seed := uint64(0)
	startGCS := func(prof gcsrapidtest.Profile, buckets []gcsrapidtest.Bucket) (string, error) {
		seed++
		srv, err := gcsrapidtest.NewServer(gcsrapidtest.Options{
			Profile: prof, Seed: seed, Buckets: buckets,
			// Limits the real service enforces, which a correct client
			// never meets; the faults it injects stay off (see docs/serve.md).
			MaxWriteMessage:              gcsrapidtest.MaxWriteMessage,
			RefuseZeroGenerationTakeover: true,
		})
		if err != nil {
			return "", err
		}
		em.closers = append(em.closers, srv.Close)
		return expose(srv.Endpoint()), nil
	}
	for i := range p.zones {
		addr, err := startGCS(p.profile, []gcsrapidtest.Bucket{{Name: "zone", Zonal: true}})
		if err != nil {
			return nil, fmt.Errorf("starting zone %d: %w", i, err)
		}
		em.zonal = append(em.zonal, zonalEmulator{label: fmt.Sprintf("zone %d", i), bucket: "zone", addr: addr})
	}
	for _, name := range p.zonal {
		addr, err := startGCS(p.profile, []gcsrapidtest.Bucket{{Name: name, Zonal: true}})
		if err != nil {
			return nil, fmt.Errorf("starting zonal bucket %s: %w", name, err)
		}
		em.zonal = append(em.zonal, zonalEmulator{label: "gcsrapid " + name, bucket: name, addr: addr})
	}
	if len(p.regional) > 0 {
		prof := gcsrapidtest.Regional()
		if zero {
			prof = gcsrapidtest.Zero()
		}
		var buckets []gcsrapidtest.Bucket
		for _, name := range p.regional {
			buckets = append(buckets, gcsrapidtest.Bucket{Name: name})
		}
		if em.regional, err = startGCS(prof, buckets); err != nil {
			return nil, fmt.Errorf("starting the regional GCS emulator: %w", err)
		}
	}
	if len(p.s3express) > 0 {
		prof := s3expresstest.MustProfile("express")
		if zero {
			prof = s3expresstest.MustProfile("zero")
		}
		seed++
		srv, err := s3expresstest.NewServer(s3expresstest.Options{Buckets: p.s3express, Profile: prof, Seed: seed})
		if err != nil {
			return nil, fmt.Errorf("starting the S3 Express emulator: %w", err)
		}
		em.closers = append(em.closers, srv.Close)
		em.s3 = expose(srv.Endpoint())
	}
	if len(p.azure) > 0 {
		seed++
		if why := azuriteUnavailable(); why != nil {
			fmt.Fprintf(stderr, "zonalblob: serve: --azure %s skipped: Azurite is not installed: %v; 'make tools' in the zonalblob repository installs it under tools/, where serve finds it when run from inside the repository\n", strings.Join(p.azure, ", "), why)
		} else {
			addr, err := startAzurite(ctx, p, em, seed)
			if err != nil {
				return nil, err
			}
			em.azure = expose(addr)
		}
	}
	return em, ctx.Err()
}

// azuriteUnavailable says why Azurite cannot run here, or nil.
func azuriteUnavailable() error {
	if _, err := azuritetest.Binary(); err != nil {
		return err
	}
	if _, err := exec.LookPath("node"); err != nil {
		return errors.New("node is not on PATH")
	}
	return nil
}

// startAzurite starts Azurite, behind a latency proxy unless the profile is
// zero, and creates the containers; it returns the address clients use.
func startAzurite(ctx context.Context, p *servePlan, em *runningEmulators, seed uint64) (string, error) {
	srv, err := azuritetest.NewServer(azuritetest.Options{})
	if err != nil {
		return "", fmt.Errorf("starting Azurite: %w", err)
	}
	em.closers = append(em.closers, srv.Close)
	for _, name := range p.azure {
		st, err := azpremium.New(ctx, name, azpremium.Options{Account: srv.Account, Endpoint: srv.Endpoint(), AccountKey: azpremium.Secret(srv.Key), WarmConns: -1})
		if err != nil {
			return "", fmt.Errorf("creating Azure container %s: %w", name, err)
		}
		_, err = st.Client().Create(ctx, nil)
		st.Close()
		if err != nil {
			return "", fmt.Errorf("creating Azure container %s: %w", name, err)
		}
	}
	endpoint := srv.Endpoint()
	if p.profile.Name != gcsrapidtest.Zero().Name {
		proxy := srv.WithLatency(azuritetest.Premium, seed)
		em.closers = append(em.closers, proxy.Close)
		endpoint = proxy.Endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}

// bindPorts listens on 127.0.0.1:base, base+1, ... for each emulator named
// in what, or fails naming the port and what it was for.
func bindPorts(base int, what []string) ([]net.Listener, error) {
	var ls []net.Listener
	for i, w := range what {
		addr := fmt.Sprintf("127.0.0.1:%d", base+i)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			span := fmt.Sprintf("--port-base %d puts the emulator on port %d", base, base)
			if len(what) > 1 {
				span = fmt.Sprintf("--port-base %d puts the %d emulators on ports %d-%d", base, len(what), base, base+len(what)-1)
			}
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("cannot listen on %s for %s: the port is taken (%s)", addr, w, span)
			}
			return nil, fmt.Errorf("cannot listen on %s for %s (%s): %w", addr, w, span, err)
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// relay accepts connections on a fixed port and copies each, both ways, to
// an emulator's own port: the emulator packages listen on 127.0.0.1:0, so
// --port-base puts a relay in front of each. It relays bytes, not requests,
// so gRPC streams and signed HTTP requests pass unchanged.
type relay struct {
	lis    net.Listener
	target string

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newRelay(lis net.Listener, target string) *relay {
	r := &relay{lis: lis, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r
}

func (r *relay) addr() string { return r.lis.Addr().String() }

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.lis.Accept()
		if err != nil {
			r.mu.Lock()
			closed := r.closed
			r.mu.Unlock()
			if closed {
				return
			}
			// Out of file descriptors, say: wait a little, as net/http does.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		r.wg.Add(1)
		go r.pipe(c)
	}
}

// track registers conns to be cut by close, or reports that it ran already.
func (r *relay) track(conns ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	for _, c := range conns {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *relay) pipe(client net.Conn) {
	defer r.wg.Done()
	defer client.Close()
	server, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer server.Close()
	if !r.track(client, server) {
		return
	}
	defer func() {
		r.mu.Lock()
		delete(r.conns, client)
		delete(r.conns, server)
		r.mu.Unlock()
	}()
	done := make(chan struct{})
	go func() {
		io.Copy(server, client)
		closeWrite(server)
		close(done)
	}()
	io.Copy(client, server)
	closeWrite(client)
	<-done
}

// closeWrite passes an end of stream on, keeping the other direction open.
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
		return
	}
	c.Close()
}

// close stops accepting, cuts every relayed connection and waits for the
// relay's goroutines.
func (r *relay) close() {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.lis.Close()
	r.wg.Wait()
}
