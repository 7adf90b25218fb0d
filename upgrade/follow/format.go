package follow

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
)

// WriteStatus prints cv as `bootlet upgrade status` shows it, kubectl
// describe's way: the versions, the step, the conditions, what runs where
// and the history. Ages are taken at now.
func WriteStatus(w io.Writer, cv *btypes.ClusterVersion, now time.Time) error {
	var b strings.Builder
	st := cv.Status
	desired := cv.Spec.DesiredVersion
	if cv.Spec.Retry > 0 {
		desired += fmt.Sprintf(" (retry %d)", cv.Spec.Retry)
	}
	observed := "not yet"
	if st.ObservedGeneration > 0 {
		observed = fmt.Sprint(st.ObservedGeneration)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "Desired:\t%s\n", desired)
	fmt.Fprintf(tw, "Generation:\t%d (observed by the controller: %s)\n", cv.Generation, observed)
	fmt.Fprintf(tw, "Current:\tKubernetes %s, etcd %s, CoreDNS %s\n", orUnknown(st.Current.Kubernetes), orUnknown(st.Current.Etcd), orUnknown(st.Current.CoreDNS))
	fmt.Fprintf(tw, "Step:\t%s\n", orNone(st.Step))
	fmt.Fprintf(tw, "In flight:\t%s\n", stepWithAge(st.InFlight, now))
	fmt.Fprintf(tw, "Rolling back:\t%s\n", stepWithAge(st.RollingBack, now))
	tw.Flush()

	var rows []string
	for _, c := range st.Conditions {
		rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s\t%s", c.Type, c.Status, c.Reason, age(c.LastTransitionTime, now), c.Message))
	}
	writeTable(&b, "Conditions", "TYPE\tSTATUS\tREASON\tAGE\tMESSAGE", rows)
	rows = nil
	for _, c := range st.Components {
		node := c.Node
		if node == "" {
			node = "-"
		}
		rows = append(rows, fmt.Sprintf("%s\t%s\t%s", c.Component, node, c.Version))
	}
	writeTable(&b, "Components", "COMPONENT\tNODE\tVERSION", rows)
	rows = nil
	for _, h := range st.History {
		completed := "-"
		if h.CompletionTime != nil {
			completed = timestamp(*h.CompletionTime)
		}
		rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s\t%s", h.Version, h.State, timestamp(h.StartedTime), completed, h.Message))
	}
	writeTable(&b, "History", "VERSION\tSTATE\tSTARTED\tCOMPLETED\tMESSAGE", rows)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTable writes a titled table, kubectl's way (a tabwriter, columns 3
// apart), of rows whose cells are tab-separated; "<none>" without rows.
func writeTable(b *strings.Builder, title, header string, rows []string) {
	b.WriteString("\n" + title + ":\n")
	if len(rows) == 0 {
		b.WriteString("  <none>\n")
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "  "+header)
	for _, r := range rows {
		fmt.Fprintln(tw, "  "+r)
	}
	tw.Flush()
}

// changes are the lines `apply --wait` prints between two reads of the
// object (prev nil: the first read, whose every set field is news): the
// generation the controller took, the step, what is in flight or rolling
// back, and each condition whose status, reason or message moved. A
// condition's transition time alone is no news.
func changes(prev, cur *btypes.ClusterVersion) []string {
	if prev == nil {
		prev = &btypes.ClusterVersion{}
	}
	was, is := prev.Status, cur.Status
	var out []string
	if is.ObservedGeneration != was.ObservedGeneration {
		out = append(out, fmt.Sprintf("the controller observes generation %d", is.ObservedGeneration))
	}
	if is.Step != was.Step {
		out = append(out, "step: "+orNone(is.Step))
	}
	if line, moved := stepChange("in flight", was.InFlight, is.InFlight); moved {
		out = append(out, line)
	}
	if line, moved := stepChange("rolling back", was.RollingBack, is.RollingBack); moved {
		out = append(out, line)
	}
	for _, c := range is.Conditions {
		old := meta.FindStatusCondition(was.Conditions, c.Type)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			continue
		}
		line := fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason)
		if c.Message != "" {
			line += ": " + c.Message
		}
		out = append(out, line)
	}
	for _, c := range was.Conditions {
		if meta.FindStatusCondition(is.Conditions, c.Type) == nil {
			out = append(out, c.Type+": no longer reported")
		}
	}
	return out
}

// stepChange is the line for an in-flight or rolling-back step that
// appeared, went or became another; a new began time of the same step is
// no news.
func stepChange(what string, was, is *btypes.UpgradeStep) (string, bool) {
	switch {
	case was == nil && is == nil:
		return "", false
	case is == nil:
		return fmt.Sprintf("%s: none (was %s)", what, stepString(*was)), true
	case was != nil && sameStep(*was, *is):
		return "", false
	}
	return what + ": " + stepString(*is), true
}

func sameStep(a, b btypes.UpgradeStep) bool {
	return a.Component == b.Component && a.Node == b.Node && a.From == b.From && a.To == b.To
}

// stepString names a step as upgrade.Step.String does.
func stepString(s btypes.UpgradeStep) string {
	return upgrade.Step{Component: upgrade.Component(s.Component), Node: s.Node, From: s.From, To: s.To}.String()
}

func stepWithAge(s *btypes.UpgradeStep, now time.Time) string {
	if s == nil {
		return "<none>"
	}
	if s.Began == nil {
		return stepString(*s)
	}
	return fmt.Sprintf("%s, began %s (%s ago)", stepString(*s), timestamp(*s.Began), age(*s.Began, now))
}

// age is kubectl's: 5m, 3h12m, 2d.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// timestamp is a time as the object's YAML shows it, in UTC, so that it
// reads the same on every machine.
func timestamp(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return t.UTC().Format(time.RFC3339)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
