package tiered_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/internal/emulators"
)

func tieredURL(hot, cold string) string {
	return "tiered://?" + url.Values{"hot": {hot}, "cold": {cold}, "manual": {"true"}}.Encode()
}

// The tiers open at once: a cold tier that fails ends the open at once,
// though the hot tier's open would wait its whole connect_timeout (a minute
// here); and a tier that does not answer is named in the error.
func TestOpenTiersAtOnce(t *testing.T) {
	addr := emulators.Blackhole(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := blob.Open(ctx, tieredURL("gcsrapid://b?pool_size=0&connect_timeout=1m&endpoint="+addr, "mem://?bogus=1"))
	if ctx.Err() != nil {
		t.Fatalf("the open waited for the hot tier: %v", err)
	}
	if !errors.Is(err, blob.ErrInvalidArgument) || !strings.Contains(err.Error(), "cold tier") || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("open with a refused cold URL: %v", err)
	}
	_, err = blob.Open(ctx, tieredURL("gcsrapid://b?pool_size=0&connect_timeout=300ms&endpoint="+addr, "mem://"))
	if err == nil || !strings.Contains(err.Error(), "hot tier") || !strings.Contains(err.Error(), addr) || ctx.Err() != nil {
		t.Errorf("open with a hot tier that does not answer: %v", err)
	}
}
