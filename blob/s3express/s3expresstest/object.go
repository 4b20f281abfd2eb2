package s3expresstest

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/johannesboyne/gofakes3"
)

// Attributes the wrapper keeps in the gofakes3 metadata map of each object.
// They never reach a client: copyHeaders skips the X-Zonalblob- prefix.
const (
	metaETag          = "X-Zonalblob-Etag"
	metaChecksumAlgo  = "X-Zonalblob-Checksum-Algorithm"
	metaChecksumValue = "X-Zonalblob-Checksum"
	metaParts         = "X-Zonalblob-Parts" // parts of the object: 1 per PUT or append, n per multipart upload
	metaLastModified  = "Last-Modified"
	internalPrefix    = "X-Zonalblob-"
)

// storedHeaders are the standard headers S3 keeps with an object and
// returns on GET and HEAD.
var storedHeaders = []string{"Content-Type", "Content-Encoding", "Content-Disposition",
	"Content-Language", "Cache-Control", "Expires", "X-Amz-Website-Redirect-Location"}

// requestMeta extracts the metadata to store from a write request.
func requestMeta(h http.Header) map[string]string {
	meta := map[string]string{}
	for _, k := range storedHeaders {
		v := h.Get(k)
		if k == "Content-Encoding" {
			// aws-chunked is transport framing, not a property of the object.
			var kept []string
			for _, enc := range strings.Split(v, ",") {
				if enc = strings.TrimSpace(enc); enc != "" && enc != "aws-chunked" {
					kept = append(kept, enc)
				}
			}
			v = strings.Join(kept, ",")
		}
		if v != "" {
			meta[k] = v
		}
	}
	for k, v := range h {
		if len(k) > len("X-Amz-Meta-") && strings.EqualFold(k[:len("X-Amz-Meta-")], "X-Amz-Meta-") {
			meta["X-Amz-Meta-"+k[len("X-Amz-Meta-"):]] = v[0]
		}
	}
	if _, ok := meta["Content-Type"]; !ok {
		meta["Content-Type"] = "binary/octet-stream"
	}
	return meta
}

// publicMeta returns the client-visible metadata of a stored object.
func publicMeta(meta map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range meta {
		if !strings.HasPrefix(k, internalPrefix) && k != metaLastModified {
			out[k] = v
		}
	}
	return out
}

func storedChecksum(meta map[string]string) *checksum {
	if meta[metaChecksumAlgo] == "" {
		return nil
	}
	return &checksum{algo: meta[metaChecksumAlgo], value: meta[metaChecksumValue]}
}

func objectKey(bucket, key string) string { return bucket + "/" + key }

// conditions are the preconditions of a write.
type conditions struct {
	ifMatch, ifNoneMatch string
}

func (c conditions) any() bool { return c.ifMatch != "" || c.ifNoneMatch != "" }

func writeConditions(h http.Header) conditions {
	return conditions{ifMatch: h.Get("If-Match"), ifNoneMatch: h.Get("If-None-Match")}
}

func etagMatches(cond, etag string) bool {
	for _, c := range strings.Split(cond, ",") {
		c = strings.TrimSpace(c)
		if c == "*" || strings.Trim(c, `"`) == strings.Trim(etag, `"`) {
			return true
		}
	}
	return false
}

// stored is the current state of a key, read under s.mu.
type stored struct {
	exists bool
	size   int64
	meta   map[string]string
}

func (s *Server) current(bucket, key string) (stored, *s3Error) {
	obj, err := s.backend.HeadObject(bucket, key)
	if err != nil {
		if gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey) {
			return stored{}, nil
		}
		return stored{}, fromBackend(err)
	}
	obj.Contents.Close()
	return stored{exists: true, size: obj.Size, meta: obj.Metadata}, nil
}

// commitSeq returns how many writes to the key have completed; a write
// compares it before and after its transfer to detect a race.
func (s *Server) commitSeq(bucket, key string) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.commits[objectKey(bucket, key)]
}

