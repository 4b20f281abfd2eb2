package gcsrapid

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"cloud.google.com/go/storage"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"

	"google.golang.org/grpc"
)

// Direct connectivity (DirectPath) is what gives a Rapid bucket its published
// latency: the client reaches the storage front end over Google's network
// directly instead of through a proxy. The client chooses it on its own, when
// its environment allows (on Google Cloud, with Google credentials, against
// the default endpoint), and resolves such connections through the
// "google-c2p" scheme. The Store reports what its client's connections use.
const directPathScheme = "google-c2p"

// Connectivity values reported in Stats.
const (
	ConnectivityDirect   = "direct"
	ConnectivityIndirect = "not direct"
	ConnectivityUnknown  = "unknown"
)

// targetRecorder learns the target of the client's connections from its calls.
// It runs on every call of the client, so recording is one atomic load once
// the first target is known.
type targetRecorder struct {
	target atomic.Pointer[string]
}

func (t *targetRecorder) record(cc *grpc.ClientConn) {
	if cc == nil || t.target.Load() != nil {
		return
	}
	target := cc.Target()
	t.target.CompareAndSwap(nil, &target)
}

func (t *targetRecorder) get() string {
	if p := t.target.Load(); p != nil {
		return *p
	}
	return ""
}

func (t *targetRecorder) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	t.record(cc)
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (t *targetRecorder) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	t.record(cc)
	return streamer(ctx, desc, cc, method, opts...)
}

// openProbe makes OpenURL's one call, the bucket's metadata, within
// ConnectTimeout: an endpoint that does not answer or a bucket that does not
// exist fails the open with an error that names them, instead of hanging or
// surfacing later as a missing object. A refusal of the bucket's metadata
// alone does not fail it (credentials may be allowed objects and not the
// bucket); the object calls report ErrPermission if it applies to them. It
// also learns whether the connections are direct.
func (s *Store) openProbe(ctx context.Context, t *targetRecorder, endpoint string) error {
	where := endpoint
	if where == "" {
		where = "the default endpoint"
	}
	pctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	_, err := s.client.Bucket(s.name).Attrs(pctx)
	switch {
	case err == nil, classify(err) == blob.ErrPermission:
	case errors.Is(err, storage.ErrBucketNotExist):
		return blob.Errorf(driver.OpOpen, "", blob.ErrBucketNotFound, "gcsrapid: bucket %q does not exist at %s", s.name, where)
	case ctx.Err() != nil:
		return &blob.Error{Op: driver.OpOpen, Err: ctx.Err()}
	case pctx.Err() != nil:
		return blob.Errorf(driver.OpOpen, "", nil, "gcsrapid: %s did not answer within connect_timeout %v (bucket %q): %v", where, s.opts.ConnectTimeout, s.name, err)
	default:
		return blob.Errorf(driver.OpOpen, "", classify(err), "gcsrapid: bucket %q at %s: %w", s.name, where, err)
	}
	target := t.get()
	switch {
	case target == "":
		s.connectivity = ConnectivityUnknown
	case strings.HasPrefix(target, directPathScheme+":"):
		s.connectivity = ConnectivityDirect
	default:
		s.connectivity = ConnectivityIndirect
	}
	attrs := []any{"bucket", s.name, "connectivity", s.connectivity, "target", target}
	if err != nil {
		attrs = append(attrs, "bucket_error", err)
	}
	if s.connectivity == ConnectivityDirect || endpoint != "" {
		// An emulator's endpoint is never direct, and needs no warning.
		s.opts.Logger.Debug("gcsrapid: opened", attrs...)
	} else {
		// Once per process: a program opening many stores (a quorum, a
		// CLI command) needs to hear it once.
		indirectWarning.Do(func() {
			s.opts.Logger.Warn("gcsrapid: opened without direct connectivity; latency will be above the published figures", attrs...)
		})
	}
	return nil
}

var indirectWarning sync.Once
