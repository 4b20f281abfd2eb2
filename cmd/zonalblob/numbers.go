package main

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Numbers on the command line follow one rule, which every error repeats:
//
//   - a size is a whole number of bytes, or a decimal number with a unit, B,
//     KiB, MiB, GiB or TiB (powers of 1024) or kB, MB, GB or TB (powers of
//     1000), that comes to a whole number of bytes: 4096, 64KiB, 1.5MiB, 2GB;
//   - a rate is a decimal number (no NaN, no infinity, no exponent);
//   - a duration is Go's (250ms, 90s, 5m, 2h) or a number of days (30d);
//
// and each is checked against its range before anything runs, so nothing
// overflows or wraps.

const sizeRule = "a size is a whole number of bytes, or a decimal number with a unit B, KiB, MiB, GiB, TiB (powers of 1024) or kB, MB, GB, TB (powers of 1000) that comes to whole bytes, such as 4096, 64KiB or 1.5MiB"

var (
	decimal    = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	goDuration = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)
	sizeUnits  = []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
)

// parseSize parses a size from lo to hi bytes.
func parseSize(s string, lo, hi int64) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if v, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	if !decimal.MatchString(num) {
		return 0, fmt.Errorf("%q is not a size: %s", s, sizeRule)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("%q is not a size: %s", s, sizeRule)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("%q is not a whole number of bytes: %s", s, sizeRule)
	}
	if r.Cmp(new(big.Rat).SetInt64(lo)) < 0 || r.Cmp(new(big.Rat).SetInt64(hi)) > 0 {
		return 0, fmt.Errorf("%q is out of range: want %s to %s", s, sizeName(lo), sizeName(hi))
	}
	return r.Num().Int64(), nil
}

// sizeName writes n in the largest binary unit that divides it.
func sizeName(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return fmt.Sprintf("%d%s", n/u.mult, u.suffix)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// parseRate parses a decimal number in (lo, hi]: positive rates.
func parseRate(s string, lo, hi float64) (float64, error) {
	t := strings.TrimSpace(s)
	if !decimal.MatchString(t) {
		return 0, fmt.Errorf("%q is not a decimal number (digits and at most one point, such as 200 or 0.5)", s)
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a finite number", s)
	}
	if v <= lo || v > hi {
		return 0, fmt.Errorf("%q is out of range: want more than %g and at most %g", s, lo, hi)
	}
	return v, nil
}

// parseDays parses a Go duration or a number of days ("30d"), from more
// than 0 to hi.
func parseDays(s string, hi time.Duration) (time.Duration, error) {
	const rule = "a duration is Go's (250ms, 90s, 5m, 2h) or a number of days (30d)"
	var d time.Duration
	if v, ok := strings.CutSuffix(strings.TrimSpace(s), "d"); ok {
		if !decimal.MatchString(v) {
			return 0, fmt.Errorf("%q is not a duration: %s", s, rule)
		}
		days, err := strconv.ParseFloat(v, 64)
		if err != nil || days*24 > hi.Hours() {
			return 0, fmt.Errorf("%q is out of range: want at most %s", s, daysString(hi))
		}
		d = time.Duration(days * float64(24*time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			if goDuration.MatchString(strings.TrimSpace(s)) {
				// Well formed, too long for a time.Duration.
				return 0, fmt.Errorf("%q is out of range: want more than 0 and at most %s", s, daysString(hi))
			}
			return 0, fmt.Errorf("%q is not a duration: %s", s, rule)
		}
	}
	if d <= 0 || d > hi {
		return 0, fmt.Errorf("%q is out of range: want more than 0 and at most %s", s, daysString(hi))
	}
	return d, nil
}

func daysString(d time.Duration) string { return fmt.Sprintf("%dd", int(d.Hours()/24)) }

// The flag types below parse with the rules above, so a bad value is a
// usage error naming the flag, before anything runs.

type sizeFlag struct {
	p      *int64
	lo, hi int64
}

func (f sizeFlag) String() string {
	if f.p == nil {
		return ""
	}
	return sizeName(*f.p)
}

func (f sizeFlag) Set(s string) error {
	n, err := parseSize(s, f.lo, f.hi)
	if err == nil {
		*f.p = n
	}
	return err
}

type rateFlag struct {
	p      *float64
	lo, hi float64
}

func (f rateFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strconv.FormatFloat(*f.p, 'g', -1, 64)
}

func (f rateFlag) Set(s string) error {
	v, err := parseRate(s, f.lo, f.hi)
	if err == nil {
		*f.p = v
	}
	return err
}

type daysFlag struct {
	p  *time.Duration
	hi time.Duration
}

func (f daysFlag) String() string {
	if f.p == nil {
		return ""
	}
	if *f.p%(24*time.Hour) == 0 && *f.p > 0 {
		return fmt.Sprintf("%dd", *f.p/(24*time.Hour))
	}
	return f.p.String()
}

func (f daysFlag) Set(s string) error {
	d, err := parseDays(s, f.hi)
	if err == nil {
		*f.p = d
	}
	return err
}

type intFlag struct {
	p      *int
	lo, hi int
}

func (f intFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strconv.Itoa(*f.p)
}

func (f intFlag) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < f.lo || n > f.hi {
		return fmt.Errorf("%q is not a whole number from %d to %d", s, f.lo, f.hi)
	}
	*f.p = n
	return nil
}
