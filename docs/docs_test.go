package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines is the front page's budget: what bootlet is, how to start, where to read on.
const maxReadmeLines = 200

// Directories of docs/ that the history rules do not apply to: the records hold the dated
// measurements, run histories and commit hashes on purpose, and the reference pages are
// generated from the code (see the package comment).
var historyExempt = []string{"records", "reference"}

// historyRules are what a guide or a design note must not say: the history of how bootlet got
// here belongs to docs/records/.
var historyRules = []struct {
	name string
	re   *regexp.Regexp
}{
	{"a run number (the run history goes to docs/records/)", regexp.MustCompile(`(?i)\brun \d+\b|\bruns \d+\s*(?:,|and|to|-|–)\s*\d+\b`)},
	{"a date (dated measurements go to docs/records/)", regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}\b`)},
	{"a tracker reference (say what is, not which issue asked for it)", regexp.MustCompile(`(?i)\bissues? #?\d+\b|(?:^|[^\w/&])#\d+\b`)},
	{"a commit hash (commits go to docs/records/)", regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)},
}

// isCommitHash tells a hex word that could be a commit from a plain number or word: it needs a
// digit and a letter.
func isCommitHash(s string) bool {
	return strings.ContainsAny(s, "0123456789") && strings.ContainsAny(s, "abcdef")
}

// page is one Markdown file: its path relative to the repository root and its text.
type page struct {
	path string
	text string
}

// repoRoot is the repository, one up from this package.
const repoRoot = ".."

func readPages(t *testing.T) []page {
	t.Helper()
	var pages []page
	add := func(rel string) {
		b, err := os.ReadFile(filepath.Join(repoRoot, rel))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, page{path: filepath.ToSlash(rel), text: string(b)})
	}
	add("README.md")
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			add(filepath.Join("docs", p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

func historyExemptPage(path string) bool {
	for _, dir := range historyExempt {
		if strings.HasPrefix(path, "docs/"+dir+"/") {
			return true
		}
	}
	return false
}

func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := countLines(string(b)); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move the detail to a guide under docs/ and link it", n, maxReadmeLines)
	}
}

func countLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

func TestNoHistoryOutsideRecords(t *testing.T) {
	for _, p := range readPages(t) {
		if historyExemptPage(p.path) {
			continue
		}
		for _, f := range historyFindings(p.text) {
			t.Errorf("%s:%s", p.path, f)
		}
	}
}

// historyFindings lists each line of text that says one of historyRules, as "LINE: what: match".
// Link targets are not prose: a record's file name carries its date.
func historyFindings(text string) []string {
	var out []string
	for i, line := range strings.Split(text, "\n") {
		line = linkTarget.ReplaceAllString(line, "]()")
		for _, r := range historyRules {
			for _, m := range r.re.FindAllString(line, -1) {
				if strings.HasPrefix(r.name, "a commit hash") && !isCommitHash(m) {
					continue
				}
				out = append(out, fmt.Sprintf("%d: %s: %q", i+1, r.name, strings.TrimSpace(m)))
			}
		}
	}
	return out
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	inlineRef  = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	defRef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	heading    = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnch   = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	linkTarget = regexp.MustCompile(`\]\([^)]*\)`)
)

// proseLines is text without its fenced code blocks (blanked, so line numbers stay).
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	in := ""
	for i, l := range lines {
		if m := fence.FindStringSubmatch(l); m != nil {
			if in == "" {
				in = m[1]
			} else if m[1] == in {
				in = ""
			}
			lines[i] = ""
			continue
		}
		if in != "" {
			lines[i] = ""
		}
	}
	return lines
}

// links are the link targets of a page's prose, with their line numbers.
func links(text string) (targets []string, lineNos []int) {
	for i, l := range proseLines(text) {
		l = codeSpan.ReplaceAllString(l, "")
		for _, m := range inlineRef.FindAllStringSubmatch(l, -1) {
			targets, lineNos = append(targets, m[1]), append(lineNos, i+1)
		}
		if m := defRef.FindStringSubmatch(l); m != nil {
			targets, lineNos = append(targets, m[1]), append(lineNos, i+1)
		}
	}
	return targets, lineNos
}

// anchors are the fragment ids of a page's headings, as GitHub makes them: lower case, the
// markup and punctuation gone, spaces as hyphens, a repeated one numbered -1, -2, ...
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(text) {
		for _, m := range htmlAnch.FindAllStringSubmatch(l, -1) {
			ids[m[1]] = true
		}
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		id := slug(m[2])
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

func slug(h string) string {
	h = mdLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestRelativeLinksResolve(t *testing.T) {
	pages := readPages(t)
	byPath := map[string]string{}
	for _, p := range pages {
		byPath[p.path] = p.text
	}
	for _, p := range pages {
		targets, lineNos := links(p.text)
		for i, target := range targets {
			if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
				continue // an absolute URL: not this repository's to check
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := p.path
			if file != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p.path), file)))
				if strings.HasPrefix(dest, "../") {
					t.Errorf("%s:%d: %s leaves the repository", p.path, lineNos[i], target)
					continue
				}
				if _, err := os.Stat(filepath.Join(repoRoot, dest)); err != nil {
					t.Errorf("%s:%d: %s: no file %s", p.path, lineNos[i], target, dest)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			text, ok := byPath[dest]
			if !ok {
				b, err := os.ReadFile(filepath.Join(repoRoot, dest))
				if err != nil {
					t.Errorf("%s:%d: %s: %v", p.path, lineNos[i], target, err)
					continue
				}
				text = string(b)
			}
			if !anchors(text)[frag] {
				t.Errorf("%s:%d: %s: %s has no heading #%s", p.path, lineNos[i], target, dest, frag)
			}
		}
	}
}