// checkWrite applies the preconditions of a write to cur; s.mu is held.
func (s *Server) checkWrite(req *request, cond conditions, cur stored, seq uint64) *s3Error {
	if !cond.any() {
		return nil
	}
	if s.opts.ConflictOnConcurrentWrite && s.commits[objectKey(req.bucket, req.key)] != seq {
		return errorf(http.StatusConflict, "ConditionalRequestConflict",
			"A conflicting conditional operation is currently in progress against this resource. Please try again.")
	}
	if cond.ifNoneMatch != "" {
		if cond.ifNoneMatch != "*" {
			return errorf(http.StatusNotImplemented, "NotImplemented",
				"If-None-Match on writes only supports the value *")
		}
		if cur.exists {
			return errPrecondition("If-None-Match: the object already exists")
		}
	}
	if cond.ifMatch != "" {
		if !cur.exists {
			return errNoSuchKey(req.key)
		}
		if !etagMatches(cond.ifMatch, cur.meta[metaETag]) {
			return errPrecondition("If-Match: the ETag does not match")
		}
	}
	return nil
}

// newETag returns a random ETag in a directory bucket and the MD5 of the
// data in a general purpose bucket, as S3 does for single-part objects.
func (s *Server) newETag(req *request, data []byte) string {
	if req.directory {
		return `"` + s.randomHex(16) + `"`
	}
	sum := md5.Sum(data)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// store replaces the object; s.mu is held. The old object is deleted first
// because gofakes3's in-memory backend merges old metadata into new.
func (s *Server) store(bucket, key string, meta map[string]string, data []byte, replace bool) *s3Error {
	if replace {
		if _, err := s.backend.DeleteObject(bucket, key); err != nil {
			return fromBackend(err)
		}
	}
	meta[metaLastModified] = time.Now().UTC().Format(http.TimeFormat)
	if _, err := s.backend.PutObject(bucket, key, meta, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		return fromBackend(err)
	}
	s.commits[objectKey(bucket, key)]++
	return nil
}

func setChecksumMeta(meta map[string]string, c *checksum) {
	delete(meta, metaChecksumAlgo)
	delete(meta, metaChecksumValue)
	if c != nil {
		meta[metaChecksumAlgo] = c.algo
		meta[metaChecksumValue] = c.value
	}
}

func (s *Server) putObject(w http.ResponseWriter, r *http.Request, req *request) *s3Error {
	offsetHeader := r.Header.Get("x-amz-write-offset-bytes")
	appending := offsetHeader != ""
	var offset int64
	if appending {
		if !req.directory {
			return errorf(http.StatusNotImplemented, "NotImplemented",
				"x-amz-write-offset-bytes is only supported on directory buckets")
		}
		var err error
		offset, err = strconv.ParseInt(offsetHeader, 10, 64)
		if err != nil || offset < 0 {
			return errorf(http.StatusBadRequest, "InvalidArgument", "invalid x-amz-write-offset-bytes %q", offsetHeader)
		}
	}
	seq := s.commitSeq(req.bucket, req.key)
	data, trailers, e := readBody(r)
	if e != nil {
		return e
	}
	s.count(func(st *Stats) { st.BytesIn += int64(len(data)) })
	cks, e := verifyChecksums(r.Header, trailers, data)
	if e != nil {
		return e
	}
	if err := s.sleep(r.Context(), s.opts.Profile.Put, int64(len(data))); err != nil {
		return nil // the client has gone
	}
	cond := writeConditions(r.Header)

	s.mu.Lock()
	defer s.mu.Unlock()
	cur, e := s.current(req.bucket, req.key)
	if e != nil {
		return e
	}
	if e := s.checkWrite(req, cond, cur, seq); e != nil {
		return e
	}
	meta := requestMeta(r.Header)
	parts := 1
	if appending {
		if offset != cur.size {
			return errorf(http.StatusBadRequest, "InvalidWriteOffset",
				"The write offset value that you specified does not match the current object size (%d).", cur.size)
		}
		if cur.exists {
			parts = objectParts(cur.meta) + 1
			if parts > s.maxParts() {
				s.count(func(st *Stats) { st.TooManyParts++ })
				return errorf(http.StatusBadRequest, "TooManyParts",
					"You have attempted to add more parts than the maximum of %d that are allowed for this object.", s.maxParts())
			}
			old, err := s.backend.GetObject(req.bucket, req.key, nil)
			if err != nil {
				return fromBackend(err)
			}
			prefix, err := io.ReadAll(old.Contents)
			old.Contents.Close()
			if err != nil {
				return fromBackend(err)
			}
			data = append(prefix, data...)
			// An append keeps the object's metadata; the full-object
			// checksum is recomputed with the algorithm of the append, or the
			// one the object already had.
			meta = maps.Clone(cur.meta)
			algo := meta[metaChecksumAlgo]
			if cks != nil {
				algo = cks.algo
			}
			cks = nil
			if algo != "" {
				cks = &checksum{algo: algo, value: computeChecksum(algo, data)}
			}
		}
	}
	etag := s.newETag(req, data)
	meta[metaETag] = etag
	meta[metaParts] = strconv.Itoa(parts)
	setChecksumMeta(meta, cks)
	if e := s.store(req.bucket, req.key, meta, data, cur.exists); e != nil {
		return e
	}
	w.Header().Set("ETag", etag)
	if cks != nil {
		w.Header().Set("x-amz-checksum-"+cks.algo, cks.value)
		w.Header().Set("x-amz-checksum-type", "FULL_OBJECT")
	}
	if req.directory {
		w.Header().Set("x-amz-object-size", strconv.Itoa(len(data)))
		w.Header().Set("x-amz-storage-class", "EXPRESS_ONEZONE")
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// objectParts returns the parts an object is made of (1 for objects stored
// before parts were counted).
func objectParts(meta map[string]string) int {
	if n, err := strconv.Atoi(meta[metaParts]); err == nil && n > 0 {
		return n
	}
	return 1
}

// maxParts is the most parts one object may have.
func (s *Server) maxParts() int {
	if s.opts.MaxObjectParts > 0 {
		return s.opts.MaxObjectParts
	}
	return DefaultMaxObjectParts
}

// parseRange parses a single-range Range header. Malformed or multi-range
// values are ignored, as S3 does, and the whole object is returned.
func parseRange(v string) *gofakes3.ObjectRangeRequest {
	spec, ok := strings.CutPrefix(strings.TrimSpace(v), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return nil
	}
	first, last, ok := strings.Cut(spec, "-")
	if !ok {
		return nil
	}
	if first == "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			return nil
		}
		return &gofakes3.ObjectRangeRequest{FromEnd: true, End: n}
	}
	start, err := strconv.ParseInt(first, 10, 64)
	if err != nil || start < 0 {
		return nil
	}
	end := int64(gofakes3.RangeNoEnd)
	if last != "" {
		if end, err = strconv.ParseInt(last, 10, 64); err != nil || end < start {
			return nil
		}
	}
	return &gofakes3.ObjectRangeRequest{Start: start, End: end}
}

func (s *Server) getObject(w http.ResponseWriter, r *http.Request, req *request) *s3Error {
	head := r.Method == http.MethodHead
	var rng *gofakes3.ObjectRangeRequest
	if !head {
		rng = parseRange(r.Header.Get("Range"))
	}
	s.mu.RLock()
	var (
		obj *gofakes3.Object
		err error
	)
	if head {
		obj, err = s.backend.HeadObject(req.bucket, req.key)
	} else {
		obj, err = s.backend.GetObject(req.bucket, req.key, rng)
	}
	s.mu.RUnlock()
	if err != nil {
		delay := s.opts.Profile.GetFirstByte
		if head {
			delay = s.opts.Profile.Head
		}
		if s.sleep(r.Context(), delay, 0) != nil {
			return nil
		}
		return fromBackend(err)
	}
	defer obj.Contents.Close()
	meta := obj.Metadata
	etag := meta[metaETag]
	lastModified, _ := time.Parse(http.TimeFormat, meta[metaLastModified])

	if v := r.Header.Get("If-Match"); v != "" && !etagMatches(v, etag) {
		return errPrecondition("If-Match")
	}
	if v := r.Header.Get("If-Unmodified-Since"); v != "" && r.Header.Get("If-Match") == "" {
		if t, err := time.Parse(http.TimeFormat, v); err == nil && lastModified.After(t) {
			return errPrecondition("If-Unmodified-Since")
		}
	}
	notModified := false
	if v := r.Header.Get("If-None-Match"); v != "" {
		notModified = etagMatches(v, etag)
	} else if v := r.Header.Get("If-Modified-Since"); v != "" {
		if t, err := time.Parse(http.TimeFormat, v); err == nil && !lastModified.After(t) {
			notModified = true
		}
	}

	var length int64 = obj.Size
	if obj.Range != nil {
		length = obj.Range.Length
	}
	if head {
		if s.sleep(r.Context(), s.opts.Profile.Head, 0) != nil {
			return nil
		}
	} else if s.sleep(r.Context(), s.opts.Profile.GetFirstByte, length) != nil {
		return nil
	}

	h := w.Header()
	for k, v := range publicMeta(meta) {
		h.Set(k, v)
	}
	h.Set("ETag", etag)
	h.Set("Last-Modified", meta[metaLastModified])
	h.Set("Accept-Ranges", "bytes")
	if req.directory {
		h.Set("x-amz-storage-class", "EXPRESS_ONEZONE")
	}
	if notModified {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	if cks := storedChecksum(meta); cks != nil && obj.Range == nil &&
		strings.EqualFold(r.Header.Get("x-amz-checksum-mode"), "ENABLED") {
		h.Set("x-amz-checksum-"+cks.algo, cks.value)
		h.Set("x-amz-checksum-type", "FULL_OBJECT")
	}
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	status := http.StatusOK
	if obj.Range != nil {
		h.Set("Content-Range", "bytes "+strconv.FormatInt(obj.Range.Start, 10)+"-"+
			strconv.FormatInt(obj.Range.Start+obj.Range.Length-1, 10)+"/"+strconv.FormatInt(obj.Size, 10))
		status = http.StatusPartialContent
	}
	w.WriteHeader(status)
	if head {
		return nil
	}
	n, _ := io.Copy(w, obj.Contents)
	s.count(func(st *Stats) { st.BytesOut += n })
	return nil
}

func (s *Server) deleteObject(w http.ResponseWriter, r *http.Request, req *request) *s3Error {
	if s.sleep(r.Context(), s.opts.Profile.Delete, 0) != nil {
		return nil
	}
	ifMatch := r.Header.Get("If-Match")
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, e := s.current(req.bucket, req.key)
	if e != nil {
		return e
	}
	// S3 documents that a conditional delete of a missing object succeeds.
	if ifMatch != "" && cur.exists && !etagMatches(ifMatch, cur.meta[metaETag]) {
		return errPrecondition("If-Match: the ETag does not match")
	}
	if v := r.Header.Get("x-amz-if-match-size"); v != "" && cur.exists && v != strconv.FormatInt(cur.size, 10) {
		return errPrecondition("x-amz-if-match-size")
	}
	if cur.exists {
		if _, err := s.backend.DeleteObject(req.bucket, req.key); err != nil {
			return fromBackend(err)
		}
		s.commits[objectKey(req.bucket, req.key)]++
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type deleteRequest struct {
	Objects []struct {
		Key string `xml:"Key"`
	} `xml:"Object"`
	Quiet bool `xml:"Quiet"`
}

type deleteResult struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ DeleteResult"`
	Deleted []deletedObject
}

type deletedObject struct {
	Key string
}

// maxDeleteKeys is S3's limit on keys per DeleteObjects request.
const maxDeleteKeys = 1000

func (s *Server) deleteObjects(w http.ResponseWriter, r *http.Request, req *request) *s3Error {
	body, trailers, e := readBody(r)
	if e != nil {
		return e
	}
	cks, e := verifyChecksums(r.Header, trailers, body)
	if e != nil {
		return e
	}
	if cks == nil && r.Header.Get("Content-Md5") == "" {
		return errorf(http.StatusBadRequest, "InvalidRequest",
			"Missing required header for this request: Content-MD5 or x-amz-checksum-*")
	}
	var in deleteRequest
	if err := xml.Unmarshal(body, &in); err != nil || len(in.Objects) == 0 || len(in.Objects) > maxDeleteKeys {
		return errorf(http.StatusBadRequest, "MalformedXML",
			"The XML you provided was not well-formed or did not validate against our published schema (1 to %d keys)", maxDeleteKeys)
	}
	s.count(func(st *Stats) { st.DeletedKeys += int64(len(in.Objects)) })
	if s.sleep(r.Context(), s.opts.Profile.Delete, 0) != nil {
		return nil
	}
	var out deleteResult
	s.mu.Lock()
	for _, o := range in.Objects {
		cur, e := s.current(req.bucket, o.Key)
		if e != nil {
			s.mu.Unlock()
			return e
		}
		if cur.exists {
			if _, err := s.backend.DeleteObject(req.bucket, o.Key); err != nil {
				s.mu.Unlock()
				return fromBackend(err)
			}
			s.commits[objectKey(req.bucket, o.Key)]++
		}
		if !in.Quiet {
			out.Deleted = append(out.Deleted, deletedObject{Key: o.Key})
		}
	}
	s.mu.Unlock()
	writeXML(w, out)
	return nil
}

type copyObjectResult struct {
	XMLName      xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CopyObjectResult"`
	ETag         string
	LastModified string
}

func (s *Server) copyObject(w http.ResponseWriter, r *http.Request, req *request) *s3Error {
	raw := r.Header.Get("x-amz-copy-source")
	raw, _, _ = strings.Cut(raw, "?versionId=")
	// QueryUnescape, not PathUnescape: gocloud's s3blob encodes the source
	// with url.QueryEscape, which turns spaces into "+".
	src, err := url.QueryUnescape(raw)
	if err != nil {
		return errorf(http.StatusBadRequest, "InvalidArgument", "invalid x-amz-copy-source %q", raw)
	}
	srcBucket, srcKey, ok := strings.Cut(strings.TrimPrefix(src, "/"), "/")
	if !ok || srcKey == "" {
		return errorf(http.StatusBadRequest, "InvalidArgument", "x-amz-copy-source must be BUCKET/KEY")
	}
	seq := s.commitSeq(req.bucket, req.key)
	if s.sleep(r.Context(), s.opts.Profile.Put, 0) != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	srcObj, err := s.backend.GetObject(srcBucket, srcKey, nil)
	if err != nil {
		return fromBackend(err)
	}
	data, err := io.ReadAll(srcObj.Contents)
	srcObj.Contents.Close()
	if err != nil {
		return fromBackend(err)
	}
	if v := r.Header.Get("x-amz-copy-source-if-match"); v != "" && !etagMatches(v, srcObj.Metadata[metaETag]) {
		return errPrecondition("x-amz-copy-source-if-match")
	}
	if v := r.Header.Get("x-amz-copy-source-if-none-match"); v != "" && etagMatches(v, srcObj.Metadata[metaETag]) {
		return errPrecondition("x-amz-copy-source-if-none-match")
	}
	cur, e := s.current(req.bucket, req.key)
	if e != nil {
		return e
	}
	if e := s.checkWrite(req, writeConditions(r.Header), cur, seq); e != nil {
		return e
	}
	meta := publicMeta(srcObj.Metadata)
	if strings.EqualFold(r.Header.Get("x-amz-metadata-directive"), "REPLACE") {
		meta = requestMeta(r.Header)
	}
	setChecksumMeta(meta, storedChecksum(srcObj.Metadata))
	etag := s.newETag(req, data)
	meta[metaETag] = etag
	meta[metaParts] = "1" // a copy starts a new count of appends
	if e := s.store(req.bucket, req.key, meta, data, cur.exists); e != nil {
		return e
	}
	writeXML(w, copyObjectResult{ETag: etag, LastModified: time.Now().UTC().Format("2006-01-02T15:04:05.000Z")})
	return nil
}
