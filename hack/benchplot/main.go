// Command benchplot draws the bench's ratios as SVG bar charts from the bench's own data (`make
// docs`):
//
//	go run ./hack/benchplot -data docs/records/data -out docs/images
//
// -data holds one directory per campaign, named by its day (YYYY-MM-DD), each with the JSON files
// `make bench` wrote there (pods.json, recovery.json, footprint.json, bootstrap.json,
// handoff.json); or it is one such directory. Each plot, docs/images/bench-<scenario>.svg, is
// drawn from the newest directory whose file has the plot's ratios, and names that file, so a
// campaign that ran one scenario redraws that plot only. The plots are generated, never edited:
// main_test.go fails while the committed ones differ from what the committed data gives. What the
// figures mean: docs/bench.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

func main() {
	data := flag.String("data", "docs/records/data", "the bench's data: directories named YYYY-MM-DD of its JSON files, or one of them")
	out := flag.String("out", "docs/images", "where the bench-*.svg plots are written")
	flag.Parse()
	written, missing, err := generate(*data, *data, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
	for _, w := range written {
		fmt.Println("wrote", w)
	}
	for _, m := range missing {
		fmt.Fprintf(os.Stderr, "benchplot: no ratios for %s in %s: its plot is not drawn\n", m, *data)
	}
}

// campaigns are the directories to read, newest first: dir itself when it
// holds JSON files, else its subdirectories.
func campaigns(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var subdirs []string
	for _, e := range entries {
		if e.IsDir() {
			subdirs = append(subdirs, e.Name())
		} else if path.Ext(e.Name()) == ".json" {
			return []string{"."}, nil
		}
	}
	return newestFirst(subdirs), nil
}

// generate writes each plot drawn from the data under dataDir into out and
// returns the files written, and the bench files no campaign has ratios in.
// shownAs is how a plot names dataDir (the path as the repository has it).
func generate(dataDir, shownAs, out string) (written, missing []string, err error) {
	dirs, err := campaigns(dataDir)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, nil, err
	}
	for _, p := range plots {
		drawn := false
		for _, d := range dirs {
			file := filepath.Join(dataDir, d, p.file)
			data, err := os.ReadFile(file)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			} else if err != nil {
				return nil, nil, err
			}
			c, err := p.chart(data)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", file, err)
			}
			if len(c.Groups) == 0 {
				continue // e.g. a pods run with one contender: no ratio to draw
			}
			c.Source = path.Join(filepath.ToSlash(shownAs), d, p.file)
			dst := filepath.Join(out, c.File)
			if err := os.WriteFile(dst, Render(c), 0o644); err != nil {
				return nil, nil, err
			}
			written, drawn = append(written, dst), true
			break
		}
		if !drawn {
			missing = append(missing, p.file)
		}
	}
	return written, missing, nil
}
