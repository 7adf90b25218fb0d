package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	masterscontroller "github.com/bootlet/bootlet/masters/controller"
	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
	"github.com/bootlet/bootlet/upgrade/cvclient"
	"github.com/bootlet/bootlet/upgrade/observer"
)

// rounds is the leader's state between rounds: none but its clients; the
// progress lives in the ClusterVersion's status.
type rounds struct {
	cs          kubernetes.Interface
	dyn         dynamic.Interface
	now         func() time.Time
	gateTimeout time.Duration
	// said is the last message logged, so a waiting step is logged once.
	said string
}

// round observes, decides, writes the status, then acts. Any error ends
// the round; the next one observes again.
func (r *rounds) round(ctx context.Context) {
	cv, err := cvclient.Get(ctx, r.dyn)
	if apierrors.IsNotFound(err) {
		return // no upgrade was ever asked (or the CRD is not there yet)
	}
	if err != nil {
		klog.ErrorS(err, "Upgrade controller: reading the ClusterVersion")
		return
	}
	now := r.now()
	desired, err := upgrade.DesiredVersions(cv.Spec.DesiredVersion, cv.Spec.EtcdUpgrade == nil || *cv.Spec.EtcdUpgrade)
	if err != nil {
		r.refuseInvalid(ctx, cv, err, now)
		return
	}
	o, err := observer.Read(ctx, r.cs)
	if err != nil {
		klog.ErrorS(err, "Upgrade controller: observing the cluster")
		return
	}
	cluster := upgrade.Observe(o, desired)
	progress := upgrade.ProgressOf(cv.Status)
	var gate upgrade.Gate
	if s := progress.InFlight; s != nil {
		gate = upgrade.ObserveGate(o, *s)
	}
	action, err := upgrade.Decide(upgrade.Round{Cluster: cluster, Desired: desired, Generation: cv.Generation, Progress: progress, Gate: gate, Now: now, GateTimeout: r.gateTimeout})
	if err != nil {
		klog.ErrorS(err, "Upgrade controller: deciding")
		return
	}
	if action.Kind == upgrade.DoBegin {
		// A master being added or removed changes etcd's members and
		// where the control plane runs: no step begins meanwhile (the
		// masters' controller begins no operation during a step either).
		if why := mastersBusy(ctx, r.cs); why != "" {
			action = waitBefore(action, why)
		}
	}
	if action.Kind == upgrade.DoBegin && action.Step.Component == upgrade.Etcd && len(cluster.EtcdHelpers()) > 0 {
		// Helpers of an earlier step remain (one put back that timed
		// out): a new step would count them as members. Their agent
		// releases them once the apiservers no longer name them.
		action = waitBefore(action, "helper members of an earlier etcd step remain; their node's agent removes them")
	}
	if action.Kind == upgrade.DoBegin && action.Step.Component == upgrade.Etcd && !cluster.EtcdNeedsHelpers() {
		// A step with helpers widens within it, once its helpers are up
		// (helpedEtcdServers), and narrows again before they go.
		ready, why, err := widenForEtcd(ctx, r.cs, o.Pods)
		if err != nil {
			klog.ErrorS(err, "Upgrade controller: preparing etcd's steps")
			return
		}
		if !ready {
			action = waitBefore(action, why)
		}
	}
	if s, rollingBack := etcdStepOf(action); s != nil && cluster.EtcdNeedsHelpers() || len(cluster.EtcdHelpers()) > 0 {
		why, err := helpedEtcdServers(ctx, r.cs, cluster, o, s, rollingBack)
		if err != nil {
			klog.ErrorS(err, "Upgrade controller: the apiservers' etcd endpoints for a step with helpers")
		} else if why != "" && action.Kind == upgrade.DoWait {
			action.Message += " (" + why + ")"
		}
	}
	if action.Message != r.said {
		klog.InfoS("Upgrade controller", "action", action.Kind, "message", action.Message)
		r.said = action.Message
	}
	cv.Status = statusOf(cv, cluster, desired, action, now)
	// The status first: a leader that dies after it acted leaves the
	// step recorded in flight, and the next one waits on its gate rather
	// than deciding afresh from a cluster halfway through the act.
	written, err := cvclient.UpdateStatus(ctx, r.dyn, cv)
	if err != nil {
		if !apierrors.IsConflict(err) {
			klog.ErrorS(err, "Upgrade controller: writing the ClusterVersion's status")
		}
		return
	}
	r.kubeletStep(ctx, written, action, now)
	switch action.Kind {
	case upgrade.DoBegin:
		err = setImage(ctx, r.cs, *action.Step, action.Step.To)
	case upgrade.DoRollBack:
		err = setImage(ctx, r.cs, *action.Step, action.Step.From)
	case upgrade.DoWait:
		if rb := action.Progress.RollingBack; rb != nil {
			// A rollback's image is set again each round: a leader that
			// died between the status and the act did not set it.
			err = setImage(ctx, r.cs, *rb, rb.From)
		} else if s := action.Progress.InFlight; s != nil {
			err = setImage(ctx, r.cs, *s, s.To)
		}
	}
	if err != nil {
		klog.ErrorS(err, "Upgrade controller: acting", "action", action.Kind, "step", action.Step)
	}
}

