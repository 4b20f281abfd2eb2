package gcsrapidtest

import (
	"fmt"
	"sort"
	"time"

	"github.com/zonalblob/zonalblob/blob/latency"
)

// Profile is the server-side delay of each kind of operation. Every field is
// a seeded distribution (see Options.Seed), so two runs with the same seed and
// the same sequence of calls see the same delays. The zero Profile adds no delay.
//
// Delays are charged on the server before it answers, which is where a real
// service spends them; client CPU time and loopback round trips come on top.
type Profile struct {
	// Name identifies the profile in benchmark output.
	Name string

	// CreateAppendable is charged once when a stream creates an appendable
	// object (write_object_spec with appendable=true) or takes one over
	// (append_object_spec): the metadata operation that opens it.
	CreateAppendable latency.Dist
	// Flush is charged for each flush or state lookup of an open appendable object.
	Flush latency.Dist
	// Finalize is charged when an appendable object is finalized (finish_write).
	Finalize latency.Dist
	// Write is charged when a non-appendable object is committed: a one-shot
	// write, the last message of a resumable upload, or a rewrite (copy).
	Write latency.Dist
	// UploadStart is charged by StartResumableWrite.
	UploadStart latency.Dist
	// WritePerMiB is charged per MiB of object data received, pro rata.
	WritePerMiB latency.Dist

	// FirstByte is charged when a read stream opens, before the first reply.
	FirstByte latency.Dist
	// ReadPerMiB is charged per MiB of object data sent, pro rata.
	ReadPerMiB latency.Dist

	// Stat is charged by GetObject and UpdateObject on an existing object.
	Stat latency.Dist
	// StatMissing is charged by GetObject when the object does not exist.
	StatMissing latency.Dist
	// List is charged per ListObjects page.
	List latency.Dist
	// Delete is charged by DeleteObject.
	Delete latency.Dist

	// StaleSize is how far behind the truth the size (and checksum) that
	// metadata reads report for an unfinalized appendable object may be:
	// GetObject, ListObjects and a read stream's metadata show it as of its
	// last flush at least StaleSize ago (its first flush is known at once).
	// Reads return every byte flushed. Zero reports the truth.
	StaleSize time.Duration
}

// Sources of the published figures the named profiles are built from.
const (
	// SourceOneWeirdTrick is the GCS Rapid blog post that measured
	// create+write+finalize at 80-100 ms, a flush of an open appendable object
	// at about 1 ms, a pooled write+flush at 2-3 ms and a 1 MiB flush at
	// p50 20 ms / p99 33 ms (2-3x faster than a regional bucket).
	SourceOneWeirdTrick = `"One Weird Trick" GCS Rapid blog`
	// SourceLogSpikeReport measured a regional bucket: create of 1.2-4 KB
	// p50 39.5 ms / p99 50 ms, get p50 18 ms / p99 37 ms, HEAD of a missing
	// name 11-14 ms.
	SourceLogSpikeReport = "log spike report (GCS regional)"
	// SourceBeam40677 measured the start of a resumable upload session from
	// the Java client at 85 ms.
	SourceBeam40677 = "Apache Beam PR 40677"
	// derived marks a figure computed from the others because no
	// measurement was published; the Source says how.
	derived = "derived: "
)

func dist(p50, p99 time.Duration, source string) latency.Dist {
	return latency.Dist{P50: p50, P99: p99, Source: source}
}

// Rapid models a GCS Rapid (zonal) bucket.
//
// Creating and finalizing an appendable object are metadata operations of
// 40-50 ms each, so a naive create+write+finalize lands at 80-100 ms;
// a flush of an open object costs about 1 ms (SourceOneWeirdTrick).
func Rapid() Profile {
	return Profile{
		Name: "rapid",
		// 40-50 ms per metadata operation; two of them make the published
		// 80-100 ms create+write+finalize.
		// The median sits at the bottom of the range because the client,
		// loopback and timer wakeups add 5-10 ms to a create+write+finalize
		// of their own (compare the zero profile in
		// BenchmarkRapidCreateWriteFinalize); the total then lands near 90 ms.
		CreateAppendable: dist(40*time.Millisecond, 50*time.Millisecond, SourceOneWeirdTrick+": metadata operation 40-50 ms"),
		Finalize:         dist(40*time.Millisecond, 50*time.Millisecond, SourceOneWeirdTrick+": metadata operation 40-50 ms"),
		// "about 1 ms" for a flush; the 2-3 ms of a pooled write+flush is the
		// flush plus the client's own work and its round trip, which the
		// client adds on top, so the tail is kept at 2 ms.
		Flush: dist(1*time.Millisecond, 2*time.Millisecond, SourceOneWeirdTrick+": flush of an open appendable object ~1 ms"),
		// A 1 MiB flush is p50 20 ms / p99 33 ms; the 1 ms flush is charged
		// separately, the rest is transfer.
		WritePerMiB: dist(19*time.Millisecond, 32*time.Millisecond, SourceOneWeirdTrick+": 1 MiB flush p50 20 ms, p99 33 ms, minus the 1 ms flush"),
		// A non-appendable write is not allowed on a zonal bucket; the figure
		// is what a create+finalize costs, for rewrites into the bucket.
		Write:       dist(88*time.Millisecond, 100*time.Millisecond, SourceOneWeirdTrick+": create+write+finalize 80-100 ms"),
		UploadStart: dist(85*time.Millisecond, 85*time.Millisecond, SourceBeam40677+": upload session start 85 ms"),
		// No published zonal read figure: the regional get (p50 18 ms,
		// p99 37 ms) divided by 2.5, the middle of "2-3x faster than regional".
		FirstByte:  dist(7200*time.Microsecond, 14800*time.Microsecond, derived+SourceLogSpikeReport+" get p50 18 ms / p99 37 ms ÷ 2.5 ("+SourceOneWeirdTrick+": 2-3x faster)"),
		ReadPerMiB: dist(19*time.Millisecond, 32*time.Millisecond, derived+"same as WritePerMiB ("+SourceOneWeirdTrick+")"),
		Stat:       dist(7200*time.Microsecond, 14800*time.Microsecond, derived+SourceLogSpikeReport+" get ÷ 2.5 ("+SourceOneWeirdTrick+": 2-3x faster)"),
		StatMissing: dist(4800*time.Microsecond, 5600*time.Microsecond,
			derived+SourceLogSpikeReport+" missing HEAD 11-14 ms ÷ 2.5 ("+SourceOneWeirdTrick+": 2-3x faster)"),
		List:   dist(7200*time.Microsecond, 14800*time.Microsecond, derived+"same as Stat; no published list figure"),
		Delete: dist(40*time.Millisecond, 50*time.Millisecond, SourceOneWeirdTrick+": metadata operation 40-50 ms"),
		// The service may report an out of date size for an unfinalized
		// object (client library comments; gcsfuse's handling of stale
		// sizes). No figure is published: a metadata operation's length.
		StaleSize: 50 * time.Millisecond,
	}
}

// Regional models an ordinary regional GCS bucket (SourceLogSpikeReport,
// SourceBeam40677).
func Regional() Profile {
	return Profile{
		Name: "regional",
		// Create of 1.2-4 KB objects: p50 39.5 ms, p99 50 ms.
		Write:       dist(39500*time.Microsecond, 50*time.Millisecond, SourceLogSpikeReport+": create 1.2-4 KB p50 39.5 ms, p99 50 ms"),
		UploadStart: dist(85*time.Millisecond, 85*time.Millisecond, SourceBeam40677+": upload session start 85 ms"),
		// Regional is 2-3x slower per MiB than Rapid's 20/33 ms: ×2.5.
		WritePerMiB: dist(50*time.Millisecond, 83*time.Millisecond, derived+SourceOneWeirdTrick+" 1 MiB flush p50 20 ms / p99 33 ms × 2.5 (2-3x slower on regional)"),
		ReadPerMiB:  dist(50*time.Millisecond, 83*time.Millisecond, derived+"same as WritePerMiB"),
		FirstByte:   dist(18*time.Millisecond, 37*time.Millisecond, SourceLogSpikeReport+": get p50 18 ms, p99 37 ms"),
		Stat:        dist(18*time.Millisecond, 37*time.Millisecond, SourceLogSpikeReport+": get p50 18 ms, p99 37 ms"),
		StatMissing: dist(12*time.Millisecond, 14*time.Millisecond, SourceLogSpikeReport+": HEAD of a missing name 11-14 ms"),
		List:        dist(18*time.Millisecond, 37*time.Millisecond, derived+"same as Stat; no published list figure"),
		Delete:      dist(39500*time.Microsecond, 50*time.Millisecond, derived+"same as Write ("+SourceLogSpikeReport+"); no published delete figure"),
		// Appendable objects exist only on zonal buckets; these are the
		// same metadata costs as a create, for completeness.
		CreateAppendable: dist(39500*time.Microsecond, 50*time.Millisecond, derived+"same as Write"),
		Finalize:         dist(39500*time.Microsecond, 50*time.Millisecond, derived+"same as Write"),
		Flush:            dist(2500*time.Microsecond, 8*time.Millisecond, derived+SourceOneWeirdTrick+" flush ~1 ms × 2.5"),
	}
}

// Zero adds no delay: for functional tests.
func Zero() Profile { return Profile{Name: "zero"} }

var profiles = map[string]func() Profile{
	"rapid":    Rapid,
	"regional": Regional,
	"zero":     Zero,
}

// ProfileNames lists the names ProfileByName accepts, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ProfileByName returns the named profile: "rapid", "regional" or "zero".
func ProfileByName(name string) (Profile, error) {
	f, ok := profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("gcsrapidtest: unknown latency profile %q (have %v)", name, ProfileNames())
	}
	return f(), nil
}
