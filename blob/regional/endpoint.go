package regional

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// DefaultConnectTimeout bounds the first call of a gs:// store with an
// endpoint, the bucket's metadata, when the URL sets no connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// openGCSEndpoint opens gs://BUCKET?endpoint=HOST:PORT (gu is the URL after
// gocloudURL, its path already turned into ?prefix=): gocloud's gcsblob over
// a storage gRPC client on a plaintext, unauthenticated connection, as a GCS
// emulator serves google.storage.v2 (gcsrapidtest, zonalblob serve). Every
// parameter is checked before any dial; then one call, the bucket's
// metadata, proves within connect_timeout that the endpoint answers and the
// bucket exists. The returned release closes the client once the bucket is
// closed.
func openGCSEndpoint(ctx context.Context, gu *url.URL) (b *gcblob.Bucket, release func() error, err error) {
	q := driver.NewQuery(gu)
	endpoint := q.String("endpoint", "")
	prefix := q.String("prefix", "")
	timeout := q.Duration("connect_timeout", DefaultConnectTimeout)
	// gocloud's own gs:// parameters choose credentials and transports,
	// which a plaintext, unauthenticated emulator connection has no use for:
	// they are unknown here.
	if err := q.Err(); err != nil {
		return nil, nil, err
	}
	if err := checkEndpoint(endpoint); err != nil {
		return nil, nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "gs://%s: endpoint: %v", gu.Host, err)
	}
	if timeout <= 0 {
		return nil, nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "gs://%s: connect_timeout must be positive", gu.Host)
	}
	client, err := storage.NewGRPCClient(ctx,
		option.WithEndpoint(endpoint),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithoutAuthentication(),
		// Client metrics export to Cloud Monitoring, which an emulator has
		// no project for.
		storage.WithDisabledClientMetrics(),
	)
	if err != nil {
		return nil, nil, &blob.Error{Op: driver.OpOpen, Err: fmt.Errorf("gs://%s at %s: %w", gu.Host, endpoint, err)}
	}
	if err := probeBucket(ctx, client, gu.Host, endpoint, timeout); err != nil {
		client.Close()
		return nil, nil, err
	}
	b, err = gcsblob.OpenBucketGRPC(client, gu.Host, nil)
	if err != nil {
		client.Close()
		return nil, nil, &blob.Error{Op: driver.OpOpen, Kind: blob.ErrInvalidArgument, Err: err}
	}
	if prefix != "" {
		b = gcblob.PrefixedBucket(b, prefix)
	}
	return b, client.Close, nil
}

// probeBucket reads the bucket's metadata within timeout, so that an
// endpoint that does not answer, or a bucket it does not have, fails the
// open naming them instead of hanging or surfacing later as a missing object.
func probeBucket(ctx context.Context, client *storage.Client, bucket, endpoint string, timeout time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := client.Bucket(bucket).Attrs(pctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrBucketNotExist):
		return blob.Errorf(driver.OpOpen, "", blob.ErrBucketNotFound, "gs: bucket %q does not exist at %s", bucket, endpoint)
	case ctx.Err() != nil:
		return &blob.Error{Op: driver.OpOpen, Err: ctx.Err()}
	case pctx.Err() != nil:
		return blob.Errorf(driver.OpOpen, "", nil, "gs: %s did not answer within connect_timeout %v (bucket %q): %v", endpoint, timeout, bucket, err)
	}
	return blob.Errorf(driver.OpOpen, "", classify(err), "gs: bucket %q at %s: %w", bucket, endpoint, err)
}

// checkEndpoint refuses an endpoint that is not HOST:PORT, before any dial:
// the plaintext emulator connection takes no credentials, and gRPC would
// quote anything else, user information included, in its dial errors. The
// refusal never quotes the value.
func checkEndpoint(endpoint string) error {
	if endpoint == "" {
		return errors.New("is empty; want HOST:PORT of an emulator")
	}
	if strings.ContainsAny(endpoint, "@/?#") || strings.ContainsFunc(endpoint, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return errors.New("must be HOST:PORT of an emulator, without a scheme, path, query or credentials")
	}
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil || host == "" {
		return errors.New("must be HOST:PORT of an emulator")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
		return errors.New("port must be a number from 1 to 65535")
	}
	return nil
}
