package pivot

import (
	"fmt"
	"net"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	btypes "github.com/bootlet/bootlet/types"
)

// The pivot to self-hosted (docs/pivot.md): the
// pure decisions. pivot.go gathers the facts (bootlet's registry, this
// node's pods in the apiserver, the default/kubernetes endpoints, which
// process answers /readyz) and carries the decisions out.

// Component is a control-plane component that bootlet hands from its
// bootstrap pod to a self-hosted pod.
type Component struct {
	// Name is the component, as in `bootlet render`: kube-apiserver.
	Name string
	// Bootstrap is the bootstrap pod in bootlet's registry.
	Bootstrap btypes.PodKey
	// Selector selects the component's self-hosted pods in the apiserver
	// (render's k8s-app label, which the bootstrap pods' mirror pods never
	// carry).
	Selector string
	// APIServer: the component serves the API the pivot itself goes
	// through. Its bootstrap pod is withdrawn only once a self-hosted pod's
	// own process answers /readyz (the kubelet's probe alone cannot tell:
	// with SO_REUSEPORT either apiserver may answer it) and the
	// default/kubernetes endpoints list this node.
	APIServer bool
}

// DefaultComponents are the components `bootlet render` makes
// self-hosted. etcd is not one: it stays pinned as the kubelet-static pod
// the kubelet adopted, with its data on the host (see docs/handoff.md).
var DefaultComponents = []Component{
	{Name: "kube-apiserver", Bootstrap: btypes.PodKey{Namespace: "kube-system", Name: "kube-apiserver"}, Selector: "k8s-app=kube-apiserver", APIServer: true},
	{Name: "kube-controller-manager", Bootstrap: btypes.PodKey{Namespace: "kube-system", Name: "kube-controller-manager"}, Selector: "k8s-app=kube-controller-manager"},
	{Name: "kube-scheduler", Bootstrap: btypes.PodKey{Namespace: "kube-system", Name: "kube-scheduler"}, Selector: "k8s-app=kube-scheduler"},
}

// BootstrapFacts is what bootlet's registry says about a bootstrap pod.
type BootstrapFacts struct {
	UID         types.UID
	Owner       btypes.Owner
	Terminating bool // deleted, being stopped
}

// SelfHostedFacts is what the apiserver says about one of this node's
// self-hosted pods, plus, for an apiserver, what bootlet saw itself.
type SelfHostedFacts struct {
	Name     string
	UID      types.UID
	Running  bool
	Ready    bool // the PodReady condition (the kubelet's probes)
	Deleting bool
	// NoProcess: the pod is Running and Ready in the apiserver, but no
	// process of it runs on this node (checked: observe.go). That status is
	// not this node's kubelet's: etcd kept it from an older life of the
	// cluster (`bootlet recover` restored a snapshot taken while the
	// self-hosted pods ran), and the kubelet has not synced the pod yet.
	NoProcess bool
	// ServesReadyz: a connection to the pod's readiness endpoint was
	// accepted by a process of this pod, and /readyz answered 200.
	ServesReadyz bool
}

// ComponentFacts are the facts of one component.
type ComponentFacts struct {
	Component  Component
	Bootstrap  *BootstrapFacts // nil: not in bootlet's registry (withdrawn, or never there)
	SelfHosted []SelfHostedFacts
}

// Facts are all the facts one pivot round decides on.
type Facts struct {
	Components []ComponentFacts
	// EndpointsListNode: both the default/kubernetes Endpoints and its
	// EndpointSlice list this node's apiserver address.
	EndpointsListNode bool
}

// ComponentDecision is the decision for one component.
type ComponentDecision struct {
	Component string
	// Withdraw the bootstrap pod: delete it from bootlet's registry, which
	// withdraws its static copy (owner released) and the kubelet stops it
	// gracefully.
	Withdraw bool
	// Done: nothing of the bootstrap pod is left in bootlet's registry.
	Done bool
	// Pod is the self-hosted pod that takes over (when Withdraw).
	Pod string
	// Reason says why, or what is awaited.
	Reason string
}

// Decision is Decide's answer: one ComponentDecision per component, in the
// order of Facts.Components.
type Decision []ComponentDecision

// Done reports whether every component's bootstrap pod is gone.
func Done(steps Decision) bool {
	for _, s := range steps {
		if !s.Done {
			return false
		}
	}
	return true
}

