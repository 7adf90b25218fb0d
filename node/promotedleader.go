package node

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/masters"
	"github.com/bootlet/bootlet/masters/nodekeys"
	masterssigner "github.com/bootlet/bootlet/masters/signer"
	"github.com/bootlet/bootlet/podapi/apitls"
	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade/nodeagent"
)

// A node an administrator labelled a master leads the masters' controller
// (with the upgrade's and the signer) as a first-boot master does, once it
// is a whole master: the controller labelled it masters.LabelLeader as its
// member came to vote, the member is there, and its credential mirror
// (package credmirror) holds the cluster CA, which the controller-manager
// signs with, and the etcd CA, which the leader publishes
// (masterssigner.EtcdCASecretName). With the first it makes its own
// identity: a client certificate of btypes.MastersControllerUser in
// system:masters, what render's admin identity is to a first-boot master.
// It holds no more than it did: whoever holds the cluster CA's key can
// make any identity. When the label or the member goes (a demotion) the
// candidate stops and the identity's file is removed.
//
// With that identity the daemon also takes its etcd member's steps of an
// upgrade (an upgrade node agent without the kubelet): the kubelet's steps
// stay with the `bootlet upgrade agent` the node ran as a worker.

// candidacyPoll is how often the node looks again.
const candidacyPoll = 5 * time.Second

// controllerIdentityLife is the life of the identity a promoted master
// makes; the candidate is started again with a new one at 80% of it.
const controllerIdentityLife = 7 * 24 * time.Hour

// controllerKubeconfigName is the identity's file under bootlet's root.
const controllerKubeconfigName = "masters-controller.conf"

// candidacyFacts are what one decision on the candidacy reads.
type candidacyFacts struct {
	// Identity: the checkpointer's identity is on disk.
	Identity bool
	// LeaderLabelled: the Node carries masters.LabelLeader, which the
	// masters' controller sets once the node's member votes.
	LeaderLabelled bool
	// ClusterCA, EtcdCA: why the CA's pair is not on disk, "" when it is.
	ClusterCA, EtcdCA string
	// Member: why this node has no etcd member, "" when it has.
	Member string
}

// decideCandidacy: whether the node runs a candidate, and why not.
func decideCandidacy(f candidacyFacts) (bool, string) {
	var why []string
	if !f.Identity {
		why = append(why, "no checkpointer identity (the node is not labelled a master)")
	}
	if !f.LeaderLabelled {
		why = append(why, "the Node lacks "+masters.LabelLeader+" (its member does not vote yet)")
	}
	if f.Member != "" {
		why = append(why, "no etcd member: "+f.Member)
	}
	if f.ClusterCA != "" {
		why = append(why, "the cluster CA is not mirrored: "+f.ClusterCA)
	}
	if f.EtcdCA != "" {
		why = append(why, "the etcd CA is not mirrored: "+f.EtcdCA)
	}
	return len(why) == 0, strings.Join(why, "; ")
}

// caPair are the certificate's and key's files of a CA its credential
// mirror holds.
type caPair struct{ cert, key string }

// promotedCandidate is the candidacy of a node without render's identity.
type promotedCandidate struct {
	n *node
	// The candidate running, and when its identity needs making again.
	cancel  context.CancelFunc
	done    chan struct{}
	renewAt time.Time
}

