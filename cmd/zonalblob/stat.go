package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

func statCommand() *command {
	return &command{
		name:     "stat",
		synopsis: "STORE KEY [--json]",
		summary:  "show an object's attributes",
		details: `Prints the object's size, content headers, user metadata, MD5, generation
(pass it to rm --if-generation or put --if-generation) and times. Fields the
backend does not record are omitted.

Examples:
  zonalblob stat file:///tmp/demo greeting
  zonalblob stat --json file:///tmp/demo greeting | jq -r .generation
`,
		minArgs: 2, maxArgs: 2,
		setup: func(fs *flag.FlagSet) action {
			var asJSON bool
			fs.BoolVar(&asJSON, "json", false, "print one JSON object")
			return func(ctx context.Context, s streams, args []string) error {
				st, err := openStore(ctx, args[0])
				if err != nil {
					return err
				}
				defer st.Close()
				a, err := st.Stat(ctx, args[1])
				if err != nil {
					return folderHint(ctx, st, args[1], err)
				}
				if asJSON {
					enc := json.NewEncoder(s.stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(newStatJSON(a))
				}
				return printStat(s, a)
			}
		},
	}
}

// statJSON is the --json form of blob.Attributes: stable lower-case names,
// MD5 in hex, times in RFC 3339.
type statJSON struct {
	Key                string            `json:"key"`
	Size               int64             `json:"size"`
	ContentType        string            `json:"content_type,omitempty"`
	CacheControl       string            `json:"cache_control,omitempty"`
	ContentDisposition string            `json:"content_disposition,omitempty"`
	ContentEncoding    string            `json:"content_encoding,omitempty"`
	ContentLanguage    string            `json:"content_language,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	MD5                string            `json:"md5,omitempty"`
	ETag               string            `json:"etag,omitempty"`
	Generation         string            `json:"generation,omitempty"`
	CreateTime         *time.Time        `json:"create_time,omitempty"`
	ModTime            *time.Time        `json:"mod_time,omitempty"`
}

func newStatJSON(a *blob.Attributes) statJSON {
	return statJSON{
		Key:                a.Key,
		Size:               a.Size,
		ContentType:        a.ContentType,
		CacheControl:       a.CacheControl,
		ContentDisposition: a.ContentDisposition,
		ContentEncoding:    a.ContentEncoding,
		ContentLanguage:    a.ContentLanguage,
		Metadata:           a.Metadata,
		MD5:                hex.EncodeToString(a.MD5),
		ETag:               a.ETag,
		Generation:         a.Generation,
		CreateTime:         timeOrNil(a.CreateTime),
		ModTime:            timeOrNil(a.ModTime),
	}
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func printStat(s streams, a *blob.Attributes) error {
	tw := tabwriter.NewWriter(s.stdout, 0, 0, 2, ' ', 0)
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", name, value)
		}
	}
	field("key", a.Key)
	field("size", fmt.Sprint(a.Size))
	field("content-type", a.ContentType)
	field("cache-control", a.CacheControl)
	field("content-disposition", a.ContentDisposition)
	field("content-encoding", a.ContentEncoding)
	field("content-language", a.ContentLanguage)
	field("md5", hex.EncodeToString(a.MD5))
	field("etag", a.ETag)
	field("generation", a.Generation)
	if !a.CreateTime.IsZero() {
		field("created", formatTime(a.CreateTime))
	}
	if !a.ModTime.IsZero() {
		field("modified", formatTime(a.ModTime))
	}
	for _, k := range slices.Sorted(maps.Keys(a.Metadata)) {
		// Printed even when empty: an empty value is still a value.
		fmt.Fprintf(tw, "metadata.%s:\t%s\n", k, a.Metadata[k])
	}
	return tw.Flush()
}
