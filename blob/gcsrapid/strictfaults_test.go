package gcsrapid_test

import (
	"context"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/conformance"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// The shared suite passes against an emulator with every real-service
// behaviour switched on: stale sizes, the 2 MiB message limit, takeovers
// refused without a generation, read streams ended after a short life,
// redirects, and write streams broken after their objects exist.
// (TestPutWhoseCreateLostItsReply covers replies lost.)
func TestConformanceUnderRapidFaults(t *testing.T) {
	p := gcsrapidtest.Zero()
	p.StaleSize = time.Hour
	srv := gcsrapidtest.Start(t, gcsrapidtest.Options{
		Profile: p, Seed: 11,
		MaxWriteMessage:              gcsrapidtest.MaxWriteMessage,
		RefuseZeroGenerationTakeover: true,
		ReadStreamLifetime:           50 * time.Millisecond,
		Redirects:                    20,
		// No BreakBeforeReply: an unconditional write whose reply was lost
		// and whose object another writer replaced before it could look
		// cannot tell whether it happened, and rightly fails, which the
		// suite's concurrent writers do not expect.
		WriteBreaks: []gcsrapidtest.WriteBreak{
			{At: gcsrapidtest.BreakAfterMessages, N: 1, Streams: 10, CreatesOnly: true},
			{At: gcsrapidtest.BreakAfterFlush, N: 2, Streams: 10},
			{At: gcsrapidtest.BreakAfterMessages, N: 2, Streams: 10, Redirect: true},
			{At: gcsrapidtest.BreakAfterFlush, N: 1, Streams: 10, Redirect: true, OmitGeneration: true},
		},
	})
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 4}})
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
	st := srv.Stats()
	if st.WriteBreaks == 0 || st.Redirects == 0 || st.MessagesRefused != 0 {
		t.Errorf("%d write breaks, %d redirects (want some of each), %d refused messages (want none)", st.WriteBreaks, st.Redirects, st.MessagesRefused)
	}
	t.Logf("%d write breaks, %d redirects, %d read streams ended", st.WriteBreaks, st.Redirects, st.ReadStreamsEnded)
}
