package bench

import (
	"testing"

	"github.com/zonalblob/zonalblob/internal/emulators"
)

// azureUnavailable ends a test whose Azure scenario skipped: a skip that
// says how to install Azurite, or a failure where emulators are required.
func azureUnavailable(t *testing.T, skip *SkipError) {
	t.Helper()
	emulators.Unavailable(t, "azurite", skip)
}
