package gcsrapid

import (
	"context"
	"strings"
	"sync/atomic"

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

// reportConnectivity makes one call (the bucket's metadata) to learn whether
// the client's connections are direct, and says so in a log line and Stats.
func (s *Store) reportConnectivity(ctx context.Context, t *targetRecorder) {
	log := s.opts.Logger
	_, err := s.client.Bucket(s.name).Attrs(ctx)
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
	if s.connectivity == ConnectivityDirect {
		log.Info("gcsrapid: opened", attrs...)
	} else {
		log.Warn("gcsrapid: opened without direct connectivity; latency will be above the published figures", attrs...)
	}
}
