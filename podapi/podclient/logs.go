package podclient

import (
	"context"
	"io"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Logs copies the log of a container of pod ns/name to out, following it
// while opts.Follow and the container runs.
func Logs(ctx context.Context, cs kubernetes.Interface, ns, name string, opts *v1.PodLogOptions, out io.Writer) error {
	rc, err := cs.CoreV1().Pods(ns).GetLogs(name, opts).Stream(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(out, rc)
	return err
}
