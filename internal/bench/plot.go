package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// maxPlotPoints bounds the points of one CDF line: more cannot be told
// apart at the plot's resolution and would only slow drawing.
const maxPlotPoints = 400

// WritePlot draws the latency CDF of every row as a PNG, one panel per
// object size, the latency axis log-scaled and the fraction axis on a tail
// scale (p50, p90, p99, p99.9 evenly apart: see tailScale), and writes it to
// w. title goes above each panel (the profile note).
func WritePlot(w io.Writer, results []Result, title string) error {
	// One panel per object size, and one per record size for the commit
	// log's appends.
	type panel struct {
		log  bool
		size int
	}
	panelOf := func(r Result) panel { return panel{r.Log != nil, r.Size} }
	var keys []panel
	for _, r := range results {
		if len(r.Latencies) > 0 && !slices.Contains(keys, panelOf(r)) {
			keys = append(keys, panelOf(r))
		}
	}
	if len(keys) == 0 {
		return fmt.Errorf("plot: no row has latencies")
	}
	var panels [][]*plot.Plot
	for _, key := range keys {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("write latency CDF, %s objects — %s", SizeString(key.size), title)
		p.Y.Label.Text = "writes completed (percentile, tail scale)"
		if key.log {
			p.Title.Text = fmt.Sprintf("commit log append latency CDF, %s records — %s", SizeString(key.size), title)
			p.Y.Label.Text = "appends acknowledged (percentile, tail scale)"
		}
		p.X.Label.Text = "latency (ms, log scale)"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = latencyTicks{}
		samples := 0
		for _, r := range results {
			if panelOf(r) == key {
				samples = max(samples, len(r.Latencies))
			}
		}
		tail := newTailScale(samples)
		p.Y.Scale, p.Y.Tick.Marker = tail, tail
		p.Y.Min, p.Y.Max = 0, 1
		p.Add(plotter.NewGrid())
		// Top left is where no line runs: the slow percentiles are far
		// right, and the fast latencies low down.
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs = vg.Points(6)
		p.Legend.YOffs = -vg.Points(6)
		i := 0
		for _, r := range results {
			if panelOf(r) != key || len(r.Latencies) == 0 {
				continue
			}
			line, err := plotter.NewLine(cdf(r.Latencies))
			if err != nil {
				return err
			}
			line.Color = palette[i%len(palette)]
			line.Width = vg.Points(1.5)
			if isBaseline(r.Scenario) {
				// The peer a user would otherwise use is dashed, so each
				// solid line reads against the dashed one of its colour family.
				line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(line)
			p.Legend.Add(fmt.Sprintf("%s [%s]", r.Scenario, r.Profile), line)
			i++
		}
		panels = append(panels, []*plot.Plot{p})
	}
	img := vgimg.New(10*vg.Inch, vg.Length(len(panels))*5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Inch / 4, PadY: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 4}
	canvases := plot.Align(panels, tiles, dc)
	for i := range panels {
		panels[i][0].Draw(canvases[i][0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// cdf returns the empirical CDF of sorted latencies in milliseconds, thinned
// to at most maxPlotPoints points but always keeping the slowest sample.
func cdf(sorted []time.Duration) plotter.XYs {
	n := len(sorted)
	step := max(1, (n+maxPlotPoints-1)/maxPlotPoints)
	var xy plotter.XYs
	for i := 0; i < n; i += step {
		xy = append(xy, cdfPoint(sorted, i))
	}
	if (n-1)%step != 0 {
		xy = append(xy, cdfPoint(sorted, n-1))
	}
	return xy
}

func cdfPoint(sorted []time.Duration, i int) plotter.XY {
	// A log axis cannot show zero; a microsecond is below anything measured.
	ms := max(float64(sorted[i])/1e6, 1e-3)
	return plotter.XY{X: ms, Y: float64(i+1) / float64(len(sorted))}
}

// palette is Tableau's ten colours, told apart more easily than gonum's
// seven defaults.
var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff},
	color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}

func isBaseline(name string) bool {
	for _, c := range Comparisons {
		if c.Baseline == name {
			return true
		}
	}
	return false
}

// latencyTicks labels a log axis at 1, 2 and 5 of each decade, with
// unlabelled ticks between: gonum's LogTicks labels only powers of ten,
// and most rows live inside one decade.
type latencyTicks struct{}

func (latencyTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// tailScale places a cumulative fraction p at its "nines", -log10(1-p), so
// that p50, p90, p99 and p99.9 stand evenly apart: on a linear axis the
// slowest 1% of writes share the top hundredth of the height and the tail,
// where the backends differ, cannot be read. 1-p is floored at floor, half
// of the smallest fraction one sample makes in the panel's largest row, where
// every row's slowest sample (p = 1) is drawn: the top of the axis, "max".
//
// It is also the axis' Ticker: a labelled tick at 0, p50, p90, p99, p99.9...
// as far as the samples reach (a level is labelled if at least one sample
// lies beyond it), unlabelled ticks between, as on a log axis, and "max".
type tailScale struct{ floor float64 }

func newTailScale(samples int) tailScale {
	return tailScale{floor: 1 / (2 * float64(max(samples, 2)))}
}

func (s tailScale) nines(p float64) float64 { return -math.Log10(max(1-p, s.floor)) }

// Normalize implements plot.Normalizer.
func (s tailScale) Normalize(lo, hi, x float64) float64 {
	a, b := s.nines(lo), s.nines(hi)
	return (s.nines(x) - a) / (b - a)
}

// Ticks implements plot.Ticker.
func (s tailScale) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	add := func(v float64, label string) {
		if v >= lo && v <= hi {
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
	}
	add(0, "0")
	for d := 1; ; d++ {
		decade := math.Pow(10, -float64(d))
		if decade < 2*s.floor {
			break
		}
		// 1-p from 9 to 2 tenths of the decade above: unlabelled, except
		// p50 and the level 1-p = decade itself.
		for k := 9; k >= 2; k-- {
			label := ""
			if d == 1 && k == 5 {
				label = "p50"
			}
			add(1-float64(k)*decade, label)
		}
		add(1-decade, "p"+strconv.FormatFloat(100*(1-decade), 'f', max(d-2, 0), 64))
	}
	add(1, "max")
	return ticks
}
