package cli

import (
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/podapi"
)

// ErrorMessage shows the server's Status message, not a Go error chain.
func ErrorMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		// An Invalid status's message already names every cause.
		return st.Status().Message
	}
	return err.Error()
}

func Client(server *string) (*kubernetes.Clientset, error) {
	return newClient(podapi.ServerFromEnv(*server))
}

// NamespacedClient is client, with an empty --namespace made "default".
func NamespacedClient(server *string, namespace *string) (*kubernetes.Clientset, error) {
	if *namespace == "" {
		*namespace = metav1.NamespaceDefault
	}
	return Client(server)
}

type GetOptions struct {
	Namespace     string
	AllNamespaces bool
	Output        string
	Selector      string
}

func (o *GetOptions) NS() string {
	if o.AllNamespaces {
		return ""
	}
	if o.Namespace == "" {
		return metav1.NamespaceDefault
	}
	return o.Namespace
}

func NormalizeResource(r string) string {
	switch strings.ToLower(r) {
	case "po", "pod", "pods":
		return "pods"
	case "secret", "secrets":
		return "secrets"
	case "cm", "configmap", "configmaps":
		return "configmaps"
	case "ev", "event", "events":
		return "events"
	case "ns", "namespace", "namespaces":
		return "namespaces"
	case "no", "node", "nodes":
		return "nodes"
	}
	return r
}

// DefaultAssetDir is kubeadm's /etc/kubernetes, the layout render writes.
const DefaultAssetDir = "/etc/kubernetes"
