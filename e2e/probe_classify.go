//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
)

// ProbeResult is what a probe client saw.
type ProbeResult struct {
	Requests, Failed int
	HTTP2            int // answers over HTTP/2
	NewConns         int // connections opened (a keep-alive client reconnects after GOAWAY)
	// SlowAnswers are answers that were complete and correct (200, its
	// headers within 1 s, the whole body read and well formed) but took
	// longer than 1 s in all: a loaded machine, not a hand-over's fault.
	// They are not in Failed; everything else that is not such an answer
	// (a reset, a truncated body, an unexpected EOF, any non-2xx) is.
	SlowAnswers int
	// Kinds counts the failures by ProbeVerdict.Kind.
	Kinds    map[string]int
	Failures []string
	// Windows are the runs of failed requests (windows.go), all of them.
	Windows []FailureWindow
}

// failuresSuffix lists r's failures after a colon, or nothing.
func failuresSuffix(r ProbeResult) string {
	if len(r.Failures) == 0 {
		return ""
	}
	return ":\n" + strings.Join(r.Failures, "\n")
}

// NotAnswered is the number of failed requests: Failed. A slow but
// complete and correct answer is not a failure (ClassifyProbe), so no
// failure is exempt.
func (r ProbeResult) NotAnswered() int { return r.Failed }

const (
	// probeAnswerWithin bounds a request's headers: a connection queued at
	// a listener that does not serve is a failure, not a slow answer.
	probeAnswerWithin = time.Second
	// probeBodyWithin bounds the whole answer, body included, so that a
	// slow body can be read to its end and checked.
	probeBodyWithin = 10 * time.Second
)

// errProbeNoAnswer is the cause of a request cancelled for want of
// headers within probeAnswerWithin; errProbeBodyTooLate, of a body still
// unread at probeBodyWithin.
var (
	errProbeNoAnswer    = errors.New("no answer within 1s")
	errProbeBodyTooLate = errors.New("body not complete within 10s")
)

// ProbeAttempt is what one probe request saw, the input of ClassifyProbe.
type ProbeAttempt struct {
	Path string
	// Err is the round trip's error (no headers).
	Err           error
	Status        int
	ContentLength int64 // -1 when unknown
	Body          []byte
	BodyErr       error // reading the body to its end
	// HeaderTook is from the send to the headers, Took to the body's end.
	HeaderTook, Took time.Duration
}

// ProbeVerdict is ClassifyProbe's answer: OK, Slow (complete and correct
// but late, not a failure), or Failed, with the failure's kind.
type ProbeVerdict struct {
	Failed, Slow bool
	Kind         string
}

// ClassifyProbe judges one request (pure). Only a 200 whose headers came
// within probeAnswerWithin and whose body was read to its end, of the
// length announced and well formed for its path, is an answer; one that
// took longer than probeAnswerWithin in all is slow. Everything else is a
// failure: an error before the headers (refused, reset, timeout), a non-2xx
// or any other status than 200, a body cut short (reset, unexpected EOF,
// shorter than its Content-Length, not a whole JSON document of the kind
// asked for).
func ClassifyProbe(a ProbeAttempt) ProbeVerdict {
	fail := func(kind string) ProbeVerdict { return ProbeVerdict{Failed: true, Kind: kind} }
	switch {
	case a.Err != nil:
		return fail("no answer: " + errKind(a.Err))
	case a.HeaderTook > probeAnswerWithin:
		return fail("no answer: timeout")
	case a.Status < 200 || a.Status > 299:
		return fail(fmt.Sprintf("status %d", a.Status))
	case a.Status != http.StatusOK:
		return fail(fmt.Sprintf("status %d, want 200", a.Status))
	case a.BodyErr != nil:
		return fail("body: " + errKind(a.BodyErr))
	case a.ContentLength >= 0 && int64(len(a.Body)) != a.ContentLength:
		return fail("body: truncated")
	case !wellFormed(a.Path, a.Body):
		return fail("body: malformed")
	case a.Took > probeAnswerWithin:
		return ProbeVerdict{Slow: true, Kind: "slow"}
	}
	return ProbeVerdict{}
}

// wellFormed reports whether body is a whole JSON document of what path
// returns: /version's gitVersion, a PodList.
func wellFormed(path string, body []byte) bool {
	var doc struct {
		Kind       string          `json:"kind"`
		GitVersion string          `json:"gitVersion"`
		Items      json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return false
	}
	switch {
	case path == "/version":
		return doc.GitVersion != ""
	case strings.HasPrefix(path, "/api/v1/pods"):
		return doc.Kind == "PodList" && len(doc.Items) > 0
	}
	return true
}

// errKind names an error of a probe request, for the report.
func errKind(err error) string {
	switch {
	case errors.Is(err, errProbeNoAnswer), errors.Is(err, errProbeBodyTooLate),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), strings.Contains(err.Error(), "stream error"):
		return "reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected EOF"
	}
	return "other"
}
