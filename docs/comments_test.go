package docs

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// trackerRef is a tracker reference in a comment (the word issue or issues and
// a number, maybe after a #): the tracker is not in the repository, so a
// comment that cites it explains nothing to its reader. A comment states the
// rule and its reason, and links a design note or a guide's section when the
// story matters.
var trackerRef = regexp.MustCompile(`(?i)\bissues? #?[0-9]+\b`)

// commentSkip are the directories whose Go files are not the repository's own words: build output,
// vendored modules, test inputs.
var commentSkip = map[string]bool{".git": true, "_output": true, "vendor": true, "testdata": true}

// TestNoTrackerReferencesInComments keeps the Go comments, tests' included, free of tracker
// references, as historyRules keeps the guides.
func TestNoTrackerReferencesInComments(t *testing.T) {
	files := 0
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if commentSkip[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(repoRoot, p)
		for _, f := range trackerComments(filepath.ToSlash(rel), src) {
			t.Error(f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk itself must have reached the code, or the test passes on nothing.
	if files < 100 {
		t.Errorf("only %d Go files under %s: the walk missed the repository", files, repoRoot)
	}
}

// trackerComments lists each comment of a Go source that cites a tracker, as "FILE:LINE: match".
// It reads comments only: a test's input string that holds such a reference is not one.
func trackerComments(name string, src []byte) []string {
	var out []string
	fset := token.NewFileSet()
	file := fset.AddFile(name, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.COMMENT {
			continue
		}
		// A reference may wrap over two lines of a // block or of a /* */ comment.
		text := strings.Join(strings.Fields(lit), " ")
		for _, m := range trackerRef.FindAllString(text, -1) {
			out = append(out, fmt.Sprintf("%s: %q in a comment: say the rule and why instead", fset.Position(pos), m))
		}
	}
	return out
}

// The matcher, on comments that break the rule and on text that keeps it.
func TestTrackerComments(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want int
	}{
		{"line comment", "package p\n// Issue 19: the failures fall in windows of at most 2 s.\n", 1},
		{"plural and hash", "package p\n\n/* see issues #7 and 8 */\n", 1},
		{"end of line", "package p\n\nvar x = 1 // issue 20's proof\n", 1},
		{"in a doc comment", "// Package p is issue 9's lifecycle.\npackage p\n", 1},
		{"two in one comment", "package p\n// issue 18, High 1; issue 22 too\n", 2},
		{"upper case", "package p\n// ISSUE 3\n", 1},
		{"in a string, not a comment", "package p\n\nvar s = \"as issue 19 asked\"\n", 0},
		{"in a raw string", "package p\n\nvar s = `issue 7`\n", 0},
		{"upstream's tracker by repository", "package p\n// bootkube#837; golang/go#75804\n", 0},
		{"no number", "package p\n// the issue is that 19 masters are too many\n", 0},
		{"a word that ends in issue", "package p\n// reissue 5 certificates\n", 0},
		{"a number that runs on", "package p\n// issue 7x is not a reference\n", 0},
	}
	for _, tt := range tests {
		got := trackerComments("x.go", []byte(tt.src))
		if len(got) != tt.want {
			t.Errorf("%s: %d findings %q, want %d", tt.name, len(got), got, tt.want)
		}
	}
}
