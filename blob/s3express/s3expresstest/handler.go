package s3expresstest

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/johannesboyne/gofakes3"
)

// s3Error is an S3 error answer.
type s3Error struct {
	Status   int
	Code     string
	Message  string
	injected bool // answered by a Fault, already counted
}

func (e *s3Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func errorf(status int, code, format string, args ...any) *s3Error {
	return &s3Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

var (
	errNoSuchKey = func(key string) *s3Error {
		return errorf(http.StatusNotFound, "NoSuchKey", "The specified key does not exist: %s", key)
	}
	errPrecondition = func(what string) *s3Error {
		return errorf(http.StatusPreconditionFailed, "PreconditionFailed",
			"At least one of the pre-conditions you specified did not hold (%s)", what)
	}
)

// fromBackend converts a gofakes3 error to an S3 answer.
func fromBackend(err error) *s3Error {
	var se *s3Error
	if errors.As(err, &se) {
		return se
	}
	var ge gofakes3.Error
	if errors.As(err, &ge) {
		code := ge.ErrorCode()
		msg := err.Error()
		var er *gofakes3.ErrorResponse
		if errors.As(err, &er) && er.Message != "" {
			msg = er.Message
		}
		return &s3Error{Status: code.Status(), Code: string(code), Message: msg}
	}
	return errorf(http.StatusInternalServerError, "InternalError", "%v", err)
}

var requestIDs atomic.Uint64

type errorBody struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string
	Message   string
	Resource  string `xml:",omitempty"`
	RequestID string `xml:"RequestId"`
	HostID    string `xml:"HostId"`
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, e *s3Error) {
	switch e.Status {
	case http.StatusPreconditionFailed:
		s.count(func(st *Stats) { st.PreconditionFailed++ })
	case http.StatusConflict:
		if e.Code == "ConditionalRequestConflict" && !e.injected {
			s.count(func(st *Stats) { st.Conflicts++ })
		}
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(e.Status)
	if r.Method == http.MethodHead {
		return
	}
	writeXML(w, errorBody{
		Code: e.Code, Message: e.Message, Resource: r.URL.Path,
		RequestID: w.Header().Get("x-amz-request-id"), HostID: "s3expresstest",
	})
}

func writeXML(w http.ResponseWriter, v any) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/xml")
	}
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(v)
}

