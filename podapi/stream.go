package podapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/proxy"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// Streaming subresources (exec, attach, portforward) through the apiserver's own proxy machinery;
// they are writes, authorized as "create" (docs/design/architecture.md, "Streaming").

// StreamRuntime resolves the runtime's streaming URLs (runner.Manager).
type StreamRuntime interface {
	GetExec(ctx context.Context, pod *v1.Pod, container string, cmd []string, stdin, stdout, stderr, tty bool) (*url.URL, error)
	GetAttach(ctx context.Context, pod *v1.Pod, container string, stdin, stdout, stderr, tty bool) (*url.URL, error)
	GetPortForward(ctx context.Context, pod *v1.Pod, ports []int32) (*url.URL, error)
}

// StreamSubresources are the pod subresources stream.go serves.
var StreamSubresources = map[string]bool{"exec": true, "attach": true, "portforward": true}

// IsStreamSubresource reports whether a pods/<sub> request is a streaming
// one; the authorizer treats these as writes whatever the method.
func IsStreamSubresource(resource, sub string) bool {
	return resource == "pods" && StreamSubresources[sub]
}

// streamOptions are what a stream request asks for, decoded from the query.
type streamOptions struct {
	container                  string
	command                    []string
	stdin, stdout, stderr, tty bool
	ports                      []int32
}

// parseStreamOptions decodes and checks a stream request's query, as the
// apiserver's connect handler (versioned options from url.Values) and the
// kubelet's remotecommand.NewOptions do. It is pure.
func parseStreamOptions(sub string, q url.Values) (streamOptions, error) {
	var (
		o   streamOptions
		obj runtime.Object
	)
	switch sub {
	case "exec":
		obj = &v1.PodExecOptions{}
	case "attach":
		obj = &v1.PodAttachOptions{}
	case "portforward":
		obj = &v1.PodPortForwardOptions{}
	default:
		return o, apierrors.NewNotFound(podsGR, sub)
	}
	// client-go's scheme has no url.Values conversions for core/v1 query
	// options; legacyscheme carries the generated ones, as the apiserver's.
	if err := legacyscheme.ParameterCodec.DecodeParameters(q, v1.SchemeGroupVersion, obj); err != nil {
		return o, apierrors.NewBadRequest(err.Error())
	}
	switch opts := obj.(type) {
	case *v1.PodExecOptions:
		o = streamOptions{container: opts.Container, command: opts.Command, stdin: opts.Stdin, stdout: opts.Stdout, stderr: opts.Stderr, tty: opts.TTY}
		if len(o.command) == 0 {
			return o, apierrors.NewBadRequest("you must specify at least one command for the container")
		}
	case *v1.PodAttachOptions:
		o = streamOptions{container: opts.Container, stdin: opts.Stdin, stdout: opts.Stdout, stderr: opts.Stderr, tty: opts.TTY}
	case *v1.PodPortForwardOptions:
		o.ports = opts.Ports
		for _, p := range o.ports {
			if p < 1 || p > 65535 {
				return o, apierrors.NewBadRequest(fmt.Sprintf("invalid port %d: must be between 1 and 65535", p))
			}
		}
		return o, nil
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr")
	}
	if o.tty && o.stderr {
		// The kubelet's remotecommand.NewOptions: a terminal merges stderr
		// into stdout.
		o.stderr = false
	}
	return o, nil
}

// streamContainer picks the container a stream request targets: the one
// named, else the pod's only container. It is the apiserver's
// validateContainer, with its messages.
func streamContainer(pod *v1.Pod, name string) (string, error) {
	if name == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		default:
			var names []string
			for _, c := range pod.Spec.InitContainers {
				names = append(names, c.Name)
			}
			for _, c := range pod.Spec.Containers {
				names = append(names, c.Name)
			}
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, names))
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return name, nil
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

// streamRuntime is the registry's runtime, when it can stream.
func (s *Server) streamRuntime() (StreamRuntime, error) {
	if rt, ok := s.Registry.runtime.(StreamRuntime); ok {
		return rt, nil
	}
	return nil, apierrors.NewServiceUnavailable("the container runtime is not connected yet")
}

// serveStream serves pods/{exec,attach,portforward}.
func (s *Server) serveStream(w http.ResponseWriter, req *http.Request, rt route) {
	if req.Method != http.MethodGet && req.Method != http.MethodPost {
		writeError(w, methodNotAllowed(req))
		return
	}
	handler, err := s.streamHandler(req, rt)
	if err != nil {
		writeError(w, err)
		return
	}
	handler.ServeHTTP(w, req)
}

// streamHandler resolves the runtime's URL and builds the apiserver's
// handler chain for it (subresources.go ExecREST/AttachREST/PortForwardREST
// Connect).
func (s *Server) streamHandler(req *http.Request, rt route) (http.Handler, error) {
	opts, err := parseStreamOptions(rt.sub, req.URL.Query())
	if err != nil {
		return nil, err
	}
	pod, err := s.Registry.GetPod(rt.namespace, rt.name)
	if err != nil {
		return nil, err
	}
	if pod.DeletionTimestamp == nil && (pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot %s a container in a completed pod; current phase is %s", rt.sub, pod.Status.Phase))
	}
	runtime, err := s.streamRuntime()
	if err != nil {
		return nil, err
	}
	ctx := req.Context()
	var location *url.URL
	if rt.sub != "portforward" {
		if opts.container, err = streamContainer(pod, opts.container); err != nil {
			return nil, err
		}
	}
	switch rt.sub {
	case "exec":
		location, err = runtime.GetExec(ctx, pod, opts.container, opts.command, opts.stdin, opts.stdout, opts.stderr, opts.tty)
	case "attach":
		location, err = runtime.GetAttach(ctx, pod, opts.container, opts.stdin, opts.stdout, opts.stderr, opts.tty)
	default:
		location, err = runtime.GetPortForward(ctx, pod, opts.ports)
	}
	if err != nil {
		return nil, err
	}
	// Upgrade required: a plain request gets an error rather than a proxied
	// GET of the runtime's URL. No transport: the stream server is plain
	// HTTP on loopback, as the kubelet dials it.
	upgrade := proxy.NewUpgradeAwareHandler(location, nil, false, true, statusResponder{})
	if rt.sub == "portforward" {
		return translator.NewTranslatingHandler(upgrade, translator.NewTunnelingHandler(upgrade), wsstream.IsWebSocketRequestWithTunnelingProtocol), nil
	}
	ws := translator.NewStreamTranslatorHandler(location, nil, 0, translator.Options{
		Stdin: opts.stdin, Stdout: opts.stdout, Stderr: opts.stderr, Tty: opts.tty,
	})
	return translator.NewTranslatingHandler(upgrade, ws, wsstream.IsWebSocketRequestWithStreamCloseProtocol), nil
}

// statusResponder answers a failed proxy attempt (before the connection is
// hijacked) with a metav1.Status, as the apiserver's responder does.
type statusResponder struct{}

func (statusResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	writeError(w, apierrors.NewServiceUnavailable("error proxying to the container runtime: "+err.Error()))
}