// mastersBusy says which operation of the masters' controller is under
// way (an added or removed master, or an elected component's Deployment
// being replaced by its DaemonSet), or that what says so cannot be read;
// "" when none.
func mastersBusy(ctx context.Context, cs kubernetes.Interface) string {
	rec, err := masterscontroller.ReadRecord(ctx, cs)
	switch {
	case err != nil:
		return fmt.Sprintf("the masters' record cannot be read (%v)", err)
	case rec.Op != nil:
		return fmt.Sprintf("the masters' controller's %s of %s is under way (phase %s)", strings.ToLower(string(rec.Op.Kind)), rec.Op.Node, rec.Op.Phase)
	}
	why, err := masterscontroller.ElectedChangeUnderway(ctx, cs)
	if err != nil {
		return fmt.Sprintf("the control plane's workloads cannot be read (%v)", err)
	}
	return why
}

// waitBefore is a Wait instead of the step that begin would begin: nothing
// begins, and the progress stays as it was, but for what a new generation
// cleared.
func waitBefore(begin upgrade.Action, why string) upgrade.Action {
	p := begin.Progress
	p.InFlight, p.Began = nil, time.Time{}
	return upgrade.Action{Kind: upgrade.DoWait, Message: "before " + begin.Step.String() + ": " + why, Progress: p}
}

// etcdStepOf is the etcd step a round leaves in flight, or puts back
// (rollingBack); nil for any other.
func etcdStepOf(action upgrade.Action) (s *upgrade.Step, rollingBack bool) {
	if rb := action.Progress.RollingBack; rb != nil && rb.Component == upgrade.Etcd {
		return rb, true
	}
	if s := action.Progress.InFlight; s != nil && s.Component == upgrade.Etcd {
		return s, false
	}
	return nil, false
}

// kubeletStep is the controller's part of a kubelet's step: the node is
// cordoned and drained before its agent may act (recorded as Drained in
// the step in flight), and uncordoned once the step is through or put
// back.
func (r *rounds) kubeletStep(ctx context.Context, cv *btypes.ClusterVersion, action upgrade.Action, now time.Time) {
	if s := cv.Status.InFlight; s != nil && s.Component == string(upgrade.Kubelet) && s.Drained == nil {
		done, why, err := drainNode(ctx, r.cs, s.Node, upgrade.DrainFor(s.From, s.To))
		if err != nil {
			klog.ErrorS(err, "Upgrade controller: draining", "node", s.Node)
			return
		}
		if !done {
			return
		}
		t := metav1.NewTime(now)
		s.Drained = &t
		if _, err := cvclient.UpdateStatus(ctx, r.dyn, cv); err != nil {
			klog.ErrorS(err, "Upgrade controller: recording the drain", "node", s.Node)
			return
		}
		klog.InfoS("Upgrade controller: the node's agent may replace its kubelet", "node", s.Node, "drain", why)
		return
	}
	if s := action.Step; s != nil && s.Component == upgrade.Kubelet && (action.Kind == upgrade.DoComplete || action.Kind == upgrade.DoStop) {
		if err := uncordon(ctx, r.cs, s.Node); err != nil {
			klog.ErrorS(err, "Upgrade controller: uncordoning", "node", s.Node)
		}
	}
}

