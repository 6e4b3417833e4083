package bench

import (
	"fmt"
	"image/color"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot names: the PNGs Plot writes.
const (
	PlotTimeToAddress = "time-to-address.png"
	PlotManagerMemory = "manager-memory.png"
)

// series is one line of a plot: a figure of the burst against N, for one T.
type series struct {
	label string
	pts   plotter.XYs
	// group picks the colour and the mark (one per T); dashed draws a p99 line.
	group  int
	dashed bool
}

// Plot draws, from the burst workload of the results, the time to address (p50 and p99)
// and the manager's peak RSS against N, one line per number of tenants, into dir.
func Plot(results []*Result, dir string) error {
	byT := map[int][]*Result{}
	for _, r := range results {
		if r.Workloads["burst"] != nil && r.Workloads["burst"].TimeToAddress != nil {
			byT[r.Setup.Tenants] = append(byT[r.Setup.Tenants], r)
		}
	}
	if len(byT) == 0 {
		return fmt.Errorf("no burst results to plot")
	}
	var ts []int
	for t, rs := range byT {
		ts = append(ts, t)
		sort.Slice(rs, func(i, j int) bool { return rs[i].Setup.Services < rs[j].Setup.Services })
	}
	sort.Ints(ts)
	var lat, mem []series
	for g, t := range ts {
		var p50, p99, rss plotter.XYs
		for _, r := range byT[t] {
			b, n := r.Workloads["burst"], float64(r.Setup.Services)
			p50 = append(p50, plotter.XY{X: n, Y: b.TimeToAddress.P50})
			p99 = append(p99, plotter.XY{X: n, Y: b.TimeToAddress.P99})
			rss = append(rss, plotter.XY{X: n, Y: b.Manager.PeakRSSMiB})
		}
		lat = append(lat, series{fmt.Sprintf("T=%d p50", t), p50, g, false}, series{fmt.Sprintf("T=%d p99", t), p99, g, true})
		mem = append(mem, series{fmt.Sprintf("T=%d", t), rss, g, false})
	}
	if err := draw(filepath.Join(dir, PlotTimeToAddress), "Burst: time from create to address", "seconds", lat); err != nil {
		return err
	}
	return draw(filepath.Join(dir, PlotManagerMemory), "Burst: manager peak RSS", "MiB", mem)
}

func draw(path, title, ylabel string, lines []series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "Services (N, log scale)"
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for _, s := range lines {
		l, pts, err := plotter.NewLinePoints(s.pts)
		if err != nil {
			return err
		}
		c := plotutil.Color(s.group)
		l.Color, pts.Color = c, c
		if s.dashed {
			l.Dashes = plotutil.Dashes(1)
		}
		pts.Shape = plotutil.Shape(s.group)
		p.Add(l, pts)
		p.Legend.Add(s.label, l, pts)
	}
	p.BackgroundColor = color.White
	return p.Save(18*vg.Centimeter, 11*vg.Centimeter, path)
}
