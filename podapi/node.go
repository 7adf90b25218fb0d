package podapi

import (
	"net/http"
	goruntime "runtime"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// bootlet's own Node, read-only: GET /api/v1/nodes and /api/v1/nodes/NAME
// serve the one node bootlet runs on, built at each request (never stored),
// as the apiserver would show a kubelet's Node. The Ready condition is
// /readyz's checks; the daemon adds what it knows about the node's place in
// the lifecycle with SetNodeStatus (the phase: nodephase.Source). Its
// UID is the node name, as bootlet's node events already reference it.

var nodesGR = schema.GroupResource{Resource: "nodes"}

// startTime is the Node's creationTimestamp: when this daemon started.
var startTime = metav1.NewTime(time.Now().Truncate(time.Second))

// SetNodeStatus sets the hook that adds the daemon's view of the node
// (annotations, conditions) to the Node at each request. Call before
// serving.
func (s *Server) SetNodeStatus(f func(*v1.Node)) { s.nodeStatus = f }

// Node builds bootlet's Node object.
func (s *Server) Node() *v1.Node {
	name := s.Registry.nodeName
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), CreationTimestamp: startTime,
			Labels: map[string]string{v1.LabelHostname: name, v1.LabelOSStable: goruntime.GOOS, v1.LabelArchStable: goruntime.GOARCH}},
		Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{KubeletVersion: Version.GitVersion, OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH}},
	}
	now := metav1.NewTime(time.Now())
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "BootletReady", Message: "bootlet's readiness checks pass", LastHeartbeatTime: now}
	if failed := s.failedReadyChecks(); len(failed) > 0 {
		ready.Status, ready.Reason, ready.Message = v1.ConditionFalse, "BootletNotReady", strings.Join(failed, "; ")
	}
	n.Status.Conditions = []v1.NodeCondition{ready}
	if s.nodeStatus != nil {
		s.nodeStatus(n)
	}
	return n
}

// serveNodes answers get and list of bootlet's one Node; it is never
// written, and not watched.
func (s *Server) serveNodes(req *http.Request, rt route) (runtime.Object, error) {
	if rt.sub != "" {
		return nil, apierrors.NewNotFound(nodesGR, rt.name+"/"+rt.sub)
	}
	if req.Method != http.MethodGet || isWatch(req) {
		return nil, methodNotAllowed(req)
	}
	n := s.Node()
	if rt.name != "" {
		if rt.name != n.Name {
			return nil, apierrors.NewNotFound(nodesGR, rt.name)
		}
		return n, nil
	}
	ls, fs, err := selectors(req)
	if err != nil {
		return nil, err
	}
	list := &v1.NodeList{}
	if ls.Matches(labels.Set(n.Labels)) && fs.Matches(fields.Set{"metadata.name": n.Name}) {
		list.Items = append(list.Items, *n)
	}
	return list, nil
}
