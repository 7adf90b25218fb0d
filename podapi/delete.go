package podapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// serveDelete is DELETE on an object; pods terminate gracefully first.
func (s *Server) serveDelete(req *http.Request, rt route, res resource, dryRun bool) (runtime.Object, int, error) {
	opts, err := deleteOptions(req)
	if err != nil {
		return nil, 0, err
	}
	out, err := res.deleteObject(rt.namespace, rt.name, opts, dryRun)
	return out, http.StatusOK, err
}

func deleteOptions(req *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	if req.ContentLength != 0 && req.Body != nil {
		body, err := io.ReadAll(io.LimitReader(req.Body, MaxBodyBytes))
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if len(strings.TrimSpace(string(body))) > 0 {
			if err := json.Unmarshal(body, opts); err != nil {
				return nil, apierrors.NewBadRequest("invalid DeleteOptions: " + err.Error())
			}
		}
	}
	if g := req.URL.Query().Get("gracePeriodSeconds"); g != "" {
		var n int64
		if _, err := fmt.Sscan(g, &n); err != nil {
			return nil, apierrors.NewBadRequest("invalid gracePeriodSeconds")
		}
		opts.GracePeriodSeconds = &n
	}
	return opts, nil
}
