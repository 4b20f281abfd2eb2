// Package azpremium is a blob.Store over Azure Premium block blob accounts
// (the same Blob REST API as standard accounts, with lower and steadier
// latency), built on the azblob SDK.
//
// URL, registered on blob.Open and on gocloud's DefaultURLMux by importing
// this package:
//
//	azpremium://CONTAINER?account=NAME[&endpoint=URL][&multipart_threshold=256MiB][&part_size=8MiB][&concurrency=4][&warm_conns=1][&retries=3]
//
// Parameters (sizes are bytes, optionally with a KiB, MiB or GiB suffix):
//
//	account              the storage account (default AZURE_STORAGE_ACCOUNT)
//	endpoint             the blob service URL (emulators: http://127.0.0.1:10000/devstoreaccount1)
//	multipart_threshold  one Put Blob up to this size, staged blocks above (default 256MiB)
//	part_size            size of a staged block (default 8MiB)
//	concurrency          blocks a writer stages at once (default 4)
//	warm_conns           connections opened in the background at open (default 1; 0: none)
//	retries              the SDK's retries after the first attempt (default 3; 0: none)
//	connect_timeout      bound of the first request at open (default 10s)
//
// In Options, New's form, a zero field means its default and a negative
// WarmConns or Retry.MaxRetries means none.
//
// Credentials come from the environment, never from the URL, first match wins:
// AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY (shared key for the
// account), AZURE_STORAGE_SAS_TOKEN, else azidentity's default credential.
// The account is the account parameter, else AZURE_STORAGE_ACCOUNT, else the
// connection string's AccountName; a URL with none fails at open.
//
// Guarantees: a write of up to MultipartThreshold bytes is one Put Blob
// request at Close; larger writes stage blocks while writing and commit the
// block list at Close, so a writer whose ctx is canceled before Close commits
// nothing. IfNotExist is If-None-Match: *, IfGenerationMatch is If-Match on
// the ETag (the Generation), on writes and deletes; an append checks the
// generation it loads and commits under that ETag. Copies stream through a
// conditional write (blob.CopyBetween), so they take either condition on
// their destination. Lists are in byte order and page with opaque
// tokens. Connections are opened in the background at New; an error the
// first of them meets (bad credentials, missing container) is returned by the
// first call. OpenURL waits for that first request: an endpoint that does not
// answer within connect_timeout, or a missing container, fails the open with
// an error naming it (with warm_conns=0 nothing is sent at open). Errors wrap blob's sentinels and the SDK's
// *azcore.ResponseError, and never contain the account key, SAS token or
// connection string.
//
// Options.MeterProvider receives request metrics (zonalblob.azpremium.*:
// operations by name and outcome, their latency, the SDK's retries),
// Options.TracerProvider a client span per Blob service operation, and an
// azpremium:// URL takes both, and Logger, from blob.Open's options.
package azpremium
