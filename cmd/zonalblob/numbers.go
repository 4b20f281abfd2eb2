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

// The flags below parse with the rules above, so a bad value is a usage
// error naming the flag, before anything runs.

// numberFlag is a flag.Value of T, read with parse and written with format.
type numberFlag[T any] struct {
	p      *T
	parse  func(string) (T, error)
	format func(T) string
}

func (f numberFlag[T]) String() string {
	if f.p == nil {
		return "" // the zero value the flag package makes to test for defaults
	}
	return f.format(*f.p)
}

func (f numberFlag[T]) Set(s string) error {
	v, err := f.parse(s)
	if err == nil {
		*f.p = v
	}
	return err
}

// sizeFlag is a size from lo to hi bytes.
func sizeFlag(p *int64, lo, hi int64) numberFlag[int64] {
	return numberFlag[int64]{p, func(s string) (int64, error) { return parseSize(s, lo, hi) }, sizeName}
}

// rateFlag is a rate in (lo, hi].
func rateFlag(p *float64, lo, hi float64) numberFlag[float64] {
	return numberFlag[float64]{p, func(s string) (float64, error) { return parseRate(s, lo, hi) },
		func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }}
}

// daysFlag is a duration, in days or Go's form, from more than 0 to hi.
func daysFlag(p *time.Duration, hi time.Duration) numberFlag[time.Duration] {
	return numberFlag[time.Duration]{p, func(s string) (time.Duration, error) { return parseDays(s, hi) },
		func(d time.Duration) string {
			if d%(24*time.Hour) == 0 && d > 0 {
				return fmt.Sprintf("%dd", d/(24*time.Hour))
			}
			return d.String()
		}}
}

// intFlag is a whole number from lo to hi.
func intFlag(p *int, lo, hi int) numberFlag[int] {
	return numberFlag[int]{p, func(s string) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("%q is not a whole number from %d to %d", s, lo, hi)
		}
		return n, nil
	}, strconv.Itoa}
}
