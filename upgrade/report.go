package upgrade

import (
	"fmt"
	"io"
	"maps"
	"strings"
	"text/tabwriter"
)

// Current is what the cluster runs: the release of its oldest apiserver,
// which is what the skew policy measures every other component against
// (a cluster halfway through an upgrade runs the version it left), with
// the etcd and CoreDNS versions it actually runs, the oldest where they
// differ.
func Current(c Cluster) (Versions, error) {
	oldest, etcd := "", ""
	for _, n := range c.masters() {
		if v, ok := n.Running[APIServer]; ok && (oldest == "" || older(v, oldest)) {
			oldest = v
		}
		if v, ok := n.Running[Etcd]; ok && (etcd == "" || older(v, etcd)) {
			etcd = v
		}
	}
	if oldest == "" {
		return Versions{}, fmt.Errorf("no master runs a kube-apiserver pod the API knows of")
	}
	v, err := Release(oldest)
	if err != nil {
		return Versions{}, err
	}
	if etcd != "" {
		v.Etcd = etcd
	}
	if dns, ok := c.Addons[CoreDNS]; ok {
		v.CoreDNS = dns
	}
	return v, nil
}

// Apply is c after step: what the controller expects to observe once the
// step's gate passed.
func Apply(c Cluster, s Step) Cluster {
	out := c
	out.Nodes = make([]Node, len(c.Nodes))
	for i, n := range c.Nodes {
		n.Running = maps.Clone(n.Running)
		if s.Node == n.Name {
			n.Running[s.Component] = s.To
		}
		out.Nodes[i] = n
	}
	out.Addons = maps.Clone(c.Addons)
	if s.Node == "" {
		out.Addons[s.Component] = s.To
	}
	out.EtcdMembers = append([]EtcdMember(nil), c.EtcdMembers...)
	if s.Component == Etcd {
		for i := range out.EtcdMembers {
			if out.EtcdMembers[i].Name == s.Node {
				out.EtcdMembers[i].Version = s.To
			}
		}
	}
	return out
}

// PlanSkew walks steps from c and returns every skew violation of the
// cluster as it would be after each step (none: the plan keeps the policy
// at every moment, not only at its end).
func PlanSkew(c Cluster, steps []Step) []string {
	var out []string
	for _, s := range steps {
		c = Apply(c, s)
		for _, v := range SkewViolations(c) {
			out = append(out, fmt.Sprintf("after %s: %s", s, v))
		}
	}
	return out
}

// PlanReport is what `bootlet upgrade plan` shows: the way from the
// current release to the target, and why it may not start.
type PlanReport struct {
	Current, Target Versions
	Cluster         Cluster
	Steps           []Step
	Refusals        []Refusal
	// Skew are the violations a step of the plan would cause (PlanSkew).
	Skew []string
	// PlanErr is why no plan could be made (then Steps is empty).
	PlanErr error
}

// MakePlanReport decides the plan of an upgrade of c to target.
func MakePlanReport(c Cluster, target Versions) (PlanReport, error) {
	current, err := Current(c)
	if err != nil {
		return PlanReport{}, err
	}
	r := PlanReport{Current: current, Target: target, Cluster: c, Refusals: Preflight(c, current, target)}
	steps, err := Plan(c, target, EtcdReleases())
	if err != nil {
		r.PlanErr = err
		r.Refusals = append(r.Refusals, Refusal{Reason: ReasonInvalidVersion, Message: err.Error()})
		return r, nil
	}
	if current.Kubernetes == target.Kubernetes {
		if len(steps) > 0 {
			// Every apiserver is through and steps remain: the rest of
			// an upgrade, which "already runs" must not refuse (as Decide).
			r.Refusals = dropReason(r.Refusals, ReasonAlreadyRuns)
		} else {
			// Nothing to do: that is the one thing to say.
			r.Refusals = onlyReason(r.Refusals, ReasonAlreadyRuns)
		}
	}
	r.Steps = steps
	r.Skew = PlanSkew(c, steps)
	for _, v := range r.Skew {
		r.Refusals = append(r.Refusals, Refusal{Reason: ReasonSkew, Message: v})
	}
	return r, nil
}

// Write prints the report as kubeadm's upgrade plan does: the verdict,
// each reason, then the steps in order with the images each node lacks.
func (r PlanReport) Write(w io.Writer) error {
	var b strings.Builder
	verdict := "may start"
	if len(r.Refusals) > 0 {
		verdict = "refused (" + reasonCount(len(r.Refusals)) + ")"
	}
	targetEtcd := r.Target.Etcd
	if targetEtcd == "" {
		targetEtcd = r.Current.Etcd + " kept"
	}
	fmt.Fprintf(&b, "Upgrade from %s (etcd %s, CoreDNS %s) to %s (etcd %s, CoreDNS %s): %s\n",
		r.Current.Kubernetes, r.Current.Etcd, r.Current.CoreDNS, r.Target.Kubernetes, targetEtcd, r.Target.CoreDNS, verdict)
	for _, ref := range r.Refusals {
		fmt.Fprintf(&b, "  %s: %s\n", ref.Reason, ref.Message)
	}
	if r.PlanErr != nil {
		fmt.Fprintf(&b, "\nNo plan: %v\n", r.PlanErr)
	} else if len(r.Steps) == 0 {
		fmt.Fprintf(&b, "\nNo step: every component runs the target.\n")
	} else {
		fmt.Fprintf(&b, "\nSteps, in order (each waits for the previous one's health gate):\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
		fmt.Fprintln(tw, "  #\tCOMPONENT\tNODE\tCURRENT\tTARGET\tNOTE")
		for i, s := range r.Steps {
			node, note := s.Node, ""
			if node == "" {
				node = "(cluster)"
			}
			if s.Drain {
				note = "cordon and drain first (a minor kubelet upgrade)"
			}
			if n := r.Cluster.EtcdHelpersNeeded(); s.Component == Etcd && n > 0 {
				note = fmt.Sprintf("etcd has %d member(s): %d helper member(s) beside it keep the quorum while it restarts", r.Cluster.etcdMembersProper(), n)
				if EtcdHelpersFor(r.Cluster.etcdMembersProper(), false) == 0 {
					note = fmt.Sprintf("etcd has %d member(s): a helper member beside it serves its client address while it restarts", r.Cluster.etcdMembersProper())
				}
				if r.Cluster.EtcdSharesClientAddress {
					note += " (no apiserver restarts)"
				}
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", i+1, s.Component, node, s.From, s.To, note)
		}
		tw.Flush()
	}
	if len(r.Skew) == 0 && len(r.Steps) > 0 {
		fmt.Fprintf(&b, "\nVersion skew: every step keeps the policy (apiservers within a minor; controller-managers and schedulers never newer than an apiserver nor more than a minor older; kube-proxy and kubelets never newer, nor more than %d minors older).\n", MaxKubeletMinorsBehind)
	}
	fmt.Fprintf(&b, "\nImages of %s:\n", r.Target.Kubernetes)
	for _, n := range r.Cluster.Nodes {
		if len(n.MissingImages) == 0 {
			fmt.Fprintf(&b, "  %s: all present\n", n.Name)
		} else {
			fmt.Fprintf(&b, "  %s: missing %s\n", n.Name, strings.Join(n.MissingImages, ", "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// reasonCount is "1 reason" or "N reasons".
func reasonCount(n int) string {
	if n == 1 {
		return "1 reason"
	}
	return fmt.Sprintf("%d reasons", n)
}