// walkCodeFiles calls fn with every file outside docs/ that may point into
// the docs: code, scripts, units, configuration, Markdown, the Makefile and
// CI's files.
func walkCodeFiles(t *testing.T, fn func(rel string, b []byte)) {
	t.Helper()
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch rel {
			case ".git", "_output", "docs":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(rel) {
		case ".go", ".sh", ".service", ".yaml", ".toml", ".default", ".md", ".c":
		default:
			if filepath.Base(rel) != "Makefile" && !strings.HasPrefix(rel, ".ci/") {
				return nil
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fn(rel, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// codeDocRef is a docs/*.md path named in code, scripts or units (not a URL's path).
var codeDocRef = regexp.MustCompile(`(?:^|[^\w/.-])(docs/[\w./-]+?\.md)\b`)

// TestCodeReferencesExist keeps the pointers in comments, scripts and units from dangling when
// a page moves: a moved page leaves a short page at its old path that says where it went.
func TestCodeReferencesExist(t *testing.T) {
	missing := map[string][]string{}
	walkCodeFiles(t, func(rel string, b []byte) {
		for _, m := range codeDocRef.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(repoRoot, m[1])); err != nil {
				missing[m[1]] = append(missing[m[1]], rel)
			}
		}
	})
	var paths []string
	for p := range missing {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		t.Errorf("%s is named in %s but does not exist", p, strings.Join(uniq(missing[p]), ", "))
	}
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// The rules themselves, on text that breaks and keeps each of them.
func TestHistoryRules(t *testing.T) {
	bad := []string{
		"The pivot took 28 s in run 15.",
		"Measured on 2026-11-27.",
		"as issue 19 asked",
		"fixed in #42",
		"before 9c817b7, core/v1 only",
		"runs 9 and 10 of the cluster record",
	}
	for _, s := range bad {
		if len(historyFindings(s)) == 0 {
			t.Errorf("%q: not flagged", s)
		}
	}
	good := []string{
		"bootkube had a moment where no apiserver is bound (bootkube#31).",
		"the Go fuzzer (golang/go#75804)",
		"a `sha256:` digest of 64 characters: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"see [the serving gate](design/pivot.md#the-serving-gate)",
		"ginkgo runs 4 processes; deadbeef is a word",
		"the [pivot's timeline](../records/2026-11-27-pivot.md)",
	}
	for _, s := range good {
		if f := historyFindings(s); len(f) != 0 {
			t.Errorf("%q: flagged %v", s, f)
		}
	}
	if got := slug("Zero failed requests: the port hand-over"); got != "zero-failed-requests-the-port-hand-over" {
		t.Errorf("slug: %q", got)
	}
	if got := slug("`bootlet recover` (offline)"); got != "bootlet-recover-offline" {
		t.Errorf("slug: %q", got)
	}
}

// sourceRef is a path to a Go file of the repository named in a page, such as
// `e2e/prober.go` or `podapi/authz/parity_test.go`.
var sourceRef = regexp.MustCompile("`((?:[a-z][a-z0-9_-]*/)+[a-z0-9_]+\\.go)`")

// TestSourceReferencesExist keeps the guides' and design notes' pointers to the code from
// dangling when a file moves or splits. Records are dated and keep the paths of their day; a
// path whose first directory is not one of this repository's is upstream's (the kubelet's,
// the apiserver's) and is not checked.
func TestSourceReferencesExist(t *testing.T) {
	for _, p := range readPages(t) {
		if historyExemptPage(p.path) {
			continue
		}
		for _, m := range sourceRef.FindAllStringSubmatch(p.text, -1) {
			top, _, _ := strings.Cut(m[1], "/")
			if fi, err := os.Stat(filepath.Join(repoRoot, top)); err != nil || !fi.IsDir() {
				continue
			}
			if _, err := os.Stat(filepath.Join(repoRoot, m[1])); err != nil {
				t.Errorf("%s names %s, which does not exist", p.path, m[1])
			}
		}
	}
}

// codeSectionRef is a code comment's pointer to a section of a page:
// docs/PAGE.md, "Title" (or without the comma).
var codeSectionRef = regexp.MustCompile(`(docs/[A-Za-z0-9_/.-]+\.md),? "([^"\n]+)"`)

// TestCodeSectionReferencesExist: a section a comment names is a heading
// of that page, so the pointer leads where it says when the page moves on.
func TestCodeSectionReferencesExist(t *testing.T) {
	headings := map[string]map[string]bool{}
	titlesOf := func(page string) (map[string]bool, error) {
		if h, ok := headings[page]; ok {
			return h, nil
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, page))
		if err != nil {
			return nil, err
		}
		h := map[string]bool{}
		for _, l := range proseLines(string(b)) {
			if m := heading.FindStringSubmatch(l); m != nil {
				h[strings.ToLower(strings.TrimSpace(mdLink.ReplaceAllString(m[2], "$1")))] = true
			}
		}
		headings[page] = h
		return h, nil
	}
	refs := 0
	walkCodeFiles(t, func(rel string, b []byte) {
		for _, m := range codeSectionRef.FindAllStringSubmatch(string(b), -1) {
			refs++
			h, err := titlesOf(m[1])
			if err != nil {
				t.Errorf("%s names %s, which does not exist", rel, m[1])
				continue
			}
			if !h[strings.ToLower(m[2])] {
				t.Errorf("%s names the section %q of %s, which has no such heading", rel, m[2], m[1])
			}
		}
	})
	if refs < 10 {
		t.Errorf("only %d section references found: the pattern or the walk is broken", refs)
	}
}
