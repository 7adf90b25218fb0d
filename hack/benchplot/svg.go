package main

// A chart model to SVG, by hand with the standard library: a grouped bar
// chart needs rectangles, lines and text, not a plotting library. The
// output is byte-for-byte the same for the same model (fixed precision, no
// map order), so the committed plots can be checked against the data.

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
)

// The canvas and the plot area inside it, in pixels.
const (
	width, height = 640, 360
	left, right   = 56, 620 // the plot area's x range
	top, bottom   = 74, 270 // its y range (SVG y grows downwards)
	maxBarWidth   = 64
)

// seriesColor keeps a comparison's colour the same across the plots.
var seriesColor = map[string]string{
	vsKubelet: "#35618f",
	vsFloor:   "#9aa5b1",
}

// fallbackColors are for the series named in one chart only.
var fallbackColors = []string{"#4f8f5b", "#b5651d", "#7b5ea7"}

func colorOf(series string, i int) string {
	if c, ok := seriesColor[series]; ok {
		return c
	}
	return fallbackColors[i%len(fallbackColors)]
}

// yScale is the value axis: from 0 to max, gridlines every step. It always
// shows 1, the parity every ratio is read against.
func yScale(c Chart) (max, step float64) {
	hi := 1.0
	for _, g := range c.Groups {
		for _, b := range g.Bars {
			hi = math.Max(hi, b.Value)
		}
	}
	step = 0.25
	if hi > 2 {
		step = 0.5
	}
	if hi > 4 {
		step = 1
	}
	// Headroom above the tallest bar for its label.
	return math.Ceil(hi*1.12/step) * step, step
}

// esc is text safe inside an SVG element.
func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// Render draws c.
func Render(c Chart) []byte {
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	ymax, step := yScale(c)
	y := func(v float64) float64 { return bottom - v/ymax*(bottom-top) }

	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`, width, height, width, height)
	p(`  <title>%s</title>`, esc(c.Title))
	p(`  <rect width="%d" height="%d" fill="#fff"/>`, width, height)
	p(`  <text x="%d" y="22" font-size="14" font-weight="bold" fill="#111">%s</text>`, left-40, esc(c.Title))
	p(`  <text x="%d" y="40" fill="#555">%s</text>`, left-40, esc(c.Note))
	p(`  <text x="%d" y="56" fill="#555">data: %s</text>`, left-40, esc(c.Source))

	// The value axis: gridlines and their labels.
	p(`  <g stroke="#ddd">`)
	for v := 0.0; v <= ymax+1e-9; v += step {
		p(`    <line x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, left, y(v), right, y(v))
	}
	p(`  </g>`)
	p(`  <g text-anchor="end" fill="#555">`)
	for v := 0.0; v <= ymax+1e-9; v += step {
		p(`    <text x="%d" y="%.1f">%.2f</text>`, left-6, y(v)+4, v)
	}
	p(`  </g>`)

	// The bars, each group's series side by side, every series holding its
	// slot so that a missing bar leaves a gap rather than moving the others.
	n := len(c.Groups)
	groupW := float64(right-left) / float64(max(n, 1))
	barW := math.Min(maxBarWidth, groupW*0.7/float64(max(len(c.Series), 1)))
	p(`  <g>`)
	for gi, g := range c.Groups {
		x0 := float64(left) + groupW*float64(gi) + (groupW-barW*float64(len(c.Series)))/2
		for _, bar := range g.Bars {
			x := x0 + barW*float64(bar.Series)
			p(`    <rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %s: %.2f</title></rect>`,
				x, y(bar.Value), barW-2, y(0)-y(bar.Value), colorOf(c.Series[bar.Series], bar.Series),
				esc(g.Label), esc(c.Series[bar.Series]), bar.Value)
			p(`    <text x="%.1f" y="%.1f" text-anchor="middle" fill="#111">%.2f</text>`, x+(barW-2)/2, y(bar.Value)-4, bar.Value)
		}
		p(`    <text x="%.1f" y="%d" text-anchor="middle" fill="#111">%s</text>`, float64(left)+groupW*(float64(gi)+0.5), bottom+18, esc(g.Label))
	}
	p(`  </g>`)

	// Parity (named in the legend, where no bar's label can cover it), and
	// the axis itself over the bars' feet.
	p(`  <line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#b22" stroke-dasharray="6 4"/>`, left, y(1), right, y(1))
	p(`  <line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`, left, bottom, right, bottom)

	// The legend, one entry per series, along the bottom.
	p(`  <g>`)
	x := left
	for i, s := range c.Series {
		p(`    <rect x="%d" y="%d" width="12" height="12" fill="%s"/>`, x, bottom+42, colorOf(s, i))
		p(`    <text x="%d" y="%d" fill="#111">%s</text>`, x+18, bottom+52, esc(s))
		x += 40 + 7*len([]rune(s))
	}
	p(`    <line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#b22" stroke-dasharray="6 4"/>`, x, bottom+48, x+24, bottom+48)
	p(`    <text x="%d" y="%d" fill="#111">1 = parity</text>`, x+30, bottom+52)
	p(`  </g>`)
	p(`</svg>`)
	return b.Bytes()
}
