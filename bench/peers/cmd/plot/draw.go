package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	colors = map[string]color.Color{
		"mem": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
		"tcp": color.RGBA{R: 0xd6, G: 0x62, B: 0x0a, A: 0xff}, // orange
	}
	markColors = []color.Color{
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
		color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
		color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	}
	gray = color.Gray{Y: 0xc8}
)

const dpi = 120

// drawThroughput draws msgs/s (left) and MB/s (right) against payload size.
func drawThroughput(file string, ss []series) error {
	msgs, mb := plot.New(), plot.New()
	msgs.Title.Text = "inflight: acknowledged messages per second\none producer, default options, no compression"
	mb.Title.Text = "payload throughput (MB/s, 1 MB = 1,000,000 B)\n "
	for _, p := range []*plot.Plot{msgs, mb} {
		p.X.Label.Text = "payload size"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = sizeTicks(ss)
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
	}
	msgs.Y.Scale = plot.LogScale{}
	msgs.Y.Tick.Marker = countTicks{}
	mb.Y.Min = 0
	mb.Y.Tick.Marker = wholeTicks{}
	mb.Legend.Left = true

	for _, s := range ss {
		var rate, bytes plotter.XYs
		var labels []string
		for _, pt := range s.points {
			rate = append(rate, plotter.XY{X: float64(pt.size), Y: pt.msgsPerS})
			bytes = append(bytes, plotter.XY{X: float64(pt.size), Y: pt.mbPerS})
			labels = append(labels, short(pt.msgsPerS))
		}
		if err := addLine(msgs, rate, s.name, colors[s.name]); err != nil {
			return err
		}
		if err := addLine(mb, bytes, s.name, colors[s.name]); err != nil {
			return err
		}
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: rate, Labels: labels})
		if err != nil {
			return err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Color = colors[s.name]
			l.TextStyle[i].Font.Size = vg.Points(9)
		}
		// mem's labels above its line, tcp's below, so they never meet.
		l.Offset = vg.Point{X: vg.Points(5), Y: vg.Points(3)}
		if s.name == "tcp" {
			l.Offset.Y = vg.Points(-13)
		}
		msgs.Add(l)
	}
	// Room above the highest point for its label, and at the right.
	msgs.Y.Max *= 1.6
	msgs.Y.Min /= 1.6
	msgs.X.Max *= 1.8
	mb.X.Max *= 1.3
	mb.Y.Max *= 1.1
	return savePanels(file, 11*vg.Inch, 4.5*vg.Inch, msgs, mb)
}

func addLine(p *plot.Plot, xys plotter.XYs, name string, c color.Color) error {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color, l.Width = c, vg.Points(2)
	s.Color, s.Radius = c, vg.Points(3)
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

// sizeTicks labels the measured sizes.
func sizeTicks(ss []series) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	seen := map[int]bool{}
	for _, s := range ss {
		for _, pt := range s.points {
			if !seen[pt.size] {
				seen[pt.size] = true
				ticks = append(ticks, plot.Tick{Value: float64(pt.size), Label: sizeLabel(pt.size)})
			}
		}
	}
	return ticks
}

func sizeLabel(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return strconv.Itoa(n/1024) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}

// countTicks is a log axis ticker that labels powers of ten as 10k, 1M.
type countTicks struct{}

func (countTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.LogTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = short(ticks[i].Value)
		}
	}
	return ticks
}

// wholeTicks are gonum's default ticks labelled without decimals.
type wholeTicks struct{}

func (wholeTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}

