package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Several masters bootstrap together from one render (docs/cluster.md,
// "Three masters"): each gets an asset dir of its own, laid out as a
// single node's, which is copied to its /etc/kubernetes. What the masters
// share is the same bytes in every dir; what is a node's own is issued for
// it.

// perNodePairs are the key pairs under pki/ that are a master's own: its
// etcd member's serving and peer certificates (its name and address) and
// its kubelet's client certificate (system:node:NAME). Every other pair,
// the CAs and sa.key are the cluster's, and so is the apiserver's serving
// certificate: its SANs name every master (apiserverAltNames), and the
// self-hosted apiserver runs on every master from one Secret anyway.
// TestPerNodePairsAreTheNodeDependentOnes keeps this list equal to the
// specs that differ between two masters.
var perNodePairs = []string{EtcdServer, EtcdPeer, KubeletClient}

// MasterDir is master name's asset dir under a render's --asset-dir.
func MasterDir(assetDir, name string) string {
	return filepath.Join(assetDir, name)
}

// sharedFiles are the files, relative to a master's asset dir, that every
// master has byte for byte the same and that a render cannot derive from
// the others: the shared keys and their certificates, sa.key and sa.pub,
// and join.yaml, the record of the bootstrap token. Everything else a
// master's render derives from these and its own Config (kubeconfigs,
// ca-signing.crt, bootstrap-kubelet.conf, authentication-config.yaml,
// self-hosted/), so it comes out the same where it does not name the
// node. keys are the private keys among them, which a render never
// overwrites.
func sharedFiles(cfg Config) (files, keys []string, err error) {
	specs, err := certSpecs(cfg)
	if err != nil {
		return nil, nil, err
	}
	for _, spec := range specs {
		if slices.Contains(perNodePairs, spec.Base) {
			continue
		}
		key := filepath.Join(PKIDir, spec.Base+".key")
		files = append(files, filepath.Join(PKIDir, spec.Base+".crt"), key)
		keys = append(keys, key)
	}
	saKey := filepath.Join(PKIDir, ServiceAccountKey+".key")
	files = append(files, saKey, filepath.Join(PKIDir, ServiceAccountKey+".pub"), filepath.Join(SelfHostedDir, JoinFile))
	keys = append(keys, saKey)
	return files, keys, nil
}

// renderMasters renders every master's dir. One master's dir is the
// source: the first, in --master order, that already has a cluster CA key
// (so a re-render keeps the cluster's keys even if another master's dir
// was lost), else the first master's. It is rendered first, exactly as a
// single node's (keys kept, certificates re-issued only when they no
// longer match, the token kept); then each other master's dir is seeded
// with the source's shared files and rendered, so it keeps them, and
// issues or keeps only its own pairs. Private keys are never overwritten:
// if two masters' dirs hold different copies of a shared key, nothing is
// written and the error says which.
func renderMasters(cfg Config, assetDir string, now time.Time, logf func(string, ...any)) error {
	files, keys, err := sharedFiles(cfg.ForMaster(0))
	if err != nil {
		return err
	}
	dirs := make([]string, len(cfg.Masters))
	src := -1
	for i, m := range cfg.Masters {
		dirs[i] = MasterDir(assetDir, m.Name)
		if _, err := os.Stat(filepath.Join(dirs[i], PKIDir, CA+".key")); err == nil && src < 0 {
			src = i
		}
	}
	if src < 0 {
		src = 0
	}
	if err := checkSharedKeys(dirs, keys); err != nil {
		return err
	}
	if err := renderNode(cfg.ForMaster(src), dirs[src], cfg.MasterAssetDir, now, logf); err != nil {
		return fmt.Errorf("master %s: %w", cfg.Masters[src].Name, err)
	}
	for i := range cfg.Masters {
		if i == src {
			continue
		}
		if err := seed(dirs[src], dirs[i], files); err != nil {
			return fmt.Errorf("master %s: %w", cfg.Masters[i].Name, err)
		}
		if err := renderNode(cfg.ForMaster(i), dirs[i], cfg.MasterAssetDir, now, logf); err != nil {
			return fmt.Errorf("master %s: %w", cfg.Masters[i].Name, err)
		}
	}
	return nil
}

// checkSharedKeys fails, naming the files, if any shared key exists in two
// of dirs with different bytes: the masters must share it, and a render
// replaces no key anyone may hold a certificate of.
func checkSharedKeys(dirs, keys []string) error {
	var errs []string
	for _, key := range keys {
		var first string
		var firstData []byte
		for _, dir := range dirs {
			path := filepath.Join(dir, key)
			data, err := os.ReadFile(path)
			if errors.Is(err, os.ErrNotExist) {
				continue
			} else if err != nil {
				return err
			}
			if first == "" {
				first, firstData = path, data
			} else if !bytes.Equal(data, firstData) {
				errs = append(errs, fmt.Sprintf("%s and %s differ", first, path))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("the masters must share their CAs and cluster keys, but %s; nothing was written (keep the cluster's copy and remove the other)", strings.Join(errs, "; "))
	}
	return nil
}

// seed gives dst the shared files of src: keys only where dst has none
// (checkSharedKeys made sure any it has are the same), the rest replaced,
// since they are derived from the keys (a certificate the source re-issued,
// a token it replaced).
func seed(src, dst string, files []string) error {
	for _, rel := range files {
		data, err := os.ReadFile(filepath.Join(src, rel))
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		// As render writes them: certificates 0644, the rest (keys,
		// sa.pub, the token) 0600.
		perm := os.FileMode(0o600)
		if strings.HasSuffix(rel, ".crt") {
			perm = 0o644
		}
		if err := writeFile(filepath.Join(dst, rel), data, perm); err != nil {
			return err
		}
	}
	return nil
}
