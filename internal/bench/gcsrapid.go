package bench

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/storage"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"google.golang.org/api/googleapi"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/pool"
)

// gcsServer is one in-process GCS emulator and a client of it.
type gcsServer struct {
	srv     *gcsrapidtest.Server
	client  *storage.Client
	profile string
}

func startGCS(ctx context.Context, env *Env, profileName string, buckets ...gcsrapidtest.Bucket) (*gcsServer, error) {
	profile, err := gcsrapidtest.ProfileByName(env.ProfileName(profileName))
	if err != nil {
		return nil, err
	}
	srv, err := gcsrapidtest.NewServer(gcsrapidtest.Options{
		Profile: profile, Seed: env.Seed, Buckets: buckets,
		MaxBytes: 4 << 30, // every object written stays in memory
	})
	if err != nil {
		return nil, err
	}
	// The zonal APIs make writers appendable, which a regional bucket
	// refuses; a regional bucket gets the plain client a user has.
	var client *storage.Client
	if len(buckets) > 0 && buckets[0].Zonal {
		client, err = srv.Client(ctx)
	} else {
		client, err = storage.NewGRPCClient(ctx, srv.ClientOptions()...)
	}
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &gcsServer{srv: srv, client: client, profile: profile.Name}, nil
}

func (g *gcsServer) Close() {
	g.client.Close()
	g.srv.Close()
}

// Requests counts the RPCs the emulator has answered.
func (g *gcsServer) Requests() int64 {
	var n int64
	for _, c := range g.srv.Stats().Calls {
		n += c
	}
	return n
}

// GCSRapidConfig configures GCSRapid.
type GCSRapidConfig struct {
	Profile string  // gcsrapidtest profile name; default "rapid"
	Sizes   []int   // object sizes; default 10 B and 1 MiB
	Ops     int     // measured operations per row; default 300
	Rate    float64 // offered load per second (open loop); default 200
	// Bandwidth caps the offered bytes per second. Default 32 MiB/s.
	Bandwidth float64
	Seed      uint64
	// Progress, if set, is told each row's name as it starts.
	Progress func(row string)
}

// GCSRapid runs the gcsrapid scenario alone, a fixed number of operations
// per row, in open loop without a limit on operations in flight, and
// returns its rows.
func GCSRapid(ctx context.Context, cfg GCSRapidConfig) ([]Result, error) {
	if cfg.Profile == "" {
		cfg.Profile = "rapid"
	}
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = []int{10, 1 << 20}
	}
	if cfg.Ops == 0 {
		cfg.Ops = 300
	}
	if cfg.Rate == 0 {
		cfg.Rate = 200
	}
	if cfg.Bandwidth == 0 {
		cfg.Bandwidth = 32 << 20
	}
	env := &Env{
		Load: Load{Mode: ModeOpen, Rate: cfg.Rate, Bandwidth: cfg.Bandwidth, MaxOps: cfg.Ops,
			// MaxOps ends each row; the duration only has to be long enough.
			Duration: time.Hour, Warmup: max(time.Second, time.Duration(float64(cfg.Ops)/3/cfg.Rate*float64(time.Second))),
			OpTimeout: time.Minute},
		Sizes: cfg.Sizes, Seed: cfg.Seed, override: map[string]string{"rapid": cfg.Profile},
	}
	if cfg.Progress != nil {
		env.Progress = func(s Step) { cfg.Progress(s.Row) }
	}
	if err := runGCSRapid(ctx, env); err != nil {
		return nil, err
	}
	return env.Results(), nil
}

// runGCSRapid compares three ways to write an object to a GCS Rapid bucket,
// on the same emulator and profile:
//
//   - gocloud-zonal: gocloud.dev's gcsblob in zonal mode, the peer a user would
//     pick today: create, write and finalize per object.
//   - zonalblob-put: our Put: create and flush, never finalize.
//   - zonalblob-create: our pooled Create: one flush into a pre-created object.
func runGCSRapid(ctx context.Context, env *Env) error {
	g, err := startGCS(ctx, env, "rapid", gcsrapidtest.Bucket{Name: "bench", Zonal: true})
	if err != nil {
		return err
	}
	defer g.Close()
	peer, err := gcsblob.OpenBucketGRPC(g.client, "bench", nil)
	if err != nil {
		return err
	}
	defer peer.Close()
	store, err := gcsrapid.New(ctx, g.client, "bench", gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 512, MinIdle: 8, LoadConcurrency: 64}})
	if err != nil {
		return err
	}
	defer store.Close()
	env.Measure(ctx,
		Path{Name: "gocloud-zonal", Profile: g.profile, Requests: g.Requests,
			Write: func(ctx context.Context, n int, data []byte) error {
				return peer.WriteAll(ctx, fmt.Sprintf("peer/%07d", n), data, peerWriterOptions(len(data)))
			}},
		Path{Name: "zonalblob-put", Profile: g.profile, Requests: g.Requests,
			Write: func(ctx context.Context, n int, data []byte) error {
				return blob.Put(ctx, store, fmt.Sprintf("put/%07d", n), data, nil)
			}},
		// Pool refills are off the critical path but still requests: req/op
		// counts them.
		Path{Name: "zonalblob-create-pooled", Profile: g.profile, Requests: g.Requests,
			Write: func(ctx context.Context, _ int, data []byte) error {
				_, err := blob.CreateBytes(ctx, store, "create/", data, nil)
				return err
			}},
	)
	return nil
}

// runGCSRegional writes to an ordinary regional bucket through gocloud's
// gcsblob: the tier a compactor moves objects to, and what a user has before
// adopting a zonal bucket.
func runGCSRegional(ctx context.Context, env *Env) error {
	g, err := startGCS(ctx, env, "regional", gcsrapidtest.Bucket{Name: "bench"})
	if err != nil {
		return err
	}
	defer g.Close()
	b, err := gcsblob.OpenBucketGRPC(g.client, "bench", nil)
	if err != nil {
		return err
	}
	defer b.Close()
	env.Measure(ctx, Path{Name: "gocloud-regional", Profile: g.profile, Requests: g.Requests,
		Write: func(ctx context.Context, n int, data []byte) error {
			return b.WriteAll(ctx, fmt.Sprintf("put/%07d", n), data, peerWriterOptions(len(data)))
		}})
	return nil
}

// peerWriterOptions sizes gocloud's write buffer to the object, as
// gcsrapid does its own. gcsblob's default allocates 16 MiB per writer: at
// 200 writes a second that is 3 GiB/s of garbage, and on a small machine
// the rows would measure the client's garbage collector (seconds of
// queueing) instead of the protocol.
func peerWriterOptions(size int) *gcblob.WriterOptions {
	return &gcblob.WriterOptions{BufferSize: roundUp(max(size, 1), googleapi.MinUploadChunkSize)}
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }
