package certificates

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/retry"

	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/podapi/apitls"
)

// bootletServing is the daemon's own serving certificate in
// check-expiration's names.
const bootletServing = "bootlet-serving"

// userAgent names the certificate commands' requests in the apiserver's
// logs and audit.
const userAgent = "bootlet-certs"

// restartedAtAnnotation is what `kubectl rollout restart` sets on a pod
// template.
const restartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// RenewOptions are `certs renew`'s inputs, its flags.
type RenewOptions struct {
	AssetDir, RootDir string
	// Kubeconfig is the apiserver whose Secrets to update ("":
	// AssetDir/admin.conf).
	Kubeconfig string
	// ServingCert, when set, is a serving certificate not bootlet's own:
	// it is not renewed.
	ServingCert string
	// ExpiringWithin selects what to renew when no name is given.
	ExpiringWithin time.Duration
	// Timeout bounds the wait for the components to pick the
	// certificates up.
	Timeout time.Duration
	// Offline renews the files only, without an apiserver.
	Offline bool
}

// Renew is `certs renew`: the files (RenewPKI), bootlet's
// serving certificate, then the apiserver's copies and the waits.
func Renew(ctx context.Context, o RenewOptions, args []string, out io.Writer, now time.Time) error {
	if ctx == nil {
		ctx = context.Background()
	}
	copies, _, problems, err := PKIFileCopies(o.AssetDir)
	if err != nil {
		return err
	}
	notAfter := map[string]time.Time{}
	for _, c := range copies {
		notAfter[c.Name] = c.Cert.NotAfter
	}
	var candidates []string
	for _, n := range RenewableCerts() {
		if _, ok := notAfter[n]; ok {
			candidates = append(candidates, n)
		}
	}
	servingDir := filepath.Join(o.RootDir, "pki")
	if o.ServingCert == "" {
		if certs, err := certutil.CertsFromFile(filepath.Join(servingDir, "apiserver.crt")); err == nil {
			if _, err := os.Stat(filepath.Join(servingDir, "ca.key")); err == nil {
				candidates = append(candidates, bootletServing)
				notAfter[bootletServing] = certs[0].NotAfter
			}
		}
	}
	names, err := SelectRenewals(args, candidates, notAfter, o.ExpiringWithin, now)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		fmt.Fprintf(out, "note: %s\n", strings.Join(problems, "; "))
	}
	if len(names) == 0 {
		// The cluster's copies are still brought in line with the files:
		// that finishes a renewal whose online part failed.
		fmt.Fprintf(out, "no certificate expires within %s\n", o.ExpiringWithin)
	}
	logf := func(format string, a ...any) { fmt.Fprintf(out, strings.TrimPrefix(format, "[certs] ")+"\n", a...) }
	pkiNames := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == bootletServing })
	if _, err := RenewPKI(o.AssetDir, pkiNames, now, logf); err != nil {
		return fmt.Errorf("%w (the files renewed so far are in place: run the command again to finish)", err)
	}
	if slices.Contains(names, bootletServing) {
		old, renewed, err := apitls.RenewServingCert(servingDir)
		if err != nil {
			return fmt.Errorf("%s: %w", bootletServing, err)
		}
		logf("renewed %s (%s): serial %s -> %s, expires %s; the daemon serves it within %s", bootletServing, filepath.Join(servingDir, "apiserver.crt"),
			old.SerialNumber, renewed.SerialNumber, renewed.NotAfter.UTC().Format(time.RFC3339), apitls.ServingReloadInterval)
	}
	if o.Offline || (len(pkiNames) == 0 && len(names) > 0) {
		return nil
	}
	kubeconfig := o.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = filepath.Join(o.AssetDir, manifests.AdminKubeconfig)
	}
	wctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := renewOnline(wctx, kubeconfig, o.AssetDir, o.RootDir, out); err != nil {
		return fmt.Errorf("the files are renewed, the cluster's copies not all: %w (run the command again once the apiserver answers, or see check-expiration)", err)
	}
	return nil
}

