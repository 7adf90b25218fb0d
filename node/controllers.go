package node

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/controlplanetaint"
	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/csrapprover"
	"github.com/bootlet/bootlet/internal/manifestfile"
	"github.com/bootlet/bootlet/pivot"
	"github.com/bootlet/bootlet/podapi"
	btypes "github.com/bootlet/bootlet/types"
)

// applyManifestsDir creates every object in dir that does not exist yet and
// replaces those whose content changed. The bootstrap pods that a completed
// pivot (the record at pivotDone) handed over are not created again: after
// a reboot the checkpoint and the self-hosted pods serve, and a bootstrap
// apiserver coming back would run beside them on the rendered image.
func applyManifestsDir(reg *podapi.Registry, dir, pivotDone string) error {
	objs, err := manifestfile.Read([]string{dir})
	if err != nil {
		return err
	}
	done, err := pivot.ReadDone(pivotDone)
	if err != nil {
		klog.ErrorS(err, "The record of a completed pivot is unreadable; applying every manifest", "dir", dir)
	}
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *v1.Pod:
			if o.Namespace == "" {
				o.Namespace = "default"
			}
			if pivot.Pivoted(done, pivot.DefaultComponents, o.Namespace, o.Name) {
				klog.InfoS("Not creating a bootstrap pod the pivot handed over to its self-hosted pod", "pod", klog.KObj(o), "dir", dir, "pivotCompletedAt", done.CompletedAt)
				continue
			}
			_, err = reg.CreatePod(o, false)
		case *v1.Secret:
			if o.Namespace == "" {
				o.Namespace = "default"
			}
			_, err = reg.PutSecret(o, true, false)
		case *v1.ConfigMap:
			if o.Namespace == "" {
				o.Namespace = "default"
			}
			_, err = reg.PutConfigMap(o, true, false)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			klog.ErrorS(err, "Manifest rejected", "dir", dir)
		}
	}
	return nil
}

// startNodeGuard runs the controllers of a master that use the
// checkpointer's identity (a file only masters hold): the approver of
// bootstrap tokens' node client requests, the control-plane taint, and the
// mirror of the control plane's credentials onto this master's disk.
// Every master runs them; the first two write conditionally, so they agree,
// and the mirror writes only this master's disk.
func startNodeGuard(ctx context.Context, kubeconfig string) {
	go csrapprover.New(csrapprover.Config{Kubeconfig: kubeconfig, BootstrapGroup: btypes.NodeBootstrapTokenGroup}).Run(ctx)
	go controlplanetaint.New(controlplanetaint.Config{Kubeconfig: kubeconfig}).Run(ctx)
	go credmirror.New(credmirror.Config{Kubeconfig: kubeconfig}).Run(ctx)
}