// servingCandidate is the self-hosted pod whose own /readyz bootlet should
// check for c, or nil when no check is needed yet: the bootstrap apiserver
// is still in place and adopted, and the pod is Running and Ready by the
// kubelet's account. The check opens connections, so it is made only when
// its answer can lead to a withdrawal.
func servingCandidate(c ComponentFacts) *SelfHostedFacts {
	if !c.Component.APIServer || c.Bootstrap == nil || c.Bootstrap.Terminating || c.Bootstrap.Owner != btypes.OwnerKubeletStatic {
		return nil
	}
	for i := range c.SelfHosted {
		if p := &c.SelfHosted[i]; p.Running && p.Ready && !p.Deleting && !p.NoProcess {
			return p
		}
	}
	return nil
}

// NeedsProcessCheck reports whether the pivot must look for p's processes
// on this node before Decide: p could take over from c's adopted
// bootstrap pod (Running, Ready, not deleting). Only then does the answer
// matter, and it reads /proc.
func NeedsProcessCheck(c ComponentFacts, p SelfHostedFacts) bool {
	b := c.Bootstrap
	return b != nil && !b.Terminating && b.Owner == btypes.OwnerKubeletStatic && p.Running && p.Ready && !p.Deleting
}

// Decide is the pivot's rule book, pure: when each component's bootstrap pod is withdrawn.
// The conditions and why each holds:
// docs/design/pivot.md, "When a bootstrap pod goes: `Facts` → `Decide` → `Decision`".
func Decide(f Facts) Decision {
	steps := make(Decision, 0, len(f.Components))
	for _, c := range f.Components {
		s := ComponentDecision{Component: c.Component.Name}
		switch b := c.Bootstrap; {
		case b == nil:
			s.Done, s.Reason = true, "no bootstrap pod in bootlet's registry"
		case b.Terminating || b.Owner == btypes.OwnerReleased:
			s.Reason = "bootstrap pod withdrawn; the kubelet is stopping it"
		case b.Owner != btypes.OwnerKubeletStatic:
			s.Reason = fmt.Sprintf("bootstrap pod not adopted by the kubelet yet (owner %s)", b.Owner)
		default:
			s.Withdraw, s.Pod, s.Reason = withdrawal(c, f.EndpointsListNode)
		}
		steps = append(steps, s)
	}
	return steps
}

func withdrawal(c ComponentFacts, endpoints bool) (bool, string, string) {
	var ready *SelfHostedFacts
	var seen []string
	for i := range c.SelfHosted {
		p := &c.SelfHosted[i]
		if p.NoProcess {
			seen = append(seen, fmt.Sprintf("%s(running=%v ready=%v in the apiserver, but no process of it runs on this node: a status from before, not yet synced by the kubelet)", p.Name, p.Running, p.Ready))
			continue
		}
		seen = append(seen, fmt.Sprintf("%s(running=%v ready=%v deleting=%v)", p.Name, p.Running, p.Ready, p.Deleting))
		if ready == nil && p.Running && p.Ready && !p.Deleting {
			ready = p
		}
	}
	if ready == nil {
		if len(seen) == 0 {
			return false, "", "no self-hosted pod on this node yet"
		}
		return false, "", "no self-hosted pod Running and Ready yet: " + strings.Join(seen, ", ")
	}
	if !c.Component.APIServer {
		return true, ready.Name, fmt.Sprintf("self-hosted pod %s is Running and Ready", ready.Name)
	}
	if !ready.ServesReadyz {
		return false, "", fmt.Sprintf("self-hosted pod %s is Ready, but its own process has not answered /readyz yet", ready.Name)
	}
	if !endpoints {
		return false, "", "the default/kubernetes endpoints do not list this node yet (the self-hosted apiserver writes them)"
	}
	return true, ready.Name, fmt.Sprintf("self-hosted pod %s answers /readyz itself and default/kubernetes lists this node", ready.Name)
}

// LabelFacts is what the pivot knows before it labels this node
// control-plane, the label that lets the self-hosted apiserver's DaemonSet
// pod (and the other self-hosted pods) start on it.
type LabelFacts struct {
	Labelled bool // the node carries the label already
	// Own is this node's bootstrap apiserver's address (its
	// --advertise-address and --secure-port): "" when bootlet's registry
	// holds none.
	Own string
	// OwnServes: Own answered /readyz with 200; OwnWhy says why not.
	OwnServes bool
	OwnWhy    string
	Waited    time.Duration // since the pivot began to wait for the label
}

