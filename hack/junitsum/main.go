// Command junitsum summarizes the JUnit XML reports of a Ginkgo run of
// e2e.test (hack/conformance.sh) into summary.json and prints the failed
// specs.
//
//	junitsum -focus REGEX -skip REGEX -o summary.json junit_01.xml...
//
// Ginkgo lists every spec of the suite in its report, the ones its focus and
// skip filtered out as skipped too, so "skipped" here counts only the
// selected specs that skipped themselves (e.g. a provider or feature check);
// the others are "not_selected". -focus and -skip take Ginkgo's own regular
// expressions (RE2, the same engine), matched against the spec's full text.
// Suite nodes ([SynchronizedBeforeSuite], [ReportAfterSuite], ...) are not
// specs: they count only when they fail, as failures.
package main

import (
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

type testCase struct {
	Name    string    `xml:"name,attr"`
	Failure *struct{} `xml:"failure"`
	Error   *struct{} `xml:"error"`
	Skipped *struct{} `xml:"skipped"`
}

type testSuite struct {
	TestCases []testCase `xml:"testcase"`
}

// The root is <testsuites> (Ginkgo) or a single <testsuite>.
type report struct {
	XMLName    xml.Name
	TestSuites []testSuite `xml:"testsuite"`
	TestCases  []testCase  `xml:"testcase"`
}

// Summary is what summary.json holds.
type Summary struct {
	Passed      int      `json:"passed"`
	Failed      int      `json:"failed"`
	Skipped     int      `json:"skipped"`
	NotSelected int      `json:"not_selected"`
	Failures    []string `json:"failures"`
}

// specText is a test case's spec text without Ginkgo's leaf-node prefix
// ("[It] "); ok is false for suite nodes.
func specText(name string) (string, bool) {
	if rest, found := strings.CutPrefix(name, "[It] "); found {
		return rest, true
	}
	return name, false
}

func summarize(cases []testCase, focus, skip *regexp.Regexp) Summary {
	s := Summary{Failures: []string{}}
	for _, c := range cases {
		text, isSpec := specText(c.Name)
		failed := c.Failure != nil || c.Error != nil
		switch {
		case failed:
			s.Failed++
			s.Failures = append(s.Failures, text)
		case !isSpec:
		case c.Skipped != nil:
			if (focus == nil || focus.MatchString(text)) && (skip == nil || !skip.MatchString(text)) {
				s.Skipped++
			} else {
				s.NotSelected++
			}
		default:
			s.Passed++
		}
	}
	sort.Strings(s.Failures)
	return s
}

func compile(expr string) *regexp.Regexp {
	if expr == "" {
		return nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "junitsum: %v\n", err)
		os.Exit(2)
	}
	return re
}

func main() {
	focus := flag.String("focus", "", "Ginkgo focus of the run (regular expression)")
	skip := flag.String("skip", "", "Ginkgo skip of the run (regular expression)")
	out := flag.String("o", "", "write the summary as JSON to this file")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: junitsum [-focus RE] [-skip RE] [-o summary.json] JUNIT.xml...")
		os.Exit(2)
	}
	var cases []testCase
	for _, f := range flag.Args() {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "junitsum: %v\n", err)
			os.Exit(1)
		}
		var r report
		if err := xml.Unmarshal(b, &r); err != nil {
			fmt.Fprintf(os.Stderr, "junitsum: %s: %v\n", f, err)
			os.Exit(1)
		}
		cases = append(cases, r.TestCases...)
		for _, ts := range r.TestSuites {
			cases = append(cases, ts.TestCases...)
		}
	}
	s := summarize(cases, compile(*focus), compile(*skip))
	b, _ := json.MarshalIndent(s, "", "  ")
	if *out != "" {
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "junitsum: %v\n", err)
			os.Exit(1)
		}
	}
	fmt.Printf("passed %d, failed %d, skipped %d (not selected %d)\n", s.Passed, s.Failed, s.Skipped, s.NotSelected)
	for _, f := range s.Failures {
		fmt.Printf("FAILED: %s\n", f)
	}
}
