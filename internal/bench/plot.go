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
// object size, the latency axis log-scaled, and writes it to w. title goes
// above each panel (the profile note).
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
		p.Y.Label.Text = "fraction of writes completed"
		if key.log {
			p.Title.Text = fmt.Sprintf("commit log append latency CDF, %s records — %s", SizeString(key.size), title)
			p.Y.Label.Text = "fraction of appends acknowledged"
		}
		p.X.Label.Text = "latency (ms, log scale)"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = latencyTicks{}
		p.Y.Min, p.Y.Max = 0, 1
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = false, false
		p.Legend.XOffs = -vg.Points(6)
		p.Legend.YOffs = vg.Points(6)
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