// renewOnline brings the apiserver's Secrets in line with the asset dir,
// restarts the Deployments (or DaemonSets) whose Secret changed and waits until every copy
// is in use: the apiserver's served certificate, this master's copy, the
// rollouts.
func renewOnline(ctx context.Context, kubeconfig, assetDir, rootDir string, out io.Writer) error {
	cfg, c, err := kubeclient.ForFile(kubeconfig, userAgent, 15*time.Second)
	if err != nil {
		return err
	}
	files, err := SecretFiles(assetDir)
	if err != nil {
		return err
	}
	changed := map[string][]string{}
	updated := map[string]*v1.Secret{}
	for _, name := range manifests.SelfHostedSecretNames {
		keys, s, err := updateSecret(ctx, c, name, files)
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(out, "note: the apiserver has no Secret kube-system/%s (not pivoted yet?)\n", name)
			continue
		}
		if err != nil {
			return fmt.Errorf("secret kube-system/%s: %w", name, err)
		}
		if len(keys) > 0 {
			changed[name], updated[name] = keys, s
			fmt.Fprintf(out, "secret/%s updated in kube-system (%s)\n", name, strings.Join(keys, ", "))
		}
	}
	// The controller-manager and the scheduler read their kubeconfigs,
	// which embed their certificates, once: roll them. The apiserver and
	// etcd reload their files (docs/operations.md, Certificates): no
	// restart.
	var rolled []workload
	for _, name := range []string{manifests.KubeControllerManager, manifests.KubeScheduler} {
		if len(changed[name]) == 0 {
			continue
		}
		w, err := restartWorkload(ctx, c, name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("restarting kube-system/%s: %w", name, err)
		}
		fmt.Fprintf(out, "%s/%s restarted\n", w.resource, name)
		rolled = append(rolled, w)
	}
	if slices.Contains(changed[manifests.KubeAPIServer], "apiserver.crt") {
		want, err := certutil.CertsFromFile(filepath.Join(assetDir, manifests.PKIDir, manifests.APIServer+".crt"))
		if err != nil {
			return err
		}
		start := time.Now()
		if err := poll(ctx, func() (bool, string) {
			serial, err := servedSerial(cfg)
			if err != nil {
				return false, err.Error()
			}
			return serial == want[0].SerialNumber.String(), "the apiserver serves serial " + serial + ", want " + want[0].SerialNumber.String()
		}); err != nil {
			return fmt.Errorf("waiting for the apiserver to serve its renewed certificate: %w", err)
		}
		fmt.Fprintf(out, "the apiserver serves its renewed certificate (serial %s) after %s\n", want[0].SerialNumber, time.Since(start).Round(time.Millisecond))
	}
	for _, name := range manifests.SelfHostedSecretNames {
		keys := changed[name]
		if len(keys) == 0 {
			continue
		}
		if ok, err := waitMirror(ctx, updated[name], files, keys); err != nil {
			return fmt.Errorf("waiting for this master's copy of kube-system/%s: %w", name, err)
		} else if ok {
			fmt.Fprintf(out, "this master's copy of kube-system/%s holds the renewed files\n", name)
		}
	}
	for _, w := range rolled {
		if err := poll(ctx, func() (bool, string) { return w.rolledOut(ctx, c) }); err != nil {
			return fmt.Errorf("waiting for %s kube-system/%s to roll out: %w", w.kind, w.name, err)
		}
		fmt.Fprintf(out, "%s %q successfully rolled out\n", w.kind, w.name)
	}
	return nil
}

// workload is the controller of a restarted controller-manager or
// scheduler: a Deployment with one master, a DaemonSet with several
// (manifests' electedWorkload).
type workload struct {
	kind, resource, name string
}

// restartWorkload restarts kube-system/NAME as kubectl rollout restart
// does, whichever of the two kinds it is: NotFound when it is neither.
func restartWorkload(ctx context.Context, c kubernetes.Interface, name string) (workload, error) {
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, restartedAtAnnotation, time.Now().Format(time.RFC3339Nano)))
	_, err := c.AppsV1().Deployments(metav1.NamespaceSystem).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if !apierrors.IsNotFound(err) {
		return workload{"deployment", "deployment.apps", name}, err
	}
	_, err = c.AppsV1().DaemonSets(metav1.NamespaceSystem).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	return workload{"daemon set", "daemonset.apps", name}, err
}