// LabelDecision is whether to label this node now, and why (or what is
// awaited).
type LabelDecision struct {
	Label bool
	Why   string
}

// ownAPIServerBound is how long the pivot waits for this node's bootstrap
// apiserver to serve before it labels the node anyway: a bootstrap
// apiserver that has not served within it is unlikely to by waiting, and
// the pivot would otherwise never go on (docs/design/pivot.md, "Protocol", step 3).
const ownAPIServerBound = 3 * time.Minute

// DecideLabel is when the pivot labels this node: once this node's own
// bootstrap apiserver serves. The pivot's client may reach the API through
// another master (a control-plane endpoint), so the API answering says
// nothing of this node's bootstrap apiserver; a self-hosted apiserver that
// starts beside one that does not serve yet shares the port with it while
// both start, and its post-start hooks' loopback connections may reach the
// other (docs/design/reuseport.md, "Loopback and idle connections").
// Bounded by ownAPIServerBound.
func DecideLabel(f LabelFacts) LabelDecision {
	switch {
	case f.Labelled:
		return LabelDecision{Label: true, Why: "this node is labelled already"}
	case f.Own == "":
		return LabelDecision{Label: true, Why: "no bootstrap apiserver of this node in bootlet's registry: nothing to wait for"}
	case f.OwnServes:
		return LabelDecision{Label: true, Why: fmt.Sprintf("this node's bootstrap apiserver serves (%s/readyz)", f.Own)}
	case f.Waited >= ownAPIServerBound:
		return LabelDecision{Label: true, Why: fmt.Sprintf("this node's bootstrap apiserver did not serve within %s (%s/readyz: %s); labelling anyway, so the self-hosted apiserver may start beside a bootstrap one that does not serve", ownAPIServerBound, f.Own, f.OwnWhy)}
	}
	return LabelDecision{Why: fmt.Sprintf("waiting for this node's bootstrap apiserver to serve before labelling (%s/readyz: %s)", f.Own, f.OwnWhy)}
}

// selfHostedFacts reads the facts of one self-hosted pod.
func selfHostedFacts(p *v1.Pod) SelfHostedFacts {
	f := SelfHostedFacts{Name: p.Name, UID: p.UID, Running: p.Status.Phase == v1.PodRunning, Deleting: p.DeletionTimestamp != nil}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			f.Ready = c.Status == v1.ConditionTrue
		}
	}
	return f
}

// bootstrapFacts reads the facts of a bootstrap pod in bootlet's registry.
func bootstrapFacts(p *v1.Pod) *BootstrapFacts {
	if p == nil {
		return nil
	}
	return &BootstrapFacts{UID: p.UID, Owner: btypes.OwnerOf(p), Terminating: p.DeletionTimestamp != nil}
}

// advertiseAddress is the address the bootstrap apiserver advertises (its
// --advertise-address flag): the address the default/kubernetes endpoints
// must list. Empty when the flag is absent.
func advertiseAddress(p *v1.Pod) string {
	for _, c := range p.Spec.Containers {
		for _, arg := range append(append([]string{}, c.Command...), c.Args...) {
			if v, ok := strings.CutPrefix(arg, "--advertise-address="); ok {
				return v
			}
		}
	}
	return ""
}

// ownAddress is HOST:PORT of the bootstrap apiserver p on this node: its
// --advertise-address and --secure-port (kube-apiserver's default 6443
// when absent). Empty without an advertise address.
func ownAddress(p *v1.Pod) string {
	host := advertiseAddress(p)
	if host == "" {
		return ""
	}
	port := "6443"
	for _, c := range p.Spec.Containers {
		for _, arg := range append(append([]string{}, c.Command...), c.Args...) {
			if v, ok := strings.CutPrefix(arg, "--secure-port="); ok {
				port = v
			}
		}
	}
	return net.JoinHostPort(host, port)
}

// endpointsList reports whether an Endpoints object lists ip as a ready
// address.
//
//lint:ignore SA1019 the apiserver's reconciler still writes default/kubernetes as Endpoints (and mirrors it to an EndpointSlice)
func endpointsList(e *v1.Endpoints, ip string) bool {
	if e == nil {
		return false
	}
	for _, s := range e.Subsets {
		for _, a := range s.Addresses {
			if a.IP == ip {
				return true
			}
		}
	}
	return false
}
