package pool

import (
	"context"

	"github.com/zonalblob/zonalblob/blob"
)

// A Creator adds Create to the store it wraps and passes every other optional
// capability through: natively where the wrapped store has it, otherwise as
// the blob helpers fall back.
var (
	_ blob.Prewarmer          = (*Creator)(nil)
	_ blob.Appender           = (*Creator)(nil)
	_ blob.Copier             = (*Creator)(nil)
	_ blob.ReaderAtOpener     = (*Creator)(nil)
	_ blob.Finalizer          = (*Creator)(nil)
	_ blob.CapabilityReporter = (*Creator)(nil)
)

// Prewarm implements blob.Prewarmer over the wrapped store.
func (c *Creator) Prewarm(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	return blob.Prewarm(ctx, c.Store, key, opts)
}

// NewAppender implements blob.Appender over the wrapped store.
func (c *Creator) NewAppender(ctx context.Context, key string, opts *blob.AppendOptions) (blob.Writer, error) {
	return blob.Append(ctx, c.Store, key, opts)
}

// Copy implements blob.Copier over the wrapped store.
func (c *Creator) Copy(ctx context.Context, dstKey, srcKey string, opts *blob.CopyOptions) error {
	return blob.Copy(ctx, c.Store, dstKey, srcKey, opts)
}

// OpenReaderAt implements blob.ReaderAtOpener over the wrapped store.
func (c *Creator) OpenReaderAt(ctx context.Context, key string) (blob.ReaderAt, error) {
	return blob.OpenReaderAt(ctx, c.Store, key)
}

// Finalize implements blob.Finalizer over the wrapped store.
func (c *Creator) Finalize(ctx context.Context, key string) error {
	return blob.Finalize(ctx, c.Store, key)
}

// Capabilities implements blob.CapabilityReporter: Create natively, the rest
// as the wrapped store serves it.
func (c *Creator) Capabilities() blob.Capabilities {
	caps := blob.CapabilitiesOf(c.Store)
	caps.Create = true
	caps.Retire = false // not forwarded: a retirement has no fallback
	return caps
}
