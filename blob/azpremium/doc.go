// Package azpremium is a blob.Store over Azure Premium block blob accounts
// (the same Blob REST API as standard accounts, with lower and steadier
// latency), built on the azblob SDK.
//
// URL, registered on blob.Open and on gocloud's DefaultURLMux by importing
// this package:
//
//	azpremium://CONTAINER?account=NAME[&endpoint=URL][&put_threshold=256MiB][&block_size=8MiB][&concurrency=4][&warmup=true]
//
// Credentials come from the environment, never from the URL, first match wins:
// AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY (shared key for the
// account), AZURE_STORAGE_SAS_TOKEN, else azidentity's default credential.
// The account is the account parameter, else AZURE_STORAGE_ACCOUNT, else the
// connection string's AccountName; a URL with none fails at open.
//
// Guarantees: a write of up to PutThreshold bytes is one Put Blob request at
// Close; larger writes stage blocks while writing and commit the block list at
// Close, so a writer whose ctx is canceled before Close commits nothing.
// IfNotExist is If-None-Match: *, IfGenerationMatch is If-Match on the ETag
// (the Generation). Lists are in byte order and page with opaque tokens. A
// connection is opened in the background at open; an error it meets (bad
// credentials, missing container) is returned by the first call. Errors wrap
// blob's sentinels and the SDK's *azcore.ResponseError, and never contain the
// account key, SAS token or connection string.
package azpremium