// short prints 14M, 4.1M, 1M, 950k, 12.
func short(v float64) string {
	switch {
	case v >= 1e7:
		return strconv.FormatFloat(v/1e6, 'f', 0, 64) + "M"
	case v >= 1e6:
		return strconv.FormatFloat(math.Round(v/1e5)/10, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(math.Round(v/1e3), 'f', 0, 64) + "k"
	}
	return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
}

// drawLatency draws the CDF of the paced run (left) and its tail, the
// fraction of messages slower than x on a log axis (right), with the
// p50, p99 and p999 marked on both.
func drawLatency(file string, run *latencyRun) error {
	var cdf, tail plotter.XYs
	run.hist.Each(func(upTo time.Duration, f float64) {
		x := us(upTo)
		cdf = append(cdf, plotter.XY{X: x, Y: f})
		if f < 1 {
			tail = append(tail, plotter.XY{X: x, Y: 1 - f})
		}
	})
	if len(tail) == 0 {
		return fmt.Errorf("latency: fewer than two distinct values recorded")
	}

	left, right := plot.New(), plot.New()
	left.Title.Text = fmt.Sprintf("inflight over TCP: send-to-callback latency CDF\n%s at %s msgs/s offered, %s messages",
		sizeLabel(run.size), group(run.rate), group(int(run.hist.Count())))
	right.Title.Text = "tail: fraction of messages slower than x\n "
	left.Y.Label.Text = "fraction of messages"
	right.Y.Label.Text = "fraction slower"
	left.Y.Min, left.Y.Max = 0, 1
	right.Y.Scale = plot.LogScale{}
	right.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	right.Y.Min = math.Max(0.5/float64(run.hist.Count()), 1e-6)
	right.Y.Max = 1
	for _, p := range []*plot.Plot{left, right} {
		p.X.Label.Text = "latency (µs)"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
	}

	for _, p := range []struct {
		plot *plot.Plot
		xys  plotter.XYs
	}{{left, cdf}, {right, tail}} {
		l, err := plotter.NewLine(p.xys)
		if err != nil {
			return err
		}
		l.Color, l.Width = colors["tcp"], vg.Points(2)
		p.plot.Add(l)
	}

	// X range: the data, with a little room; the markers must not widen it.
	lo, hi := max(us(run.hist.Min()), 0.1), us(run.hist.Max()) // a log axis starts above 0
	for _, p := range []*plot.Plot{left, right} {
		p.X.Min, p.X.Max = lo/1.2, hi*1.2
	}
	// Each quantile is a dashed line from the bottom up to the curve: at
	// x = the quantile, the CDF is q and the tail is 1-q.
	for i, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}, {"p999", 0.999}} {
		v := run.hist.Quantile(q.q)
		for _, m := range []struct {
			plot *plot.Plot
			top  float64
		}{{left, q.q}, {right, 1 - q.q}} {
			l, err := plotter.NewLine(plotter.XYs{{X: us(v), Y: m.plot.Y.Min}, {X: us(v), Y: m.top}})
			if err != nil {
				return err
			}
			l.Color, l.Width = markColors[i], vg.Points(1.5)
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			m.plot.Add(l)
			if m.plot == left {
				m.plot.Legend.Add(fmt.Sprintf("%s = %s", q.name, durLabel(v)), l)
			}
		}
	}
	// Top left, where the CDF is still low.
	left.Legend.Top, left.Legend.Left = true, true
	left.Legend.XOffs, left.Legend.YOffs = vg.Points(8), vg.Points(-4)
	return savePanels(file, 11*vg.Inch, 4.5*vg.Inch, left, right)
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func durLabel(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms"
	case d >= 100*time.Microsecond:
		return strconv.FormatFloat(us(d), 'f', 0, 64) + " µs"
	}
	return strconv.FormatFloat(us(d), 'f', 1, 64) + " µs"
}

func group(n int) string {
	s := strconv.Itoa(n)
	out := ""
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out += ","
		}
		out += string(c)
	}
	return out
}

// savePanels draws the plots side by side into one PNG.
func savePanels(file string, w, h vg.Length, ps ...*plot.Plot) error {
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	tiles := draw.Tiles{
		Rows: 1, Cols: len(ps),
		PadX: vg.Points(24), PadTop: vg.Points(8), PadBottom: vg.Points(8),
		PadLeft: vg.Points(8), PadRight: vg.Points(12),
	}
	canvases := plot.Align([][]*plot.Plot{ps}, tiles, dc)
	for i, p := range ps {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
