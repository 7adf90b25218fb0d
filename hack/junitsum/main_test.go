package main

import (
	"encoding/xml"
	"reflect"
	"regexp"
	"testing"
)

const sample = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="6" disabled="0" errors="0" failures="2">
  <testsuite name="Kubernetes e2e suite" tests="6">
    <testcase name="[SynchronizedBeforeSuite]" status="passed"></testcase>
    <testcase name="[It] [sig-apps] A works [Conformance]" status="passed"></testcase>
    <testcase name="[It] [sig-apps] B breaks [Conformance]" status="failed"><failure type="failed">boom</failure></testcase>
    <testcase name="[It] [sig-node] C skips itself [Conformance]" status="skipped"><skipped message="skipped - no"></skipped></testcase>
    <testcase name="[It] [sig-node] D is serial [Serial] [Conformance]" status="skipped"><skipped message="skipped"></skipped></testcase>
    <testcase name="[It] [sig-node] E is not conformance" status="skipped"><skipped message="skipped"></skipped></testcase>
    <testcase name="[ReportAfterSuite] Kubernetes e2e suite report" status="failed"><error>x</error></testcase>
  </testsuite>
</testsuites>`

func TestSummarize(t *testing.T) {
	var r report
	if err := xml.Unmarshal([]byte(sample), &r); err != nil {
		t.Fatal(err)
	}
	got := summarize(r.TestSuites[0].TestCases, regexp.MustCompile(`\[Conformance\]`), regexp.MustCompile(`\[Serial\]|\[Disruptive\]`))
	want := Summary{Passed: 1, Failed: 2, Skipped: 1, NotSelected: 2,
		Failures: []string{"[ReportAfterSuite] Kubernetes e2e suite report", "[sig-apps] B breaks [Conformance]"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
