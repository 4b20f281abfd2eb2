package s3expresstest

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
)

// Multipart uploads are stored by gofakes3; the wrapper adds session auth,
// checksums of parts, preconditions on completion, and gives the completed
// object the metadata and ETag a directory bucket would.

func copyRecorded(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (s *Server) createMultipart(w http.ResponseWriter, r *http.Request, req *request) *s3Error {
	algo := strings.ToLower(r.Header.Get("x-amz-checksum-algorithm"))
	if _, ok := checksumAlgorithms[algo]; algo != "" && !ok {
		return errorf(http.StatusBadRequest, "InvalidRequest", "Checksum algorithm %q is not supported.", algo)
	}
	if s.sleep(r.Context(), s.opts.Profile.Put, 0) != nil {
		return nil
	}
	rec := httptest.NewRecorder()
	s.fake.ServeHTTP(rec, r)
	if rec.Code == http.StatusOK {
		var out struct {
			UploadID string `xml:"UploadId"`
		}
		if err := xml.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.UploadID == "" {
			return errorf(http.StatusInternalServerError, "InternalError", "gofakes3 answered %q", rec.Body.String())
		}
		meta := requestMeta(r.Header)
		if algo != "" {
			meta[metaChecksumAlgo] = algo
			rec.Header().Set("x-amz-checksum-algorithm", strings.ToUpper(algo))
		}
		s.mu.Lock()
		s.uploads[out.UploadID] = upload{bucket: req.bucket, key: req.key, meta: meta}
		s.mu.Unlock()
	}
	copyRecorded(w, rec)
	return nil
}

func (s *Server) uploadPart(w http.ResponseWriter, r *http.Request, req *request) *s3Error {
	data, trailers, e := readBody(r)
	if e != nil {
		return e
	}
	s.count(func(st *Stats) { st.BytesIn += int64(len(data)) })
	cks, e := verifyChecksums(r.Header, trailers, data)
	if e != nil {
		return e
	}
	if s.sleep(r.Context(), s.opts.Profile.Put, int64(len(data))) != nil {
		return nil
	}
	// gofakes3 reads the part itself: hand it the decoded payload.
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.ContentLength = int64(len(data))
	r.Header.Set("Content-Length", strconv.Itoa(len(data)))
	r.Header.Del("Content-Md5")
	if cks != nil {
		w.Header().Set("x-amz-checksum-"+cks.algo, cks.value)
	}
	s.fake.ServeHTTP(w, r)
	return nil
}

func (s *Server) completeMultipart(w http.ResponseWriter, r *http.Request, req *request) *s3Error {
	uploadID := r.URL.Query().Get("uploadId")
	seq := s.commitSeq(req.bucket, req.key)
	body, _, e := readBody(r)
	if e != nil {
		return e
	}
	var parts struct {
		Parts []struct {
			PartNumber int
		} `xml:"Part"`
	}
	if err := xml.Unmarshal(body, &parts); err != nil {
		return errorf(http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed: %v", err)
	}
	if s.sleep(r.Context(), s.opts.Profile.Put, 0) != nil {
		return nil
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	cur, e := s.current(req.bucket, req.key)
	if e != nil {
		return e
	}
	if e := s.checkWrite(req, writeConditions(r.Header), cur, seq); e != nil {
		return e
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	s.fake.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		copyRecorded(w, rec)
		return nil
	}
	var done struct {
		ETag string
	}
	_ = xml.Unmarshal(rec.Body.Bytes(), &done)

	obj, err := s.backend.GetObject(req.bucket, req.key, nil)
	if err != nil {
		return fromBackend(err)
	}
	data, err := io.ReadAll(obj.Contents)
	obj.Contents.Close()
	if err != nil {
		return fromBackend(err)
	}
	up, ok := s.uploads[uploadID]
	delete(s.uploads, uploadID)
	meta := map[string]string{}
	if ok {
		meta = maps.Clone(up.meta)
	}
	var cks *checksum
	if algo := meta[metaChecksumAlgo]; algo != "" {
		cks = &checksum{algo: algo, value: computeChecksum(algo, data)}
	}
	setChecksumMeta(meta, cks)
	etag := done.ETag
	if req.directory || etag == "" {
		etag = fmt.Sprintf(`"%s-%d"`, s.randomHex(16), len(parts.Parts))
	}
	meta[metaETag] = etag
	meta[metaParts] = strconv.Itoa(len(parts.Parts))
	// gofakes3 merged the replaced object's metadata into the new one:
	// store it again with exactly the metadata of CreateMultipartUpload.
	if e := s.store(req.bucket, req.key, meta, data, true); e != nil {
		return e
	}
	// store counted this completion; the gofakes3 write is the same commit.
	if req.directory {
		w.Header().Set("x-amz-storage-class", "EXPRESS_ONEZONE")
	}
	if cks != nil {
		w.Header().Set("x-amz-checksum-"+cks.algo, cks.value)
		w.Header().Set("x-amz-checksum-type", "FULL_OBJECT")
	}
	writeXML(w, struct {
		XMLName  xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CompleteMultipartUploadResult"`
		Location string
		Bucket   string
		Key      string
		ETag     string
	}{Location: s.objectURL(req.bucket, req.key), Bucket: req.bucket, Key: req.key, ETag: etag})
	return nil
}
