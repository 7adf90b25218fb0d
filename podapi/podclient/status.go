package podclient

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeStatus is what `bootlet status` shows of a daemon: its version, its
// Node (none from a daemon older than the Node API), every pod with its
// owner, and its verbose /readyz with whether it passed.
type NodeStatus struct {
	ServerVersion string
	Nodes         []v1.Node
	Pods          *v1.PodList
	Readyz        []byte
	ReadyErr      error
}

// Status reads the daemon's status. An error is returned only when the
// daemon cannot be read at all; a failing /readyz is in ReadyErr.
func Status(ctx context.Context, cs kubernetes.Interface) (NodeStatus, error) {
	var st NodeStatus
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return st, err
	}
	st.ServerVersion = v.GitVersion
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return st, err
	}
	if nodes != nil {
		st.Nodes = nodes.Items
	}
	if st.Pods, err = cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		return st, err
	}
	st.Readyz, st.ReadyErr = cs.CoreV1().RESTClient().Get().AbsPath("/readyz").Param("verbose", "").DoRaw(ctx)
	return st, nil
}