// rolledOut is kubectl rollout status's verdict on w.
func (w workload) rolledOut(ctx context.Context, c kubernetes.Interface) (bool, string) {
	if w.kind == "deployment" {
		d, err := c.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return deploymentRolledOut(d)
	}
	ds, err := c.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, w.name, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	return daemonSetRolledOut(ds)
}

// updateSecret writes the asset dir's files into kube-system/NAME where
// they differ (RenewSecretData) and returns the keys it changed and the
// Secret the apiserver stored (nil when none changed).
func updateSecret(ctx context.Context, c kubernetes.Interface, name string, files map[string][]byte) (keys []string, updated *v1.Secret, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		updated = nil
		s, err := c.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var data map[string][]byte
		data, keys = RenewSecretData(s.Data, files)
		if len(keys) == 0 {
			return nil
		}
		s.Data = data
		updated, err = c.CoreV1().Secrets(metav1.NamespaceSystem).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	return keys, updated, err
}

// servedSerial is the serial of the certificate the apiserver of cfg
// serves, from a TLS handshake that verifies it as the client would.
func servedSerial(cfg *rest.Config) (string, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "", err
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return "", err
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", host, tlsCfg)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// waitMirror waits until this master's mirror of s (the directory its
// pods mount, package credmirror) holds the files' bytes in keys. s is the
// Secret as the renewal's update stored it: its mirror target is in its
// annotations, which the update kept, so there is nothing to read again. A
// Secret without a mirror target, or a machine without its mirror (the
// command runs off the masters), is nothing to wait for (false).
func waitMirror(ctx context.Context, s *v1.Secret, files map[string][]byte, keys []string) (bool, error) {
	t, ok, err := credmirror.TargetOf(s)
	if err != nil || !ok || !credmirror.Complete(t.Dir) {
		return false, err
	}
	return true, poll(ctx, func() (bool, string) {
		got, err := credmirror.Read(t)
		if err != nil {
			return false, err.Error()
		}
		for _, k := range keys {
			if !bytes.Equal(got[k], files[k]) {
				return false, t.Dir + " still holds the old " + k
			}
		}
		return true, ""
	})
}

// deploymentRolledOut is kubectl rollout status's verdict
// (polymorphichelpers.DeploymentStatusViewer, whose package would pull
// kubectl's whole command tree into bootlet-tools).
func deploymentRolledOut(d *appsv1.Deployment) (bool, string) {
	if d.Generation > d.Status.ObservedGeneration {
		return false, "waiting for the deployment spec update to be observed"
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return false, fmt.Sprintf("deployment %q exceeded its progress deadline", d.Name)
		}
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.UpdatedReplicas < replicas:
		return false, fmt.Sprintf("%d out of %d new replicas have been updated", st.UpdatedReplicas, replicas)
	case st.Replicas > st.UpdatedReplicas:
		return false, fmt.Sprintf("%d old replicas are pending termination", st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas < st.UpdatedReplicas:
		return false, fmt.Sprintf("%d of %d updated replicas are available", st.AvailableReplicas, st.UpdatedReplicas)
	}
	return true, ""
}

// daemonSetRolledOut is kubectl rollout status's verdict on a DaemonSet
// (polymorphichelpers.DaemonSetStatusViewer).
func daemonSetRolledOut(ds *appsv1.DaemonSet) (bool, string) {
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		return true, ""
	}
	st := ds.Status
	switch {
	case ds.Generation > st.ObservedGeneration:
		return false, "waiting for the daemon set spec update to be observed"
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled:
		return false, fmt.Sprintf("%d out of %d new pods have been updated", st.UpdatedNumberScheduled, st.DesiredNumberScheduled)
	case st.NumberAvailable < st.DesiredNumberScheduled:
		return false, fmt.Sprintf("%d of %d updated pods are available", st.NumberAvailable, st.DesiredNumberScheduled)
	}
	return true, ""
}

// poll runs cond every 500 ms until it holds or ctx ends; the error then
// says what cond last reported.
func poll(ctx context.Context, cond func() (bool, string)) error {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		ok, why := cond()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New(why + " (" + ctx.Err().Error() + ")")
		case <-t.C:
		}
	}
}
