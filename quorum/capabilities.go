package quorum

import (
	"github.com/zonalblob/zonalblob/blob"
)

var (
	_ blob.Finalizer          = (*Store)(nil)
	_ blob.CapabilityReporter = (*Store)(nil)
)

// Capabilities implements blob.CapabilityReporter. Prewarm is native (every
// replica is prewarmed), so a pool.Creator over a quorum serves pooled
// creates in one round trip per replica; Finalize is native where every
// replica's is. Appends, copies and random access go through the blob
// helpers' fallbacks (see the package doc).
func (s *Store) Capabilities() blob.Capabilities {
	c := blob.Capabilities{Prewarm: true, Finalize: true, Retire: true}
	for _, r := range s.reps {
		c.Finalize = c.Finalize && blob.CapabilitiesOf(r.s).Finalize
	}
	return c
}
