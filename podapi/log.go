package podapi

import (
	"net/http"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

// serveStatus is GET pods/NAME/status (status is written by the runtime
// only, as the kubelet is the only status writer of a static pod).
func (s *Server) serveStatus(_ http.ResponseWriter, req *http.Request, rt route) (runtime.Object, int, error) {
	if req.Method != http.MethodGet {
		return nil, 0, methodNotAllowed(req)
	}
	return s.serveGet(rt, s.Registry.pods)
}

// serveLog is GET pods/NAME/log: the container log, streamed.
func (s *Server) serveLog(w http.ResponseWriter, req *http.Request, rt route) (runtime.Object, int, error) {
	if req.Method != http.MethodGet {
		return nil, 0, methodNotAllowed(req)
	}
	opts, err := podLogOptions(req)
	if err != nil {
		return nil, 0, err
	}
	reg := s.Registry
	if _, err := reg.GetPod(rt.namespace, rt.name); err != nil {
		return nil, 0, err
	}
	w.Header().Set("Content-Type", "text/plain")
	fw := &flushWriter{w: w}
	if err := reg.PodLogs(req.Context(), rt.namespace, rt.name, opts, fw); err != nil {
		if !fw.wrote {
			return nil, 0, err
		}
		klog.V(2).InfoS("Log stream ended", "pod", rt.namespace+"/"+rt.name, "err", err)
	}
	return nil, 0, nil
}

func podLogOptions(req *http.Request) (*v1.PodLogOptions, error) {
	opts := &v1.PodLogOptions{}
	// client-go's scheme has no url.Values conversions for core/v1 query
	// options; legacyscheme carries the generated ones, as the apiserver's.
	if err := legacyscheme.ParameterCodec.DecodeParameters(req.URL.Query(), v1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return opts, nil
}

type flushWriter struct {
	w     http.ResponseWriter
	wrote bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	if !f.wrote {
		f.wrote = true
		f.w.WriteHeader(http.StatusOK)
	}
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}
