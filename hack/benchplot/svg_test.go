package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

func TestYScale(t *testing.T) {
	tests := []struct {
		name      string
		values    []float64
		max, step float64
	}{
		{"parity always shown", []float64{0.4}, 1.25, 0.25},
		{"headroom over the tallest bar", []float64{0.87, 1.28}, 1.5, 0.25},
		{"wider steps past 2", []float64{2.5}, 3, 0.5},
		{"no bars", nil, 1.25, 0.25},
	}
	for _, tt := range tests {
		var g Group
		for _, v := range tt.values {
			g.Bars = append(g.Bars, Bar{Value: v})
		}
		max, step := yScale(Chart{Groups: []Group{g}})
		if max != tt.max || step != tt.step {
			t.Errorf("%s: yScale = %v, %v; want %v, %v", tt.name, max, step, tt.max, tt.step)
		}
	}
}

// TestRender: the SVG is well-formed XML, has a bar per ratio with its value
// written on it, escapes the text, and is the same on every call.
func TestRender(t *testing.T) {
	c := Chart{File: "bench-x.svg", Title: "a < b & c", Note: "note", Source: "data/x.json",
		Series: []string{vsKubelet, vsFloor},
		Groups: []Group{{Label: "1 pod", Bars: []Bar{{0, 0.87}, {1, 1.01}}}, {Label: "10 pods", Bars: []Bar{{1, 1.05}}}}}
	out := Render(c)
	if !bytes.Equal(out, Render(c)) {
		t.Error("two renderings of one chart differ")
	}
	dec := xml.NewDecoder(bytes.NewReader(out))
	rects := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, out)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			for _, a := range se.Attr {
				if a.Name.Local == "fill" && (a.Value == seriesColor[vsKubelet] || a.Value == seriesColor[vsFloor]) {
					rects++
				}
			}
		}
	}
	// 3 bars and the 2 legend keys.
	if rects != 5 {
		t.Errorf("%d coloured rects, want 5", rects)
	}
	for _, want := range []string{">0.87<", ">1.01<", ">1.05<", "a &lt; b &amp; c", "data: data/x.json", "1 = parity"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}
