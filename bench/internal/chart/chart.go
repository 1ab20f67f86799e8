// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

// Package chart draws the benchmarks' PNG charts with gonum's plot (pure
// Go, no system library): line charts of a figure against a count, and the
// distribution of latencies per measurement as box plots.
package chart

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Series is one line: Y against X, named in the legend.
type Series struct {
	Name string
	X, Y []float64
}

// Panel is one chart of lines.
type Panel struct {
	Title, XLabel, YLabel string
	Lines                 []Series
	// YFromZero starts the Y axis at 0, so a ratio between lines reads
	// off the picture.
	YFromZero bool
}

// Colors of the lines in order: corral first, then its baselines.
var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x6f, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x5f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0x9c, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x4c, B: 0xa8, A: 0xff},
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
}

// Lines writes panels stacked vertically into one PNG at path.
func Lines(path string, panels ...Panel) error {
	if len(panels) == 0 {
		return fmt.Errorf("chart: nothing to draw")
	}
	plots := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text, p.X.Label.Text, p.Y.Label.Text = pn.Title, pn.XLabel, pn.YLabel
		p.Legend.Top, p.Legend.Left = false, false
		p.Add(plotter.NewGrid())
		for j, s := range pn.Lines {
			if len(s.X) != len(s.Y) {
				return fmt.Errorf("chart: %q has %d x and %d y values", s.Name, len(s.X), len(s.Y))
			}
			pts := make(plotter.XYs, len(s.X))
			for k := range s.X {
				pts[k].X, pts[k].Y = s.X[k], s.Y[k]
			}
			l, sc, err := plotter.NewLinePoints(pts)
			if err != nil {
				return fmt.Errorf("chart: %q: %w", s.Name, err)
			}
			c := palette[j%len(palette)]
			l.Color, l.Width = c, vg.Points(1.8)
			sc.Color, sc.Shape = c, draw.CircleGlyph{}
			p.Add(l, sc)
			p.Legend.Add(s.Name, l, sc)
		}
		if pn.YFromZero {
			p.Y.Min = 0
			if p.Y.Max <= 0 {
				p.Y.Max = 1
			}
			p.Y.Max *= 1.08
		}
		plots[i] = []*plot.Plot{p}
	}
	return save(path, 9*vg.Inch, vg.Length(len(panels))*4*vg.Inch, plots)
}

// Distribution is one measurement's samples, in milliseconds.
type Distribution struct {
	Name    string
	Samples []float64
}

// Boxes writes one box plot per distribution (median, quartiles, whiskers
// to 1.5 IQR, outliers as points) on a logarithmic millisecond axis, so a
// 10 ms warm create and a 300 ms cold one both read, into a PNG at path.
func Boxes(path, title string, ds []Distribution) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "milliseconds (log scale)"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	names := make([]string, 0, len(ds))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, d := range ds {
		if len(d.Samples) == 0 {
			continue
		}
		v := make(plotter.Values, len(d.Samples))
		for k, s := range d.Samples {
			// A log axis cannot show zero.
			v[k] = math.Max(s, 0.01)
			lo, hi = math.Min(lo, v[k]), math.Max(hi, v[k])
		}
		b, err := plotter.NewBoxPlot(vg.Points(36), float64(len(names)), v)
		if err != nil {
			return fmt.Errorf("chart: %q: %w", d.Name, err)
		}
		b.FillColor = palette[i%len(palette)]
		p.Add(b)
		names = append(names, d.Name)
	}
	if len(names) == 0 {
		return fmt.Errorf("chart: no samples")
	}
	p.NominalX(names...)
	p.Y.Min, p.Y.Max = lo/1.3, hi*1.3
	w := max(9*vg.Inch, vg.Length(len(names))*vg.Inch*1.2)
	return save(path, w, 5*vg.Inch, [][]*plot.Plot{{p}})
}

func save(path string, w, h vg.Length, plots [][]*plot.Plot) error {
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
