package signer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/credmirror"
)

// EtcdCASecretName is the credential Secret of the etcd CA, which the
// leader keeps in line with the CA it signs with, so that every master's
// credential mirror (package credmirror) puts the CA on its disk: a node
// labelled a master can then sign etcd member certificates when it leads,
// as a first-boot master can. No pod mounts it (docs/security.md).
const EtcdCASecretName = "bootlet-etcd-ca"

// The Secret's keys, and its files' names under its directory.
const (
	EtcdCACertKey = "ca.crt"
	EtcdCAKeyKey  = "ca.key"
)

// anchorSecret is the credential Secret whose directory's parent is where
// every master mirrors credentials: render's, for the apiserver.
const anchorSecret = "kube-apiserver"

// EtcdCASecret is the Secret that mirrors the etcd CA (cert and key) into
// dir/EtcdCASecretName on every master.
func EtcdCASecret(credentialsDir string, cert, key []byte) (*v1.Secret, error) {
	s := &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: EtcdCASecretName, Namespace: metav1.NamespaceSystem},
		Type:       v1.SecretTypeOpaque,
		Data:       map[string][]byte{EtcdCACertKey: cert, EtcdCAKeyKey: key},
	}
	err := credmirror.Annotate(s, credmirror.Target{Dir: filepath.Join(credentialsDir, EtcdCASecretName),
		Items: []v1.KeyToPath{{Key: EtcdCACertKey, Path: EtcdCACertKey}, {Key: EtcdCAKeyKey, Path: EtcdCAKeyKey}}})
	return s, err
}

// sameSecret: have already holds want's data, labels and annotations.
func sameSecret(have, want *v1.Secret) bool {
	if len(have.Data) != len(want.Data) {
		return false
	}
	for k, v := range want.Data {
		if !bytes.Equal(have.Data[k], v) {
			return false
		}
	}
	for k, v := range want.Labels {
		if got, ok := have.Labels[k]; !ok || got != v {
			return false
		}
	}
	for k, v := range want.Annotations {
		if have.Annotations[k] != v {
			return false
		}
	}
	return true
}

// publishEtcdCA creates or updates EtcdCASecretName from the CA files this
// leader signs with. It reports whether it wrote.
func (s *Signer) publishEtcdCA(ctx context.Context, cs kubernetes.Interface) (bool, error) {
	certFile, keyFile, err := s.cfg.EtcdCA()
	if err != nil {
		return false, err
	}
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return false, err
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return false, err
	}
	secrets := cs.CoreV1().Secrets(metav1.NamespaceSystem)
	anchor, err := secrets.Get(ctx, anchorSecret, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading %s's credential Secret for the mirror's directory: %w", anchorSecret, err)
	}
	target, ok, err := credmirror.TargetOf(anchor)
	if err != nil || !ok {
		return false, fmt.Errorf("%s's Secret names no mirror directory (%v)", anchorSecret, err)
	}
	want, err := EtcdCASecret(filepath.Dir(target.Dir), cert, key)
	if err != nil {
		return false, err
	}
	have, err := secrets.Get(ctx, EtcdCASecretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = secrets.Create(ctx, want, metav1.CreateOptions{})
		return err == nil, err
	case err != nil:
		return false, err
	case sameSecret(have, want):
		return false, nil
	}
	have = have.DeepCopy()
	have.Data = want.Data
	if have.Labels == nil {
		have.Labels = map[string]string{}
	}
	if have.Annotations == nil {
		have.Annotations = map[string]string{}
	}
	for k, v := range want.Labels {
		have.Labels[k] = v
	}
	for k, v := range want.Annotations {
		have.Annotations[k] = v
	}
	_, err = secrets.Update(ctx, have, metav1.UpdateOptions{})
	return err == nil, err
}
