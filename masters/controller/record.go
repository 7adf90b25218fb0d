package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/masters"
)

// RecordName is the ConfigMap in kube-system that holds the controller's
// record (masters.Record) under RecordKey, as JSON: `kubectl -n
// kube-system get configmap bootlet-masters -o yaml` shows it. A
// ConfigMap, not a resource of its own: the record is the controller's
// memory between leaders, not an API a person writes, and what a person
// reads is on each Node (its BootletMaster condition) and in `bootlet
// master status`.
const (
	RecordName = "bootlet-masters"
	RecordKey  = "record"
)

// keptRecord is the record as read, with the object it came from (nil:
// none yet) for a write that refuses a concurrent leader's.
type keptRecord struct {
	record masters.Record
	cm     *v1.ConfigMap
	raw    []byte
}

func readRecord(ctx context.Context, cs kubernetes.Interface) (keptRecord, error) {
	cm, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, RecordName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return keptRecord{}, nil
	}
	if err != nil {
		return keptRecord{}, fmt.Errorf("reading the record: %w", err)
	}
	k := keptRecord{cm: cm, raw: []byte(cm.Data[RecordKey])}
	if len(k.raw) > 0 {
		if err := json.Unmarshal(k.raw, &k.record); err != nil {
			// Never act on a record that does not decode: an operation
			// under way would be forgotten halfway through.
			return k, fmt.Errorf("the record in configmap %s/%s does not decode (%w): fix or delete it", metav1.NamespaceSystem, RecordName, err)
		}
	}
	return k, nil
}

// writeRecord writes rec if it differs from what was read, under the
// resourceVersion it was read at: two leaders (one that has lost its
// Lease and does not know it yet) conflict rather than overwrite.
func writeRecord(ctx context.Context, cs kubernetes.Interface, kept keptRecord, rec masters.Record) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if len(kept.raw) == 0 {
		// None yet: an empty record needs no object.
		if kept.raw, err = json.Marshal(masters.Record{}); err != nil {
			return err
		}
	}
	if bytes.Equal(raw, kept.raw) {
		return nil
	}
	cms := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	if kept.cm == nil {
		_, err = cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordName, Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"app.kubernetes.io/managed-by": Component}}, Data: map[string]string{RecordKey: string(raw)}}, metav1.CreateOptions{FieldManager: Component})
		if apierrors.IsAlreadyExists(err) {
			return apierrors.NewConflict(v1.Resource("configmaps"), RecordName, err)
		}
		return err
	}
	cm := kept.cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[RecordKey] = string(raw)
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: Component})
	return err
}

// ReadRecord is the controller's record, for a node's agent to find its
// own operation in; an empty record when there is none yet.
func ReadRecord(ctx context.Context, cs kubernetes.Interface) (masters.Record, error) {
	k, err := readRecord(ctx, cs)
	return k.record, err
}

// ElectedChangeUnderway says which elected component (masters.DecideWorkload)
// has both its Deployment and its DaemonSet: its workload is being
// replaced, and a step that sets the image of one would leave the other's
// pods at the old version. "" when none.
func ElectedChangeUnderway(ctx context.Context, cs kubernetes.Interface) (string, error) {
	for _, name := range masters.ElectedComponents {
		dep, ds, err := readElectedWorkload(ctx, cs, name)
		if err != nil {
			return "", err
		}
		if dep != nil && ds != nil {
			return fmt.Sprintf("%s's Deployment is being replaced by its DaemonSet (the masters' controller)", name), nil
		}
	}
	return "", nil
}

// readElectedWorkload reads an elected component's Deployment and
// DaemonSet in kube-system, nil for one that does not exist. Without a
// Deployment there is nothing to replace (masters.DecideWorkload keeps
// it so), and the DaemonSet is not read.
func readElectedWorkload(ctx context.Context, cs kubernetes.Interface, name string) (*appsv1.Deployment, *appsv1.DaemonSet, error) {
	dep, err := cs.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the Deployment %s: %w", name, err)
	}
	ds, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return dep, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the DaemonSet %s: %w", name, err)
	}
	return dep, ds, nil
}