// request is one routed request.
type request struct {
	bucket, key string
	op          Op
	directory   bool
	sess        *session
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.count(func(st *Stats) { st.Requests++ })
	id := fmt.Sprintf("%016X", requestIDs.Add(1))
	w.Header().Set("x-amz-request-id", id)
	w.Header().Set("x-amz-id-2", "s3expresstest/"+id)
	w.Header().Set("Server", "AmazonS3")

	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	q := r.URL.Query()
	req := &request{bucket: bucket, key: key, directory: IsDirectoryBucket(bucket)}
	req.op = classify(r, key)
	if bucket == "" {
		// ListBuckets and ListDirectoryBuckets are control-plane calls.
		if e := s.authenticate(r, nil); e != nil {
			s.writeError(w, r, e)
			return
		}
		s.fake.ServeHTTP(w, r)
		return
	}
	if ok, _ := s.backend.BucketExists(bucket); !ok && !(r.Method == http.MethodPut && key == "") {
		s.writeError(w, r, errorf(http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist: %s", bucket))
		return
	}

	if _, isSession := q["session"]; isSession && key == "" && r.Method == http.MethodGet {
		req.op = OpCreateSession
		if e := s.authenticate(r, nil); e != nil {
			s.writeError(w, r, e)
			return
		}
		s.observe(req.op, r)
		if e := s.seeOp(req.op, false); e != nil {
			s.writeError(w, r, e)
			return
		}
		s.createSession(w, r, req)
		return
	}

	// Bucket creation and deletion go to the regional endpoint and are
	// signed with the caller's own credentials, not a session.
	controlPlane := key == "" && (r.Method == http.MethodPut || r.Method == http.MethodDelete)
	// The SDK signs CopyObject and UploadPartCopy with the caller's own
	// SigV4 credentials and no session (DisableS3ExpressSessionAuth in their
	// endpoint parameters), so those need a signature, not a token.
	copyOp := r.Method == http.MethodPut && r.Header.Get("x-amz-copy-source") != "" &&
		r.Header.Get("x-amz-s3session-token") == ""
	if req.directory && !controlPlane && !copyOp {
		if e := s.authorize(r, req); e != nil {
			s.writeError(w, r, e)
			return
		}
	}
	if e := s.authenticate(r, req.sess); e != nil {
		s.writeError(w, r, e)
		return
	}
	s.observe(req.op, r)
	if e := s.seeOp(req.op, req.op == OpPutObject && r.Header.Get("x-amz-write-offset-bytes") != ""); e != nil {
		s.writeError(w, r, e)
		return
	}

	var err *s3Error
	switch req.op {
	case OpPutObject:
		err = s.putObject(w, r, req)
	case OpCopyObject:
		err = s.copyObject(w, r, req)
	case OpGetObject, OpHeadObject:
		err = s.getObject(w, r, req)
	case OpDeleteObject:
		err = s.deleteObject(w, r, req)
	case OpDeleteObjects:
		err = s.deleteObjects(w, r, req)
	case OpListObjects:
		err = s.listObjects(w, r, req)
	case OpCreateMultipart:
		err = s.createMultipart(w, r, req)
	case OpUploadPart:
		if r.Header.Get("x-amz-copy-source") != "" {
			err = errorf(http.StatusNotImplemented, "NotImplemented", "UploadPartCopy is not emulated")
			break
		}
		err = s.uploadPart(w, r, req)
	case OpCompleteUpload:
		err = s.completeMultipart(w, r, req)
	case OpAbortUpload:
		err = s.passThrough(w, r)
	default:
		err = s.other(w, r, req)
	}
	if err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) observe(op Op, r *http.Request) {
	if s.opts.Observe != nil {
		s.opts.Observe(op, r)
	}
}

// classify names the operation of a request from its method and query.
func classify(r *http.Request, key string) Op {
	q := r.URL.Query()
	has := func(k string) bool { _, ok := q[k]; return ok }
	switch {
	case key == "" && r.Method == http.MethodGet && (len(q) == 0 || has("list-type") || has("prefix") ||
		has("delimiter") || has("max-keys") || has("marker") || has("continuation-token") ||
		has("start-after") || has("encoding-type") || has("fetch-owner")) && !has("location") &&
		!has("uploads") && !has("versions") && !has("versioning") && !has("session"):
		return OpListObjects
	case key == "" && r.Method == http.MethodPost && has("delete"):
		return OpDeleteObjects
	case key == "":
		return OpOther
	case r.Method == http.MethodPost && has("uploads"):
		return OpCreateMultipart
	case r.Method == http.MethodPut && has("uploadId") && has("partNumber"):
		return OpUploadPart
	case r.Method == http.MethodPost && has("uploadId"):
		return OpCompleteUpload
	case r.Method == http.MethodDelete && has("uploadId"):
		return OpAbortUpload
	case has("uploadId"):
		return OpOther
	case r.Method == http.MethodPut && r.Header.Get("x-amz-copy-source") != "":
		return OpCopyObject
	case r.Method == http.MethodPut:
		return OpPutObject
	case r.Method == http.MethodGet:
		return OpGetObject
	case r.Method == http.MethodHead:
		return OpHeadObject
	case r.Method == http.MethodDelete:
		return OpDeleteObject
	}
	return OpOther
}

// authorize checks the session credentials of a directory bucket request.
func (s *Server) authorize(r *http.Request, req *request) *s3Error {
	token := r.Header.Get("x-amz-s3session-token")
	for k, v := range r.URL.Query() {
		if token == "" && strings.EqualFold(k, "x-amz-s3session-token") {
			token = v[0]
		}
	}
	if token == "" {
		s.count(func(st *Stats) { st.RejectedMissingToken++ })
		return errorf(http.StatusForbidden, "AccessDenied",
			"Access Denied: directory bucket requests need an x-amz-s3session-token from CreateSession")
	}
	deny := func(why string) *s3Error {
		s.count(func(st *Stats) { st.RejectedInvalidToken++ })
		return errorf(http.StatusForbidden, "AccessDenied", "Access Denied: %s", why)
	}
	s.sessMu.Lock()
	sess, ok := s.sessions[token]
	s.sessMu.Unlock()
	switch {
	case !ok:
		return deny("session token was not issued by this server")
	case time.Now().After(sess.expires):
		s.count(func(st *Stats) { st.RejectedInvalidToken++ })
		return errorf(http.StatusBadRequest, "ExpiredToken", "The provided token has expired.")
	case sess.bucket != req.bucket:
		return deny("session token is for bucket " + sess.bucket)
	case signingAccessKey(r) != sess.accessKey:
		return deny("request is not signed with the session's access key")
	case sess.readOnly && r.Method != http.MethodGet && r.Method != http.MethodHead:
		return deny("session is ReadOnly")
	}
	req.sess = &sess
	return nil
}

// authenticate verifies the SigV4 signature of a request: with the session
// secret for a directory bucket's data plane, else with the static
// credentials the server knows.
func (s *Server) authenticate(r *http.Request, sess *session) *s3Error {
	v, ok := parseSigV4(r)
	if !ok {
		s.count(func(st *Stats) { st.RejectedSignature++ })
		return errorf(http.StatusForbidden, "AccessDenied", "Access Denied: anonymous requests are not allowed")
	}
	secret, known := s.secrets[v.accessKey]
	if sess != nil {
		secret, known = sess.secret, v.accessKey == sess.accessKey
	}
	if !known {
		s.count(func(st *Stats) { st.RejectedSignature++ })
		return errorf(http.StatusForbidden, "InvalidAccessKeyId",
			"The AWS Access Key Id you provided does not exist in our records.")
	}
	if e := verifySignature(r, v, secret, time.Now()); e != nil {
		s.count(func(st *Stats) { st.RejectedSignature++ })
		return e
	}
	return nil
}

// signingAccessKey returns the access key of a SigV4 Authorization header or
// presigned query.
func signingAccessKey(r *http.Request) string {
	cred := r.URL.Query().Get("X-Amz-Credential")
	if auth := r.Header.Get("Authorization"); auth != "" {
		_, after, ok := strings.Cut(auth, "Credential=")
		if !ok {
			return ""
		}
		cred, _, _ = strings.Cut(after, ",")
	}
	ak, _, _ := strings.Cut(cred, "/")
	return ak
}

type createSessionResult struct {
	XMLName     xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CreateSessionResult"`
	Credentials struct {
		SessionToken    string
		SecretAccessKey string
		AccessKeyID     string `xml:"AccessKeyId"`
		Expiration      string
	}
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, req *request) {
	if !req.directory {
		s.writeError(w, r, errorf(http.StatusBadRequest, "InvalidRequest",
			"CreateSession is only supported on directory buckets"))
		return
	}
	mode := r.Header.Get("x-amz-create-session-mode")
	if mode != "" && mode != "ReadWrite" && mode != "ReadOnly" {
		s.writeError(w, r, errorf(http.StatusBadRequest, "InvalidArgument", "invalid session mode %q", mode))
		return
	}
	if err := s.sleep(r.Context(), s.opts.Profile.CreateSession, 0); err != nil {
		return
	}
	sess := session{
		bucket:    req.bucket,
		accessKey: "ASIA" + strings.ToUpper(s.randomHex(8)),
		secret:    s.randomHex(20),
		expires:   time.Now().Add(s.opts.SessionTTL),
		readOnly:  mode == "ReadOnly",
	}
	token := "s3x-" + s.randomHex(32)
	s.sessMu.Lock()
	for t, old := range s.sessions {
		// Kept one TTL past expiry so a late request still gets ExpiredToken.
		if time.Now().After(old.expires.Add(s.opts.SessionTTL)) {
			delete(s.sessions, t)
		}
	}
	s.sessions[token] = sess
	s.sessMu.Unlock()

	var out createSessionResult
	out.Credentials.SessionToken = token
	out.Credentials.SecretAccessKey = sess.secret
	out.Credentials.AccessKeyID = sess.accessKey
	out.Credentials.Expiration = sess.expires.UTC().Format(time.RFC3339)
	writeXML(w, out)
}

// other answers bucket-level requests: create, delete and head bucket here,
// the rest (location, versioning, multipart listings) by gofakes3.
func (s *Server) other(w http.ResponseWriter, r *http.Request, req *request) *s3Error {
	if req.key != "" || len(r.URL.Query()) != 0 {
		return s.passThrough(w, r)
	}
	switch r.Method {
	case http.MethodPut:
		if err := s.CreateBucket(req.bucket); err != nil {
			if gofakes3.IsAlreadyExists(err) {
				return errorf(http.StatusConflict, "BucketAlreadyOwnedByYou", "bucket %s already exists", req.bucket)
			}
			return errorf(http.StatusBadRequest, "InvalidBucketName", "%v", err)
		}
		w.Header().Set("Location", "/"+req.bucket)
		w.WriteHeader(http.StatusOK)
		return nil
	case http.MethodHead:
		if req.directory {
			w.Header().Set("x-amz-bucket-location-type", "AvailabilityZone")
		}
		w.WriteHeader(http.StatusOK)
		return nil
	}
	return s.passThrough(w, r)
}

// passThrough lets gofakes3 answer, under the write lock so it never
// interleaves with a conditional write.
func (s *Server) passThrough(w http.ResponseWriter, r *http.Request) *s3Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fake.ServeHTTP(w, r)
	return nil
}
