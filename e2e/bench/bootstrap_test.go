//go:build e2e

package main

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestFloorArgv(t *testing.T) {
	hp := func(name, path string) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path}}}
	}
	pod := &v1.Pod{Spec: v1.PodSpec{
		Volumes: []v1.Volume{hp("k8s-certs", "/a/pki"), hp("etcd-certs", "/b/etcd-pki"), hp("data", "/var/lib/etcd"),
			{Name: "not-host", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		Containers: []v1.Container{{
			Command: []string{"kube-apiserver", "--client-ca-file=/etc/kubernetes/pki/ca.crt"},
			Args: []string{"--etcd-cafile=/etc/kubernetes/pki/etcd/ca.crt", "--data-dir=/var/lib/etcd",
				"--list=/etc/kubernetes/pki/x,/etc/kubernetes/pkix", "--etcd-servers=https://127.0.0.1:2379",
				"/etc/kubernetes/pki", "--scratch=/scratch/f", "-v=2"},
			VolumeMounts: []v1.VolumeMount{{Name: "k8s-certs", MountPath: "/etc/kubernetes/pki"},
				{Name: "etcd-certs", MountPath: "/etc/kubernetes/pki/etcd"}, {Name: "data", MountPath: "/var/lib/etcd"},
				{Name: "not-host", MountPath: "/scratch"}},
		}},
	}}
	want := []string{"kube-apiserver", "--client-ca-file=/a/pki/ca.crt",
		"--etcd-cafile=/b/etcd-pki/ca.crt", // the longer mount path wins
		"--data-dir=/var/lib/etcd",
		"--list=/a/pki/x,/etc/kubernetes/pkix", // a path boundary, not a string prefix
		"--etcd-servers=https://127.0.0.1:2379",
		"/a/pki",
		"--scratch=/scratch/f", // not a hostPath: left alone
		"-v=2"}
	if got := floorArgv(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("floorArgv:\n got %q\nwant %q", got, want)
	}
}
