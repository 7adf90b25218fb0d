package manifests

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

// Render writes every asset for cfg under assetDir (see the package doc for
// the layout). It is idempotent: existing keys are kept, existing
// certificates are kept while they match, and files whose bytes would not
// change are not rewritten. Given the same keys, certificates and bootstrap
// token (self-hosted/join.yaml), the output is byte-for-byte the same.
//
// With cfg.Masters, it writes one such asset dir per master,
// assetDir/NAME (MasterDir), sharing what the masters share
// (renderMasters).
//
// A bad Config is an Invalid error (a metav1.Status with one cause per bad
// flag) and writes nothing.
func Render(cfg Config, assetDir string) error {
	return render(cfg, assetDir, time.Now(), func(format string, args ...any) { klog.V(1).Infof(format, args...) })
}

func render(cfg Config, assetDir string, now time.Time, logf func(string, ...any)) error {
	if errs := cfg.Validate(); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: "bootlet.dev", Kind: "RenderConfig"}, "render", errs)
	}
	if assetDir == "" {
		return fmt.Errorf("an asset directory is required")
	}
	dir, err := filepath.Abs(assetDir)
	if err != nil {
		return err
	}
	if len(cfg.Masters) > 0 {
		return renderMasters(cfg, dir, now, logf)
	}
	return renderNode(cfg, dir, dir, now, logf)
}

// renderNode writes one node's asset dir: the whole of Render for one
// node, and each master's dir for several. nodeDir is where the node will
// find dir (the same for one node rendered in place; MasterAssetDir for a
// master): the paths the files themselves name are under it.
func renderNode(cfg Config, dir, nodeDir string, now time.Time, logf func(string, ...any)) error {
	specs, err := certSpecs(cfg)
	if err != nil {
		return err
	}
	pki, err := loadOrCreatePKI(filepath.Join(dir, PKIDir), specs, now, logf)
	if err != nil {
		return err
	}
	if err := writeCASigning(filepath.Join(dir, PKIDir), pki); err != nil {
		return err
	}
	if err := writeKubeconfigs(cfg, dir, pki); err != nil {
		return err
	}
	joinObjs, err := writeJoinAssets(cfg, dir, pki, now, logf)
	if err != nil {
		return err
	}
	// Before selfHostedFiles: the apiserver's Secret carries it.
	if err := writeAdmissionConfig(dir); err != nil {
		return err
	}
	kopts, err := kubeletOptions(cfg, nodeDir)
	if err != nil {
		return err
	}
	kubelet, err := KubeletConfiguration(kopts)
	if err != nil {
		return err
	}
	data, err := MarshalKubeletConfiguration(kubelet)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, KubeletConfigFile), data, 0o644); err != nil {
		return err
	}

	pods, err := bootstrapPods(cfg, nodeDir)
	if err != nil {
		return err
	}
	for _, pod := range pods {
		data, err := marshalPod(pod)
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, BootstrapManifestsDir, pod.Name+".yaml"), data, 0o600); err != nil {
			return err
		}
	}

	files, err := selfHostedFiles(cfg, dir, nodeDir)
	if err != nil {
		return err
	}
	files[JoinFile] = joinObjs
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		data, err := marshalObjects(files[name])
		if err != nil {
			return err
		}
		// 0600: the Secrets in them hold private keys.
		if err := writeFile(filepath.Join(dir, SelfHostedDir, name), data, 0o600); err != nil {
			return err
		}
	}
	logf("[render] assets for node %s written to %s", cfg.NodeName, dir)
	return nil
}
