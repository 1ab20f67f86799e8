// Copyright 2026 The corral Authors
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// colours counts the distinct colours of the PNG at path, and returns its size.
func colours(t *testing.T, path string) (int, image.Point) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", path, err)
	}
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
		}
	}
	return len(seen), b.Size()
}

func TestLinesAndBoxesDraw(t *testing.T) {
	dir := t.TempDir()
	if keep := os.Getenv("CHART_KEEP"); keep != "" {
		dir = keep // to look at them
	}
	lines := filepath.Join(dir, "density.png")
	err := Lines(lines,
		Panel{Title: "creates/s", XLabel: "sandboxes", YLabel: "/s", YFromZero: true, Lines: []Series{
			{Name: "corral", X: []float64{500, 1000, 1500}, Y: []float64{20, 18, 15}},
			{Name: "runc alone", X: []float64{500, 1000, 1500}, Y: []float64{22, 21, 17}},
		}},
		Panel{Title: "memory", XLabel: "sandboxes", YLabel: "MiB", Lines: []Series{
			{Name: "corral", X: []float64{500, 1000}, Y: []float64{3.1, 3.3}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	// Lines in two colours, text, grid and background: a drawn chart, not a blank page.
	if n, size := colours(t, lines); n < 6 || size.X < 500 || size.Y < 500 {
		t.Errorf("the line chart has %d colours at %v", n, size)
	}
	boxes := filepath.Join(dir, "tti.png")
	if err := Boxes(boxes, "time to interactive", []Distribution{
		{Name: "raw runc", Samples: []float64{30, 31, 35, 40, 29}},
		{Name: "warm", Samples: []float64{9, 10, 12, 0}},
		{Name: "empty"},
	}); err != nil {
		t.Fatal(err)
	}
	if n, _ := colours(t, boxes); n < 4 {
		t.Errorf("the box plot has %d colours", n)
	}
	if err := Lines(filepath.Join(dir, "x.png"), Panel{Lines: []Series{{Name: "bad", X: []float64{1}, Y: nil}}}); err == nil {
		t.Error("a series with fewer y than x values was drawn")
	}
	if err := Boxes(filepath.Join(dir, "y.png"), "none", nil); err == nil {
		t.Error("a box plot of nothing was drawn")
	}
}