// run looks every candidacyPoll until ctx ends.
func (c *promotedCandidate) run(ctx context.Context) {
	o := c.n.o
	kubeclient.Run(ctx, nil, o.CheckpointerKubeconfig, "bootlet-masters-candidacy", func(err error) {
		klog.V(4).InfoS("Masters' candidacy: the checkpointer's identity is not loadable yet", "path", o.CheckpointerKubeconfig, "err", err)
	}, func(ctx context.Context, cs kubernetes.Interface) {
		t := time.NewTicker(candidacyPoll)
		defer t.Stop()
		defer c.stop("the daemon stops")
		said := ""
		for {
			f, clusterCA, etcdCA, err := c.facts(ctx, cs)
			ok, why := decideCandidacy(f)
			switch {
			case err != nil:
				// The API did not answer (an address moving, a master
				// lost): nothing is decided on what was not read.
				klog.V(2).InfoS("Masters' candidacy: reading the facts failed; deciding nothing this time", "err", err)
			case ok && c.cancel != nil && time.Now().After(c.renewAt):
				c.stop("its identity is due for renewal")
				c.start(ctx, clusterCA, etcdCA)
			case ok && c.cancel == nil:
				c.start(ctx, clusterCA, etcdCA)
			case !ok && c.cancel != nil:
				c.stop(why)
			case !ok && why != said:
				klog.V(2).InfoS("Masters' candidacy: not a candidate", "why", why)
			}
			said = why
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// facts reads the candidacy's facts: the files on disk, the member in the
// store, the Node's label, and where the mirror puts the CAs (the Secrets'
// own targets). An API read that fails (but for a Secret not found) is an
// error: no fact is made of it.
func (c *promotedCandidate) facts(ctx context.Context, cs kubernetes.Interface) (f candidacyFacts, clusterCA, etcdCA caPair, err error) {
	o := c.n.o
	_, serr := os.Stat(o.CheckpointerKubeconfig)
	f.Identity = serr == nil
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	n, err := cs.CoreV1().Nodes().Get(rctx, o.NodeName, metav1.GetOptions{})
	cancel()
	switch {
	case apierrors.IsNotFound(err):
		// Deleted: no label, whatever its kubelet will register.
	case err != nil:
		return f, clusterCA, etcdCA, err
	default:
		_, f.LeaderLabelled = n.Labels[masters.LabelLeader]
	}
	if _, _, merr := (etcdPod{reg: c.n.reg, root: o.RootDir}).find(); merr != nil {
		f.Member = merr.Error()
	}
	if clusterCA, f.ClusterCA, err = mirroredPair(ctx, cs, "kube-controller-manager", "ca.crt", "ca.key"); err != nil {
		return f, clusterCA, etcdCA, err
	}
	etcdCA, f.EtcdCA, err = mirroredPair(ctx, cs, masterssigner.EtcdCASecretName, masterssigner.EtcdCACertKey, masterssigner.EtcdCAKeyKey)
	return f, clusterCA, etcdCA, err
}

// mirroredPair is where the credential mirror puts Secret name's two
// keys on this node once both files are there; else why not. err is an
// API read that failed.
func mirroredPair(ctx context.Context, cs kubernetes.Interface, name, certKey, keyKey string) (p caPair, why string, err error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Get(rctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return caPair{}, fmt.Sprintf("no Secret %s/%s", metav1.NamespaceSystem, name), nil
	case err != nil:
		return caPair{}, "", err
	}
	t, ok, terr := credmirror.TargetOf(s)
	if terr != nil || !ok {
		return caPair{}, fmt.Sprintf("secret %s names no mirror directory (%v)", name, terr), nil
	}
	for _, it := range t.Items {
		switch it.Key {
		case certKey:
			p.cert = filepath.Join(t.Dir, it.Path)
		case keyKey:
			p.key = filepath.Join(t.Dir, it.Path)
		}
	}
	if p.cert == "" || p.key == "" {
		return caPair{}, fmt.Sprintf("secret %s does not hold %s and %s", name, certKey, keyKey), nil
	}
	for _, f := range []string{p.cert, p.key} {
		if _, serr := os.Stat(f); serr != nil {
			return caPair{}, "not mirrored yet: " + serr.Error(), nil
		}
	}
	return p, "", nil
}

// start makes the identity and starts the candidate with it.
func (c *promotedCandidate) start(ctx context.Context, clusterCA, etcdCA caPair) {
	o := c.n.o
	path := filepath.Join(o.RootDir, controllerKubeconfigName)
	if err := writeControllerIdentity(path, o.CheckpointerKubeconfig, clusterCA, controllerIdentityLife); err != nil {
		klog.ErrorS(err, "Masters' candidacy: making this master's controller identity failed; trying again", "every", candidacyPoll)
		return
	}
	cctx, cancel := context.WithCancel(ctx)
	c.cancel, c.done = cancel, make(chan struct{})
	c.renewAt = time.Now().Add(controllerIdentityLife * 8 / 10)
	candidate := c.n.mastersCandidate(path, func() (string, string, error) { return etcdCA.cert, etcdCA.key, nil })
	etcdAgent := nodeagent.New(nodeagent.Config{NodeName: o.NodeName, Kubeconfig: path, RuntimeAddress: o.RuntimeEndpoint,
		Etcd: etcdPod{reg: c.n.reg, root: o.RootDir}})
	klog.InfoS("Masters' candidacy: this labelled master is a candidate of the masters' controller and takes its etcd member's upgrade steps", "kubeconfig", path)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); candidate.Run(cctx) }()
	go func() { defer wg.Done(); etcdAgent.Run(cctx) }()
	done := c.done
	go func() {
		wg.Wait()
		close(done)
	}()
}

// stop ends the candidate (it gives up the Lease if it held it) and
// removes the identity's file.
func (c *promotedCandidate) stop(why string) {
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
	c.cancel, c.done = nil, nil
	path := filepath.Join(c.n.o.RootDir, controllerKubeconfigName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		klog.ErrorS(err, "Masters' candidacy: removing the controller identity", "path", path)
	}
	klog.InfoS("Masters' candidacy: no longer a candidate", "why", why)
}

// writeControllerIdentity writes to path a kubeconfig of the masters'
// controller identity signed by the cluster CA's pair, for the server and
// CA of the kubeconfig at like.
func writeControllerIdentity(path, like string, ca caPair, life time.Duration) error {
	server, caData, err := nodekeys.ClusterOf(like)
	if err != nil {
		return err
	}
	certs, err := certutil.CertsFromFile(ca.cert)
	if err != nil {
		return err
	}
	keyData, err := os.ReadFile(ca.key)
	if err != nil {
		return err
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyData)
	if err != nil {
		return fmt.Errorf("%s: %w", ca.key, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return fmt.Errorf("%s: not a signing key", ca.key)
	}
	pki := &apitls.PKI{ClientCA: certs[0], ClientCAKey: signer}
	certPEM, keyPEM, err := pki.MintClientCert(btypes.MastersControllerUser, []string{"system:masters"}, life)
	if err != nil {
		return err
	}
	return nodekeys.WriteKubeconfig(path, btypes.MastersControllerUser, server, caData, certPEM, keyPEM)
}
