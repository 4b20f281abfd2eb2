package gcsrapidtest

import (
	"context"
	"encoding/base64"
	"hash/crc32"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func (s *Server) getBucket(ctx context.Context, req msg) (msg, error) {
	s.store.mu.Lock()
	b, err := s.store.bucketLocked(req.str("name"))
	s.store.mu.Unlock()
	if err != nil {
		return msg{}, err
	}
	m := newMsg("Bucket")
	m.set("name", bucketPrefix+b.name)
	m.set("bucket_id", b.name)
	m.set("project", "projects/0")
	m.set("metageneration", int64(1))
	m.set("create_time", b.created)
	m.set("update_time", b.created)
	if b.zonal {
		m.set("location", "US-CENTRAL1")
		m.set("location_type", "zone")
		m.set("storage_class", "RAPID")
	} else {
		m.set("location", "US-CENTRAL1")
		m.set("location_type", "region")
		m.set("storage_class", "STANDARD")
	}
	return m, nil
}

func (s *Server) getObject(ctx context.Context, req msg) (msg, error) {
	s.store.mu.Lock()
	_, o, err := s.store.lookupLocked(req.str("bucket"), req.str("object"), req.i64("generation"))
	if err == nil {
		err = condsFrom(req).check(o)
	}
	var m msg
	if err == nil {
		m = o.metaProto(time.Now(), s.opts.Profile.StaleSize)
	}
	s.store.mu.Unlock()
	if status.Code(err) == codes.NotFound {
		if derr := s.delay(ctx, s.opts.Profile.StatMissing); derr != nil {
			return msg{}, derr
		}
		return msg{}, err
	}
	if err := s.delay(ctx, s.opts.Profile.Stat); err != nil {
		return msg{}, err
	}
	return m, err
}

func (s *Server) deleteObject(ctx context.Context, req msg) (msg, error) {
	if err := s.delay(ctx, s.opts.Profile.Delete); err != nil {
		return msg{}, err
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	b, o, err := s.store.lookupLocked(req.str("bucket"), req.str("object"), req.i64("generation"))
	if err != nil {
		return msg{}, err
	}
	if err := condsFrom(req).check(o); err != nil {
		return msg{}, err
	}
	b.deleteLocked(o.name)
	s.store.release(o.data.size())
	s.stats.deleted.Add(1)
	return newMsg("google.protobuf.Empty"), nil
}

// listObjects pages through a bucket in lexicographic order of names,
// folding names into prefixes at the delimiter. A page token is the last
// name or prefix returned, so pages stay consistent while objects change.
func (s *Server) listObjects(ctx context.Context, req msg) (msg, error) {
	if err := s.delay(ctx, s.opts.Profile.List); err != nil {
		return msg{}, err
	}
	pageSize := int(req.i64("page_size"))
	if pageSize < 0 {
		return msg{}, status.Errorf(codes.InvalidArgument, "negative page_size %d", pageSize)
	}
	if pageSize == 0 || pageSize > 1000 {
		pageSize = 1000
	}
	var after string
	if tok := req.str("page_token"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			return msg{}, status.Errorf(codes.InvalidArgument, "invalid page_token %q", tok)
		}
		after = string(b)
	}
	// Refuse what is not emulated rather than answer a different question.
	if req.str("match_glob") != "" || req.str("filter") != "" || req.boolean("soft_deleted") {
		return msg{}, status.Error(codes.Unimplemented, "gcsrapidtest does not emulate match_glob, filter or soft_deleted listings")
	}
	prefix, delim := req.str("prefix"), req.str("delimiter")
	start, end := req.str("lexicographic_start"), req.str("lexicographic_end")
	trailing := req.boolean("include_trailing_delimiter")

	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	b, err := s.store.bucketLocked(req.str("parent"))
	if err != nil {
		return msg{}, err
	}
	var names []string
	for _, n := range b.namesFrom(max(prefix, start)) {
		if !strings.HasPrefix(n, prefix) || end != "" && n >= end {
			break
		}
		names = append(names, n)
	}

	resp := newMsg("ListObjectsResponse")
	now := time.Now()
	items, last := 0, ""
	seenPrefix := map[string]bool{}
	for _, n := range names {
		if delim != "" {
			if i := strings.Index(n[len(prefix):], delim); i >= 0 {
				p := n[:len(prefix)+i+len(delim)]
				isSelf := p == n
				if !isSelf || !trailing {
					// Every name under p folds into one prefix entry.
					if seenPrefix[p] || p <= after {
						continue
					}
					if items == pageSize {
						resp.set("next_page_token", base64.RawURLEncoding.EncodeToString([]byte(last)))
						return resp, nil
					}
					seenPrefix[p] = true
					resp.set("prefixes", []string{p})
					items, last = items+1, p
					continue
				}
				// A name ending in the delimiter is both a prefix and,
				// with include_trailing_delimiter, an object.
				if !seenPrefix[p] && p > after {
					seenPrefix[p] = true
					resp.set("prefixes", []string{p})
				}
			}
		}
		if n <= after {
			continue
		}
		if items == pageSize {
			resp.set("next_page_token", base64.RawURLEncoding.EncodeToString([]byte(last)))
			return resp, nil
		}
		resp.appendMsg("objects", b.objects[n].metaProto(now, s.opts.Profile.StaleSize))
		items, last = items+1, n
	}
	return resp, nil
}

// updateMaskFields are the Object fields UpdateObject may change.
var updateMaskFields = map[string]func(a *attrs, o msg){
	"content_type":        func(a *attrs, o msg) { a.contentType = o.str("content_type") },
	"content_encoding":    func(a *attrs, o msg) { a.contentEncoding = o.str("content_encoding") },
	"content_disposition": func(a *attrs, o msg) { a.contentDisposition = o.str("content_disposition") },
	"content_language":    func(a *attrs, o msg) { a.contentLanguage = o.str("content_language") },
	"cache_control":       func(a *attrs, o msg) { a.cacheControl = o.str("cache_control") },
	"custom_time":         func(a *attrs, o msg) { a.customTime = o.time("custom_time") },
	"temporary_hold":      func(a *attrs, o msg) { a.temporaryHold = o.boolean("temporary_hold") },
	"event_based_hold":    func(a *attrs, o msg) { a.eventBasedHold = o.boolean("event_based_hold") },
	"metadata":            func(a *attrs, o msg) { a.metadata = o.strMap("metadata") },
	// Output-only fields: the client sends create_time to force an update
	// with nothing to change, which still bumps the metageneration.
	"create_time": func(*attrs, msg) {},
	"acl":         func(*attrs, msg) {},
}

func (s *Server) updateObject(ctx context.Context, req msg) (msg, error) {
	obj := req.sub("object")
	if !obj.valid() {
		return msg{}, status.Error(codes.InvalidArgument, "object is required")
	}
	mask := req.sub("update_mask").strings("paths")
	if len(mask) == 0 {
		return msg{}, status.Error(codes.InvalidArgument, "update_mask is required")
	}
	if err := s.delay(ctx, s.opts.Profile.Stat); err != nil {
		return msg{}, err
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	_, o, err := s.store.lookupLocked(obj.str("bucket"), obj.str("name"), obj.i64("generation"))
	if err != nil {
		return msg{}, err
	}
	if err := condsFrom(req).check(o); err != nil {
		return msg{}, err
	}
	a := o.attrs
	a.metadata = copyMap(a.metadata)
	newMeta := obj.strMap("metadata")
	for _, p := range mask {
		if p == "*" {
			a = attrsFrom(obj)
			continue
		}
		if key, ok := strings.CutPrefix(p, "metadata."); ok {
			if v, ok := newMeta[key]; ok {
				if a.metadata == nil {
					a.metadata = map[string]string{}
				}
				a.metadata[key] = v
			} else {
				delete(a.metadata, key)
			}
			continue
		}
		f, ok := updateMaskFields[p]
		if !ok {
			return msg{}, status.Errorf(codes.InvalidArgument, "update_mask path %q is not supported", p)
		}
		f(&a, obj)
	}
	o.attrs = a
	o.metageneration++
	o.updated = time.Now().UTC()
	return o.toProto(), nil
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// rewriteObject copies an object in a single call (rewrite tokens are never
// needed: the data is already in memory). Like the real service, the copy
// lands in the destination as an ordinary object, so it is refused in a
// zonal bucket, which accepts only appendable objects.
func (s *Server) rewriteObject(ctx context.Context, req msg) (msg, error) {
	dst := req.sub("destination")
	dstName := req.str("destination_name")
	if dstName == "" {
		return msg{}, status.Error(codes.InvalidArgument, "destination_name is required")
	}
	if err := checkObjectName(dstName); err != nil {
		return msg{}, err
	}
	s.store.mu.Lock()
	_, src, err := s.store.lookupLocked(req.str("source_bucket"), req.str("source_object"), req.i64("source_generation"))
	if err == nil {
		err = conds{
			genMatch:     optI64(req, "if_source_generation_match"),
			genNotMatch:  optI64(req, "if_source_generation_not_match"),
			metaMatch:    optI64(req, "if_source_metageneration_match"),
			metaNotMatch: optI64(req, "if_source_metageneration_not_match"),
		}.check(src)
	}
	var n int64
	if err == nil {
		n = src.data.size()
	}
	s.store.mu.Unlock()
	if err != nil {
		return msg{}, err
	}
	if err := s.sleep(ctx, s.sampler.Sample(s.opts.Profile.Write)+s.share(s.opts.Profile.WritePerMiB, n)); err != nil {
		return msg{}, err
	}

	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	db, err := s.store.bucketLocked(req.str("destination_bucket"))
	if err != nil {
		return msg{}, err
	}
	if db.zonal {
		return msg{}, status.Errorf(codes.FailedPrecondition, "bucket %q is zonal and accepts only appendable objects; rewrite is not supported", db.name)
	}
	// Look the source up again: it may have changed during the delay.
	_, src, err = s.store.lookupLocked(req.str("source_bucket"), req.str("source_object"), req.i64("source_generation"))
	if err != nil {
		return msg{}, err
	}
	if err := condsFrom(req).check(db.objects[dstName]); err != nil {
		return msg{}, err
	}
	if err := s.store.reserve(src.data.size()); err != nil {
		return msg{}, err
	}
	now := time.Now().UTC()
	o := &object{
		bucket:         db.name,
		name:           dstName,
		generation:     s.store.nextGen(),
		metageneration: 1,
		attrs:          src.attrs,
		data:           src.data.frozen(),
		crc:            src.crc,
		md5:            src.md5,
		created:        now,
		updated:        now,
	}
	o.attrs.metadata = copyMap(o.attrs.metadata)
	if dst.valid() {
		o.attrs = attrsFrom(dst)
	}
	if o.md5 == nil {
		finalizeLocked(o, true)
	} else {
		finalizeLocked(o, false)
	}
	s.store.commitLocked(db, o)
	s.stats.created.Add(1)
	s.stats.finalized.Add(1)
	s.stats.written.Add(o.data.size())

	resp := newMsg("RewriteResponse")
	resp.set("total_bytes_rewritten", o.data.size())
	resp.set("object_size", o.data.size())
	resp.set("done", true)
	resp.set("resource", o.toProto())
	return resp, nil
}

func optI64(m msg, name string) *int64 {
	if !m.has(name) {
		return nil
	}
	v := m.i64(name)
	return &v
}

// moveObject renames an object within a bucket atomically.
func (s *Server) moveObject(ctx context.Context, req msg) (msg, error) {
	if err := s.delay(ctx, s.opts.Profile.Write); err != nil {
		return msg{}, err
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	b, src, err := s.store.lookupLocked(req.str("bucket"), req.str("source_object"), 0)
	if err != nil {
		return msg{}, err
	}
	dstName := req.str("destination_object")
	if err := checkObjectName(dstName); err != nil {
		return msg{}, err
	}
	if err := (conds{
		genMatch:     optI64(req, "if_source_generation_match"),
		genNotMatch:  optI64(req, "if_source_generation_not_match"),
		metaMatch:    optI64(req, "if_source_metageneration_match"),
		metaNotMatch: optI64(req, "if_source_metageneration_not_match"),
	}).check(src); err != nil {
		return msg{}, err
	}
	if err := condsFrom(req).check(b.objects[dstName]); err != nil {
		return msg{}, err
	}
	if old, ok := b.objects[dstName]; ok && old != src {
		s.store.release(old.data.size())
	}
	b.deleteLocked(src.name)
	src.name = dstName
	src.generation = s.store.nextGen()
	src.updated = time.Now().UTC()
	b.putLocked(dstName, src)
	return src.toProto(), nil
}

func (s *Server) startResumableWrite(ctx context.Context, req msg) (msg, error) {
	spec := req.sub("write_object_spec")
	b, err := s.checkWriteSpec(spec)
	if err != nil {
		return msg{}, err
	}
	if b.zonal {
		return msg{}, errZonalNeedsAppendable(b.name)
	}
	if err := s.delay(ctx, s.opts.Profile.UploadStart); err != nil {
		return msg{}, err
	}
	s.store.mu.Lock()
	id := base64.RawURLEncoding.EncodeToString(newHandle())
	s.store.uploads[id] = &upload{id: id, bucket: b.name, spec: spec, checksums: req.sub("object_checksums")}
	s.store.mu.Unlock()
	resp := newMsg("StartResumableWriteResponse")
	resp.set("upload_id", id)
	return resp, nil
}

func (s *Server) queryWriteStatus(ctx context.Context, req msg) (msg, error) {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	u, ok := s.store.uploads[req.str("upload_id")]
	if !ok {
		return msg{}, status.Errorf(codes.NotFound, "upload %q not found", req.str("upload_id"))
	}
	resp := newMsg("QueryWriteStatusResponse")
	if u.done != nil {
		resp.set("resource", u.done.toProto())
	} else {
		resp.set("persisted_size", int64(len(u.data)))
	}
	return resp, nil
}

// checkWriteSpec validates a WriteObjectSpec and returns its bucket.
func (s *Server) checkWriteSpec(spec msg) (*bucket, error) {
	if !spec.valid() {
		return nil, status.Error(codes.InvalidArgument, "write_object_spec is required")
	}
	res := spec.sub("resource")
	if !res.valid() {
		return nil, status.Error(codes.InvalidArgument, "write_object_spec.resource is required")
	}
	if err := checkObjectName(res.str("name")); err != nil {
		return nil, err
	}
	if spec.has("object_size") && spec.i64("object_size") < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "negative object_size %d", spec.i64("object_size"))
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	b, err := s.store.bucketLocked(res.str("bucket"))
	if err == nil && b.zonal && s.opts.Hierarchical {
		err = CheckHierarchicalName(res.str("name"))
	}
	return b, err
}

func errZonalNeedsAppendable(bucket string) error {
	return status.Errorf(codes.FailedPrecondition, "bucket %q is zonal and accepts only appendable objects (write_object_spec.appendable=true)", bucket)
}

func errRegionalNoAppendable(bucket string) error {
	return status.Errorf(codes.FailedPrecondition, "bucket %q is regional and does not accept appendable objects", bucket)
}

func crcOf(p []byte) uint32 { return crc32.Checksum(p, crc32cTable) }
