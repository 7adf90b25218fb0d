package controller

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/internal/etcdapi"
	"github.com/bootlet/bootlet/internal/kubeclient"
)

// Component names the controller in its Events and its record's writes.
const Component = "bootlet-masters"

// Etcd is the controller's calls to etcd's members (etcdapi.Client).
type Etcd interface {
	Observe(ctx context.Context, endpoints []string) ([]etcdapi.Member, uint64, error)
	EndpointOf(id uint64) string
	AddLearner(ctx context.Context, endpoint, peerURL string) (uint64, error)
	Promote(ctx context.Context, endpoint string, id uint64) error
	Remove(ctx context.Context, endpoint string, id uint64) error
	MoveLeader(ctx context.Context, endpoint string, target uint64) error
	Close()
}

// Config configures the controller.
type Config struct {
	// EtcdAccess is this master's member, read each round: an upgrade's
	// etcd step changes the member's pod.
	EtcdAccess func() (etcdapi.Access, error)
	// DialEtcd replaces etcdapi.Dial (tests).
	DialEtcd func(etcdapi.Access) (Etcd, error)
	// Interval between rounds (default 5 s).
	Interval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// DeadAfter is masters.Facts.DeadAfter (0: masters.DeadAfter).
	DeadAfter time.Duration
}

// Controller runs the masters' rounds while its daemon leads.
type Controller struct {
	cfg Config
}

// New is a controller of cfg.
func New(cfg Config) *Controller {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DialEtcd == nil {
		cfg.DialEtcd = func(a etcdapi.Access) (Etcd, error) { return etcdapi.Dial(a) }
	}
	return &Controller{cfg: cfg}
}

// Lead runs a round every Interval until ctx ends (the Lease lost). A
// new leader starts from the record, as a restarted one does.
func (c *Controller) Lead(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) {
	klog.InfoS("Masters controller: leading")
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	r := &rounds{cfg: c.cfg, cs: cs, dyn: dyn, recorder: broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: Component})}
	kubeclient.Rounds(ctx, kubeclient.NewWake(), c.cfg.Interval, func() { r.round(ctx) })
}
