package gcsrapidtest

import (
	"context"
	"encoding/hex"
	"net/url"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
)

// redirects answers streams ABORTED with a redirect and serves the streams
// that replay a routing token it issued (Options.Redirects).
type redirects struct {
	mu       sync.Mutex
	left     int
	issued   map[string]bool
	sent     int64
	followed int64
}

// Redirect makes the next n appendable write streams and bidi read streams
// that carry no routing token answer ABORTED with a redirect, in addition to
// Options.Redirects.
func (s *Server) Redirect(n int) {
	s.redirects.mu.Lock()
	defer s.redirects.mu.Unlock()
	s.redirects.left += n
}

// routingParams returns the x-goog-request-params of a stream, decoded.
func routingParams(ctx context.Context) url.Values {
	md, _ := metadata.FromIncomingContext(ctx)
	out := url.Values{}
	for _, v := range md.Get("x-goog-request-params") {
		for _, kv := range strings.Split(v, "&") {
			k, val, _ := strings.Cut(kv, "=")
			if u, err := url.QueryUnescape(val); err == nil {
				val = u
			}
			out.Add(k, val)
		}
	}
	return out
}

// check redirects a stream of method if one is due; a stream that replays
// an issued routing token is served. A redirected stream's first message is
// read first, as the service reads it before it answers (and a client that
// has not sent its request when the answer comes may lose the status).
func (r *redirects) check(stream grpc.ServerStream, method string) error {
	ctx := stream.Context()
	p := routingParams(ctx)
	if method == "BidiWriteObject" && p.Get("appendable") != "true" {
		return nil
	}
	r.mu.Lock()
	if tok := p.Get("routing_token"); tok != "" {
		defer r.mu.Unlock()
		if !r.issued[tok] {
			return status.Errorf(codes.InvalidArgument, "unknown routing_token %q", tok)
		}
		r.followed++
		return nil
	}
	if r.left <= 0 {
		r.mu.Unlock()
		return nil
	}
	r.left--
	tok := r.issueLocked()
	r.mu.Unlock()
	_ = stream.RecvMsg(newMsg(method + "Request").proto())
	var detail msg
	if method == "BidiWriteObject" {
		detail = newMsg("BidiWriteObjectRedirectedError")
	} else {
		detail = newMsg("BidiReadObjectRedirectedError")
	}
	detail.set("routing_token", tok)
	st, err := status.New(codes.Aborted, "gcsrapidtest: redirected; replay the routing token").WithDetails(protoadapt.MessageV1Of(detail.proto()))
	if err != nil {
		return status.Errorf(codes.Internal, "gcsrapidtest: redirect detail: %v", err)
	}
	return st.Err()
}

// issueLocked makes a routing token that a stream may replay.
func (r *redirects) issueLocked() string {
	r.sent++
	tok := "route-" + hex.EncodeToString(newHandle()[:8])
	if r.issued == nil {
		r.issued = map[string]bool{}
	}
	r.issued[tok] = true
	return tok
}

// redirectWrite is the ABORTED status of a write stream redirected after it
// opened: a routing token, the write handle, and the generation unless it
// is zero.
func (r *redirects) redirectWrite(handle []byte, gen int64) error {
	r.mu.Lock()
	tok := r.issueLocked()
	r.mu.Unlock()
	detail := newMsg("BidiWriteObjectRedirectedError")
	detail.set("routing_token", tok)
	if handle != nil {
		detail.mutable("write_handle").set("handle", handle)
	}
	if gen != 0 {
		detail.set("generation", gen)
	}
	st, err := status.New(codes.Aborted, "gcsrapidtest: write redirected; replay the routing token and write handle").WithDetails(protoadapt.MessageV1Of(detail.proto()))
	if err != nil {
		return status.Errorf(codes.Internal, "gcsrapidtest: redirect detail: %v", err)
	}
	return st.Err()
}
