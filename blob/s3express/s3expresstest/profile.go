package s3expresstest

import (
	"fmt"
	"slices"
	"time"

	"github.com/zonalblob/zonalblob/blob/latency"
)

// Profile is the latency of each operation the server answers. The zero
// Profile adds no delay. Each Dist carries the Source of its numbers.
type Profile struct {
	Name string

	// CreateSession is the delay of a CreateSession call.
	CreateSession latency.Dist
	// Put is the delay before a PutObject, UploadPart, CopyObject,
	// CreateMultipartUpload or CompleteMultipartUpload is acknowledged,
	// excluding the transfer of the body.
	Put latency.Dist
	// GetFirstByte is the delay before the first byte of a GetObject.
	GetFirstByte latency.Dist
	// TransferPerMiB is added once per MiB of request or response body.
	TransferPerMiB latency.Dist
	Head           latency.Dist
	List           latency.Dist
	Delete         latency.Dist
}

const (
	expressSource = "AWS S3 Express One Zone docs (docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-one-zone.html): " +
		"\"consistent single-digit millisecond\" first-byte read and write latency, \"up to 10x faster than S3 Standard\"; " +
		"p50/p99 chosen inside that bound"
	standardSource = "derived from the S3 Express figure and AWS's \"up to 10x faster than S3 Standard\" " +
		"(docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-one-zone.html): S3 Standard first byte ~8-10x the " +
		"Express numbers; consistent with the regional GCS figures in DESIGN.md (create p50 39.5 ms, p99 50 ms; get p50 18 ms, p99 37 ms)"
	transferSource = "assumption, not a published figure: ~100 MiB/s per connection, the order of magnitude AWS's S3 " +
		"performance guidelines give per request; scale it for your network"
)

func dist(p50, p99 time.Duration, source string) latency.Dist {
	return latency.Dist{P50: p50, P99: p99, Source: source}
}

var profiles = map[string]func() Profile{
	// "express": single-digit milliseconds for writes and first-byte reads.
	"express": func() Profile {
		ms := time.Millisecond
		return Profile{
			Name:           "express",
			CreateSession:  dist(5*ms, 12*ms, expressSource),
			Put:            dist(4*ms, 9*ms, expressSource),
			GetFirstByte:   dist(4*ms, 9*ms, expressSource),
			TransferPerMiB: dist(8*ms, 16*ms, transferSource),
			Head:           dist(3*ms, 8*ms, expressSource),
			List:           dist(6*ms, 15*ms, expressSource),
			Delete:         dist(4*ms, 9*ms, expressSource),
		}
	},
	// "standard": S3 Standard in a region, for the regional s3:// comparison.
	"standard": func() Profile {
		ms := time.Millisecond
		return Profile{
			Name:           "standard",
			CreateSession:  latency.Dist{}, // general purpose buckets have no sessions
			Put:            dist(40*ms, 100*ms, standardSource),
			GetFirstByte:   dist(35*ms, 90*ms, standardSource),
			TransferPerMiB: dist(8*ms, 16*ms, transferSource),
			Head:           dist(25*ms, 70*ms, standardSource),
			List:           dist(45*ms, 110*ms, standardSource),
			Delete:         dist(30*ms, 80*ms, standardSource),
		}
	},
	// "zero": no delay, for functional tests.
	"zero": func() Profile { return Profile{Name: "zero"} },
}

// ProfileNames returns the names ProfileByName accepts, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ProfileByName returns the named profile: "express" (S3 Express One Zone,
// p50 4 ms / p99 9 ms writes and first-byte reads), "standard" (S3 Standard,
// p50 35-40 ms / p99 90-100 ms) or "zero" (no delay).
func ProfileByName(name string) (Profile, error) {
	f, ok := profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("s3expresstest: unknown latency profile %q (known: %v)", name, ProfileNames())
	}
	return f(), nil
}

// MustProfile is ProfileByName for names known at compile time; it panics on
// an unknown name.
func MustProfile(name string) Profile {
	p, err := ProfileByName(name)
	if err != nil {
		panic(err)
	}
	return p
}
