package s3expresstest

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/xml"
	"hash/fnv"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/johannesboyne/gofakes3"
)

type listContent struct {
	Key               string
	LastModified      string
	ETag              string
	Size              int64
	StorageClass      string
	ChecksumAlgorithm string `xml:",omitempty"`
}

type listPrefix struct {
	Prefix string
}

type listResult struct {
	XMLName               xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name                  string
	Prefix                string
	Delimiter             string `xml:",omitempty"`
	Marker                *string
	NextMarker            string `xml:",omitempty"`
	StartAfter            string `xml:",omitempty"`
	ContinuationToken     string `xml:",omitempty"`
	NextContinuationToken string `xml:",omitempty"`
	KeyCount              *int
	MaxKeys               int
	EncodingType          string `xml:",omitempty"`
	IsTruncated           bool
	Contents              []listContent
	CommonPrefixes        []listPrefix
}

// listEntry is a key or a common prefix, in listing order.
type listEntry struct {
	name     string
	isPrefix bool
	rank     uint64
}

// rank places a name in a directory bucket's listing: a seeded hash, so the
// order looks random yet is the same on every page and does not depend on
// which other keys exist. That is what lets a continuation token resume.
func (s *Server) rank(name string) uint64 {
	h := fnv.New64a()
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], s.opts.Seed)
	h.Write(seed[:])
	h.Write([]byte(name))
	x := h.Sum64()
	// splitmix64 finalizer: FNV alone leaves keys with a common prefix close.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func (s *Server) listObjects(w http.ResponseWriter, r *http.Request, req *request) *s3Error {
	q := r.URL.Query()
	v2 := q.Get("list-type") == "2"
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	_, hasStartAfter := q["start-after"]
	if req.directory {
		switch {
		case !v2:
			return errorf(http.StatusNotImplemented, "NotImplemented",
				"directory buckets only support ListObjectsV2")
		case hasStartAfter:
			return errorf(http.StatusBadRequest, "InvalidArgument",
				"start-after is not supported for directory buckets")
		case prefix != "" && !strings.HasSuffix(prefix, "/"):
			return errorf(http.StatusBadRequest, "InvalidArgument",
				"Prefixes for directory buckets must end in the delimiter '/'")
		case delim != "" && delim != "/":
			return errorf(http.StatusBadRequest, "InvalidArgument",
				"Delimiter for directory buckets must be '/'")
		}
	}
	encoding := q.Get("encoding-type")
	if encoding != "" && encoding != "url" {
		return errorf(http.StatusBadRequest, "InvalidArgument", "Invalid Encoding Method specified in Request")
	}
	maxKeys := 1000
	if v := q.Get("max-keys"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return errorf(http.StatusBadRequest, "InvalidArgument", "Provided max-keys not an integer or within integer range")
		}
		maxKeys = min(n, 1000)
	}
	// after is the name the page starts after; "" starts at the beginning.
	var after string
	token := q.Get("continuation-token")
	switch {
	case v2 && token != "":
		b, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil || len(b) == 0 || b[0] != 'k' {
			return errorf(http.StatusBadRequest, "InvalidArgument", "The continuation token provided is incorrect")
		}
		after = string(b[1:])
	case v2:
		after = q.Get("start-after")
	default:
		after = q.Get("marker")
	}
	if s.sleep(r.Context(), s.opts.Profile.List, 0) != nil {
		return nil
	}

	// Only the prefix goes to gofakes3: its delimiter matching is "best
	// effort" (it trims delimiter characters and splits on them), which breaks
	// multi-character delimiters. S3's rule is applied here instead.
	p := gofakes3.Prefix{HasPrefix: prefix != "", Prefix: prefix}
	s.mu.RLock()
	all, err := s.backend.ListBucket(req.bucket, &p, gofakes3.ListBucketPage{})
	if err != nil {
		s.mu.RUnlock()
		return fromBackend(err)
	}
	entries := make([]listEntry, 0, len(all.Contents))
	seenPrefix := map[string]bool{}
	for _, c := range all.Contents {
		rest := strings.TrimPrefix(c.Key, prefix)
		if i := strings.Index(rest, delim); delim != "" && i >= 0 {
			cp := prefix + rest[:i+len(delim)]
			if !seenPrefix[cp] {
				seenPrefix[cp] = true
				entries = append(entries, listEntry{name: cp, isPrefix: true})
			}
			continue
		}
		entries = append(entries, listEntry{name: c.Key})
	}
	less := func(a, b listEntry) int { return strings.Compare(a.name, b.name) }
	if req.directory {
		for i := range entries {
			entries[i].rank = s.rank(entries[i].name)
		}
		less = func(a, b listEntry) int {
			if a.rank != b.rank {
				if a.rank < b.rank {
					return -1
				}
				return 1
			}
			return strings.Compare(a.name, b.name)
		}
	}
	slices.SortFunc(entries, less)
	start := 0
	if after != "" {
		pivot := listEntry{name: after}
		if req.directory {
			pivot.rank = s.rank(after)
		}
		start, _ = slices.BinarySearchFunc(entries, pivot, less)
		for start < len(entries) && less(entries[start], pivot) <= 0 {
			start++
		}
	}
	page := entries[start:min(len(entries), start+maxKeys)]
	truncated := start+len(page) < len(entries)

	enc := func(v string) string {
		if encoding == "url" {
			return strings.ReplaceAll(url.QueryEscape(v), "+", "%20")
		}
		return v
	}
	storageClass := "STANDARD"
	if req.directory {
		storageClass = "EXPRESS_ONEZONE"
	}
	out := listResult{
		Name: req.bucket, Prefix: enc(prefix), Delimiter: enc(delim),
		MaxKeys: maxKeys, EncodingType: encoding, IsTruncated: truncated,
	}
	for _, e := range page {
		if e.isPrefix {
			out.CommonPrefixes = append(out.CommonPrefixes, listPrefix{Prefix: enc(e.name)})
			continue
		}
		obj, err := s.backend.HeadObject(req.bucket, e.name)
		if err != nil {
			continue // deleted between list and head: leave it out
		}
		obj.Contents.Close()
		lm, _ := time.Parse(http.TimeFormat, obj.Metadata[metaLastModified])
		c := listContent{
			Key: enc(e.name), LastModified: lm.UTC().Format("2006-01-02T15:04:05.000Z"),
			ETag: obj.Metadata[metaETag], Size: obj.Size, StorageClass: storageClass,
		}
		if a := obj.Metadata[metaChecksumAlgo]; a != "" {
			c.ChecksumAlgorithm = strings.ToUpper(a)
		}
		out.Contents = append(out.Contents, c)
	}
	s.mu.RUnlock()

	var last string
	if len(page) > 0 {
		last = page[len(page)-1].name
	}
	if v2 {
		n := len(out.Contents) + len(out.CommonPrefixes)
		out.KeyCount = &n
		out.ContinuationToken = token
		out.StartAfter = enc(q.Get("start-after"))
		if truncated {
			out.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte("k" + last))
		}
	} else {
		marker := enc(q.Get("marker"))
		out.Marker = &marker
		if truncated {
			out.NextMarker = enc(last)
		}
	}
	writeXML(w, out)
	return nil
}
