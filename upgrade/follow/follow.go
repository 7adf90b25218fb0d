package follow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
	"github.com/bootlet/bootlet/upgrade/cvclient"
	"github.com/bootlet/bootlet/upgrade/observer"
)

// Apply asks for the upgrade to the Kubernetes version to. It first makes
// the plan `bootlet upgrade plan` shows: a plan with a refusal is printed
// and nothing is set, so that a person reads every reason at once rather
// than in the controller's status. Else it sets the desired version (the
// same version again: a retry of a stopped upgrade) and, with wait,
// follows the controller's status until the upgrade is done (nil), stops
// (the Failing message) or timeout passes (0: no limit).
func Apply(ctx context.Context, dyn dynamic.Interface, cs kubernetes.Interface, to string, etcdUpgrade bool, w io.Writer, wait bool, timeout time.Duration) error {
	report, err := observer.PlanReport(ctx, cs, to, etcdUpgrade)
	if err != nil {
		return err
	}
	if len(report.Refusals) > 0 {
		if err := report.Write(w); err != nil {
			return err
		}
		return fmt.Errorf("the upgrade to %s is refused (%s): the desired version is unchanged; see the reasons above", to, reasons(report.Refusals))
	}
	cv, err := cvclient.SetDesired(ctx, dyn, to, etcdUpgrade)
	if err != nil {
		return fmt.Errorf("setting the desired version to %s: %w", to, err)
	}
	if _, err := fmt.Fprintf(w, "desired version set to %s (generation %d)\n", to, cv.Generation); err != nil {
		return err
	}
	if !wait {
		return nil
	}
	return defaultFollower(dyn, w).wait(ctx, to, cv.Generation, timeout)
}

// Status prints where the upgrade stands (WriteStatus).
func Status(ctx context.Context, dyn dynamic.Interface, w io.Writer) error {
	cv, err := cvclient.Get(ctx, dyn)
	if apierrors.IsNotFound(err) {
		_, err := fmt.Fprintln(w, "no upgrade was ever asked: `bootlet upgrade apply --to VERSION` sets one")
		return err
	}
	if err != nil {
		return fmt.Errorf("reading the ClusterVersion: %w", err)
	}
	return WriteStatus(w, cv, time.Now())
}

// reasons are the refusals' reasons, each once, sorted.
func reasons(rs []upgrade.Refusal) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Reason)
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ", ")
}

// follower polls the ClusterVersion. A poll rather than a watch: a watch
// ends with its apiserver, which an upgrade replaces, and each Get is
// answered by whichever apiserver serves now.
type follower struct {
	dyn dynamic.Interface
	w   io.Writer
	// interval between reads; outage is how long the API may fail to
	// answer in a row (an apiserver handing over its port, a master
	// rebooting) before the command gives up.
	interval, outage time.Duration
	now              func() time.Time
}

func defaultFollower(dyn dynamic.Interface, w io.Writer) follower {
	return follower{dyn: dyn, w: w, interval: time.Second, outage: 30 * time.Second, now: time.Now}
}

// wait prints one line per change of the object until the controller
// reports generation done, stopped, or timeout passes.
func (f follower) wait(parent context.Context, to string, generation int64, timeout time.Duration) error {
	ctx, cancel := parent, context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(parent, timeout)
	}
	defer cancel()
	var prev *btypes.ClusterVersion
	var failingSince time.Time
	var lastErr error
	for {
		cv, err := cvclient.Get(ctx, f.dyn)
		switch {
		case err == nil:
			if !failingSince.IsZero() {
				f.printf("the API answers again after %s (%v)", f.now().Sub(failingSince).Round(time.Second), lastErr)
				failingSince = time.Time{}
			}
			for _, line := range changes(prev, cv) {
				f.printf("%s", line)
			}
			prev = cv
			if done, err := outcome(cv, generation); done {
				return err
			}
		case ctx.Err() != nil:
			// The timeout or an interrupt, told below.
		case transient(err):
			if failingSince.IsZero() {
				failingSince = f.now()
			}
			lastErr = err
			if down := f.now().Sub(failingSince); down >= f.outage {
				return fmt.Errorf("the API has not answered for %s: %w; the upgrade goes on without this command, `bootlet upgrade status` shows where it stands", down.Round(time.Second), err)
			}
		default:
			return fmt.Errorf("reading the ClusterVersion: %w", err)
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return parent.Err()
			}
			return fmt.Errorf("timed out after %s waiting for the upgrade to %s, %s; it goes on without this command: `bootlet upgrade status` shows where it stands", timeout, to, underWay(prev, generation))
		case <-time.After(f.interval):
		}
	}
}

func (f follower) printf(format string, args ...any) {
	fmt.Fprintf(f.w, "%s "+format+"\n", append([]any{f.now().Format("15:04:05")}, args...)...)
}

// outcome is the end of the wait for generation that cv shows, if any:
// done is nil; stopped (Failing, with nothing progressing: rolled back,
// held for a person, or refused) is the Failing message. A status about an
// older generation tells nothing of this one.
func outcome(cv *btypes.ClusterVersion, generation int64) (done bool, err error) {
	st := cv.Status
	if st.ObservedGeneration < generation {
		return false, nil
	}
	progressing := meta.FindStatusCondition(st.Conditions, upgrade.Progressing)
	failing := meta.FindStatusCondition(st.Conditions, upgrade.Failing)
	if failing != nil && failing.Status == metav1.ConditionTrue && (progressing == nil || progressing.Status != metav1.ConditionTrue) {
		to := cv.Spec.DesiredVersion
		return true, fmt.Errorf("the upgrade to %s stopped, %s: %s; once the cause is fixed, `bootlet upgrade apply --to %s` tries again", to, failing.Reason, failing.Message, to)
	}
	if progressing != nil && progressing.Status == metav1.ConditionFalse && progressing.Reason == upgrade.ReasonDone &&
		failing != nil && failing.Status == metav1.ConditionFalse {
		return true, nil
	}
	return false, nil
}

// underWay names where the upgrade was at the last read, for a timeout.
func underWay(cv *btypes.ClusterVersion, generation int64) string {
	switch {
	case cv == nil:
		return "with the ClusterVersion never read"
	case cv.Status.ObservedGeneration < generation:
		return fmt.Sprintf("which the controller has not taken yet (it observes generation %d, not %d)", cv.Status.ObservedGeneration, generation)
	case cv.Status.RollingBack != nil:
		return "rolling back " + stepString(*cv.Status.RollingBack)
	case cv.Status.InFlight != nil:
		return "at step " + stepString(*cv.Status.InFlight)
	case cv.Status.Step != "":
		return "at step " + cv.Status.Step
	}
	return "with no step under way"
}

// transient reports whether err is the API away for a moment, as while an
// apiserver hands its port over or a master reboots: the connection
// refused, reset or cut, a request timed out, or an apiserver that
// answers but cannot serve yet.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var netErr net.Error
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		utilnet.IsHTTP2ConnectionLost(err) || utilnet.IsTimeout(err) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &netErr) && netErr.Timeout()) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err)
}