// statusOf is cv's status after a round that decided action.
func statusOf(cv *btypes.ClusterVersion, c upgrade.Cluster, desired upgrade.Versions, action upgrade.Action, now time.Time) btypes.ClusterVersionStatus {
	steps, _ := upgrade.Plan(c, desired, upgrade.EtcdReleases())
	current, _ := upgrade.Current(c)
	// While a step is put back, Failing already says why (the progress's
	// Stopped), and Progressing says it is rolling back.
	s := upgrade.Summarize(c, desired, steps, action.Progress.InFlight, action.Refusals, action.Progress.Stopped)
	switch {
	case action.Progress.InFlight != nil:
		// Summarize names the step in flight.
	case action.Progress.RollingBack != nil:
		s.Step = "putting back " + action.Progress.RollingBack.String()
		setCondition(&s, upgrade.Progressing, "True", "RollingBack", action.Message)
	case action.Kind == upgrade.DoWait:
		// Waiting with no step in flight: a step's preparation
		// (widenForEtcd) says what it waits for.
		setCondition(&s, upgrade.Progressing, "True", "Upgrading", action.Message)
	}
	out := upgrade.ObjectStatus(cv.Status, s, current, action.Progress, cv.Generation, now)
	if prev, cur := cv.Status.InFlight, out.InFlight; prev != nil && cur != nil && prev.Component == cur.Component && prev.Node == cur.Node && prev.To == cur.To {
		cur.Drained = prev.Drained
	}
	out.History = upgrade.History(cv.Status.History, cv.Spec.DesiredVersion, action, now)
	if action.Kind == upgrade.DoComplete && len(steps) == 0 {
		// The last step's completion is the upgrade's: the same write
		// says Progressing=False Done, so the history says Completed with
		// it rather than a round later (a follower that exits on Done
		// would read it still Partial).
		out.History = upgrade.History(out.History, cv.Spec.DesiredVersion, upgrade.Action{Kind: upgrade.DoNothing, Message: "the cluster runs " + cv.Spec.DesiredVersion}, now)
	}
	return out
}

func setCondition(s *upgrade.Status, typ, status, reason, message string) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			s.Conditions[i] = upgrade.Condition{Type: typ, Status: status, Reason: reason, Message: message}
		}
	}
}

// refuseInvalid says in the status that the desired version names no
// release bootlet has images for; nothing else changes.
func (r *rounds) refuseInvalid(ctx context.Context, cv *btypes.ClusterVersion, err error, now time.Time) {
	st := cv.Status
	st.ObservedGeneration = cv.Generation
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: upgrade.Failing, Status: metav1.ConditionTrue, Reason: upgrade.ReasonInvalidVersion,
		Message: fmt.Sprintf("refused: %v", err), ObservedGeneration: cv.Generation, LastTransitionTime: metav1.NewTime(now)})
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: upgrade.Progressing, Status: metav1.ConditionFalse, Reason: upgrade.ReasonStopped,
		Message: "refused", ObservedGeneration: cv.Generation, LastTransitionTime: metav1.NewTime(now)})
	cv.Status = st
	if _, err := cvclient.UpdateStatus(ctx, r.dyn, cv); err != nil && !apierrors.IsConflict(err) {
		klog.ErrorS(err, "Upgrade controller: writing the ClusterVersion's status")
	}
}
