package s3expresstest_test

import (
	"testing"

	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

// A bucket the server cannot create is an error from each constructor, for
// the caller to report, not a panic.
func TestConstructorsReportBadBuckets(t *testing.T) {
	opts := s3expresstest.Options{Buckets: []string{"ok", "has/slash"}}
	for name, newServer := range map[string]func(s3expresstest.Options) (*s3expresstest.Server, error){
		"NewServer":          s3expresstest.NewServer,
		"NewTLSServer":       s3expresstest.NewTLSServer,
		"NewUnstartedServer": s3expresstest.NewUnstartedServer,
	} {
		if srv, err := newServer(opts); err == nil {
			srv.Close()
			t.Errorf("%s accepted bucket %q", name, "has/slash")
		}
	}
}
