package checkpointer

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
)

// A version an upgrade step has not passed yet is not checkpointed over one
// that has. One Ready pod of the new version is not the step's gate (the
// apiserver's also waits for the pod to be alone, and the gate may still
// fail and be put back), and a reboot in the middle of the step must bring
// back the last version that passed (docs/design/upgrade.md).

// UngatedStep is an upgrade step begun and not through its gate, or being
// put back: Component is its DaemonSet's or Deployment's name, Node its
// node ("" for a cluster-wide add-on), To the version it moves to.
type UngatedStep struct {
	Component, Node, To string
}

func (s UngatedStep) String() string {
	if s.Node == "" {
		return fmt.Sprintf("%s's step to %s", s.Component, s.To)
	}
	return fmt.Sprintf("%s's step on %s to %s", s.Component, s.Node, s.To)
}

// ungatedBy is the step whose version pod (of the component named name,
// on node) runs while that step is not through its gate, or "".
func ungatedBy(steps []UngatedStep, name, node string, pod *v1.Pod) string {
	for _, s := range steps {
		if s.Component != name || s.Node != "" && s.Node != node {
			continue
		}
		for _, c := range pod.Spec.Containers {
			if c.Name == s.Component && upgrade.VersionOfImage(c.Image) == s.To {
				return s.String()
			}
		}
	}
	return ""
}

// clusterVersionPath is the one ClusterVersion, named cluster.
const clusterVersionPath = "/apis/" + btypes.ClusterVersionGroup + "/" + btypes.ClusterVersionVersion + "/" + btypes.ClusterVersionResource + "/" + btypes.ClusterVersionName

// readUngatedSteps reads the upgrade's step in flight and the one being put
// back from the ClusterVersion. None when there is no ClusterVersion (no
// upgrade ever asked, or a cluster rendered before the upgrade existed).
func readUngatedSteps(ctx context.Context, cs kubernetes.Interface) ([]UngatedStep, error) {
	rc := cs.Discovery().RESTClient()
	if rc == nil {
		return nil, nil
	}
	raw, err := rc.Get().AbsPath(clusterVersionPath).DoRaw(ctx)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cv btypes.ClusterVersion
	if err := json.Unmarshal(raw, &cv); err != nil {
		return nil, fmt.Errorf("decoding the ClusterVersion: %w", err)
	}
	var out []UngatedStep
	for _, s := range []*btypes.UpgradeStep{cv.Status.InFlight, cv.Status.RollingBack} {
		if s != nil {
			out = append(out, UngatedStep{Component: s.Component, Node: s.Node, To: s.To})
		}
	}
	return out, nil
}
