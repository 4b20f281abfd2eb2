package main

// The storage drivers this binary can open, one blank import each: a driver
// registers its URL scheme on blob.Open from init. Add a driver here and every
// command serves its URLs.
import (
	_ "github.com/zonalblob/zonalblob/blob/azpremium" // azpremium://
	_ "github.com/zonalblob/zonalblob/blob/gcsrapid"  // gcsrapid://
	_ "github.com/zonalblob/zonalblob/blob/regional"  // mem://, file://, gs://, s3://, azblob://
	_ "github.com/zonalblob/zonalblob/blob/s3express" // s3express://
	_ "github.com/zonalblob/zonalblob/quorum"         // quorum://?w=2&replica=URL...
	_ "github.com/zonalblob/zonalblob/tiered"         // tiered://?hot=URL&cold=URL
)
