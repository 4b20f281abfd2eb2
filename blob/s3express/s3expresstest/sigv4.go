package s3expresstest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sigV4 is the parsed signature of a request, from its Authorization header
// or its presigned query.
type sigV4 struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
	amzDate                          string
	presigned                        bool
	expires                          time.Duration
}

func parseSigV4(r *http.Request) (sigV4, bool) {
	var v sigV4
	var cred, signed string
	if auth := r.Header.Get("Authorization"); auth != "" {
		rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
		if !ok {
			return v, false
		}
		for _, part := range strings.Split(rest, ",") {
			k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
			switch k {
			case "Credential":
				cred = val
			case "SignedHeaders":
				signed = val
			case "Signature":
				v.signature = val
			}
		}
		v.amzDate = r.Header.Get("X-Amz-Date")
	} else {
		q := r.URL.Query()
		if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
			return v, false
		}
		cred, signed, v.signature = q.Get("X-Amz-Credential"), q.Get("X-Amz-SignedHeaders"), q.Get("X-Amz-Signature")
		v.amzDate, v.presigned = q.Get("X-Amz-Date"), true
		secs, err := strconv.Atoi(q.Get("X-Amz-Expires"))
		if err != nil {
			return v, false
		}
		v.expires = time.Duration(secs) * time.Second
	}
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" || signed == "" || v.signature == "" || v.amzDate == "" {
		return v, false
	}
	v.accessKey, v.date, v.region, v.service = parts[0], parts[1], parts[2], parts[3]
	v.signedHeaders = strings.Split(signed, ";")
	return v, true
}

// awsEscape is SigV4's URI encoding: every byte except A-Z a-z 0-9 - _ . ~
// as %XX with upper-case hex.
func awsEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// canonicalRequest builds the SigV4 canonical request from the request as
// it came off the wire: S3 signs the path exactly as sent, without
// normalizing or re-escaping it.
func canonicalRequest(r *http.Request, v sigV4, payloadHash string) string {
	rawPath, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	type kv struct{ k, v string }
	var params []kv
	for _, p := range strings.Split(rawQuery, "&") {
		if p == "" {
			continue
		}
		k, val, _ := strings.Cut(p, "=")
		dk, err1 := url.QueryUnescape(k)
		dv, err2 := url.QueryUnescape(val)
		if err1 != nil || err2 != nil {
			dk, dv = k, val
		}
		if v.presigned && dk == "X-Amz-Signature" {
			continue
		}
		params = append(params, kv{awsEscape(dk), awsEscape(dv)})
	}
	slices.SortFunc(params, func(a, b kv) int {
		if c := strings.Compare(a.k, b.k); c != 0 {
			return c
		}
		return strings.Compare(a.v, b.v)
	})
	var query []string
	for _, p := range params {
		query = append(query, p.k+"="+p.v)
	}
	var headers strings.Builder
	for _, name := range v.signedHeaders {
		var vals []string
		switch name {
		case "host":
			vals = []string{r.Host}
		case "content-length":
			vals = r.Header.Values(name)
			if len(vals) == 0 {
				vals = []string{strconv.FormatInt(r.ContentLength, 10)}
			}
		default:
			vals = r.Header.Values(name)
		}
		for i, val := range vals {
			vals[i] = strings.Join(strings.Fields(val), " ")
		}
		headers.WriteString(name + ":" + strings.Join(vals, ",") + "\n")
	}
	return strings.Join([]string{r.Method, rawPath, strings.Join(query, "&"), headers.String(),
		strings.Join(v.signedHeaders, ";"), payloadHash}, "\n")
}

// verifySignature checks a request's SigV4 signature with secret.
func verifySignature(r *http.Request, v sigV4, secret string, now time.Time) *s3Error {
	t, err := time.Parse("20060102T150405Z", v.amzDate)
	if err != nil || !strings.HasPrefix(v.amzDate, v.date) {
		return errorf(http.StatusForbidden, "AccessDenied", "invalid X-Amz-Date %q", v.amzDate)
	}
	if v.presigned && now.After(t.Add(v.expires)) {
		return errorf(http.StatusForbidden, "AccessDenied", "Request has expired")
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		payload = "UNSIGNED-PAYLOAD"
	}
	scope := strings.Join([]string{v.date, v.region, v.service, "aws4_request"}, "/")
	creq := canonicalRequest(r, v, payload)
	sum := sha256.Sum256([]byte(creq))
	toSign := "AWS4-HMAC-SHA256\n" + v.amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+secret), v.date)
	key = hmacSHA256(key, v.region)
	key = hmacSHA256(key, v.service)
	key = hmacSHA256(key, "aws4_request")
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(v.signature)) {
		return errorf(http.StatusForbidden, "SignatureDoesNotMatch",
			"The request signature we calculated does not match the signature you provided. Check your key and signing method.")
	}
	return nil
}
