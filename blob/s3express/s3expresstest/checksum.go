package s3expresstest

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// checksumAlgorithms maps the lower-case algorithm name used in
// x-amz-checksum-NAME headers to its hash.
var checksumAlgorithms = map[string]func() hash.Hash{
	"crc32":     func() hash.Hash { return crc32.NewIEEE() },
	"crc32c":    func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
	"crc64nvme": func() hash.Hash { return crc64.New(crc64nvme) },
	"sha1":      sha1.New,
	"sha256":    sha256.New,
}

// crc64nvme is the reflected NVMe polynomial; Go's crc64 already applies the
// initial and final inversion the NVMe CRC uses.
var crc64nvme = crc64.MakeTable(0x9a6c9329ac4bc9b5)

// checksum is a stored full-object checksum.
type checksum struct {
	algo  string // lower case, e.g. "crc32c"
	value string // base64 of the big-endian digest
}

func computeChecksum(algo string, data []byte) string {
	h := checksumAlgorithms[algo]()
	h.Write(data)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// body reads a request body, decoding aws-chunked framing when the SDK uses
// it (it does over TLS, with the checksum in a trailer). It returns the
// payload and the trailing headers.
func readBody(r *http.Request) ([]byte, http.Header, *s3Error) {
	defer r.Body.Close()
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, nil, errorf(http.StatusBadRequest, "IncompleteBody", "reading body: %v", err)
	}
	if ph := r.Header.Get("x-amz-content-sha256"); len(ph) == 64 {
		if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != strings.ToLower(ph) {
			return nil, nil, errorf(http.StatusBadRequest, "XAmzContentSHA256Mismatch",
				"The provided 'x-amz-content-sha256' header does not match what was computed.")
		}
	}
	if !strings.HasPrefix(r.Header.Get("x-amz-content-sha256"), "STREAMING-") &&
		!strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") {
		return raw, nil, nil
	}
	data, trailers, err := decodeAWSChunked(raw)
	if err != nil {
		return nil, nil, errorf(http.StatusBadRequest, "IncompleteBody", "malformed aws-chunked body: %v", err)
	}
	if dl := r.Header.Get("x-amz-decoded-content-length"); dl != "" {
		if n, err := strconv.ParseInt(dl, 10, 64); err != nil || n != int64(len(data)) {
			return nil, nil, errorf(http.StatusBadRequest, "IncompleteBody",
				"x-amz-decoded-content-length %s does not match the %d bytes sent", dl, len(data))
		}
	}
	return data, trailers, nil
}

// decodeAWSChunked decodes "SIZE[;chunk-signature=SIG]\r\nDATA\r\n" chunks
// ending with a zero-size chunk and optional "name:value" trailer lines.
func decodeAWSChunked(raw []byte) ([]byte, http.Header, error) {
	br := bufio.NewReader(bytes.NewReader(raw))
	var out bytes.Buffer
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, nil, err
		}
		sizeField, _, _ := strings.Cut(strings.TrimRight(line, "\r\n"), ";")
		size, err := strconv.ParseInt(strings.TrimSpace(sizeField), 16, 64)
		if err != nil || size < 0 {
			return nil, nil, io.ErrUnexpectedEOF
		}
		if size == 0 {
			break
		}
		if _, err := io.CopyN(&out, br, size); err != nil {
			return nil, nil, err
		}
		if crlf, err := br.ReadString('\n'); err != nil || strings.TrimRight(crlf, "\r\n") != "" {
			return nil, nil, io.ErrUnexpectedEOF
		}
	}
	trailers := http.Header{}
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if name, value, ok := strings.Cut(line, ":"); ok {
			trailers.Set(strings.TrimSpace(name), strings.TrimSpace(value))
		}
		if err != nil {
			break
		}
	}
	return out.Bytes(), trailers, nil
}

// verifyChecksums checks Content-MD5 and any x-amz-checksum-* header or
// trailer against data. It returns the checksum to store: the one sent, or
// one computed with x-amz-checksum-algorithm / x-amz-sdk-checksum-algorithm
// when only the algorithm was named.
func verifyChecksums(h, trailers http.Header, data []byte) (*checksum, *s3Error) {
	if v, ok := h["Content-Md5"]; ok {
		want, err := base64.StdEncoding.DecodeString(v[0])
		if err != nil || len(want) != md5.Size {
			return nil, errorf(http.StatusBadRequest, "InvalidDigest", "The Content-MD5 you specified was invalid.")
		}
		got := md5.Sum(data)
		if !bytes.Equal(got[:], want) {
			return nil, errorf(http.StatusBadRequest, "BadDigest",
				"The Content-MD5 you specified did not match what we received.")
		}
	}
	var found *checksum
	for algo := range checksumAlgorithms {
		name := "x-amz-checksum-" + algo
		v := h.Get(name)
		if v == "" && trailers != nil {
			v = trailers.Get(name)
		}
		if v == "" {
			continue
		}
		if found != nil {
			return nil, errorf(http.StatusBadRequest, "InvalidRequest",
				"Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
		}
		if got := computeChecksum(algo, data); got != v {
			return nil, errorf(http.StatusBadRequest, "BadDigest",
				"The %s you specified did not match the calculated checksum.", strings.ToUpper(algo))
		}
		found = &checksum{algo: algo, value: v}
	}
	if found != nil {
		return found, nil
	}
	for _, hdr := range []string{"x-amz-checksum-algorithm", "x-amz-sdk-checksum-algorithm"} {
		if algo := strings.ToLower(h.Get(hdr)); algo != "" {
			if _, ok := checksumAlgorithms[algo]; !ok {
				return nil, errorf(http.StatusBadRequest, "InvalidRequest", "Checksum algorithm %q is not supported.", algo)
			}
			return &checksum{algo: algo, value: computeChecksum(algo, data)}, nil
		}
	}
	return nil, nil
}
