package podapi

import (
	"mime"
	"net/http"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Aggregated discovery (apidiscovery.k8s.io/v2): /api and /apis answer
// with every group, version and resource in one document when the client
// asks for it, as the apiserver has since 1.30. kubectl then skips its
// per-group-version round trips (/api/v1, and the fallbacks).

// AggregatedContentType is the media type of an aggregated discovery
// document.
const AggregatedContentType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// acceptsAggregated reports whether the Accept header asks for the v2
// aggregated document (it lists it before plain JSON when it does).
func acceptsAggregated(req *http.Request) bool {
	for _, part := range strings.Split(req.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || mt != "application/json" {
			continue
		}
		return params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList"
	}
	return false
}

func writeAggregated(w http.ResponseWriter, groups []apidiscoveryv2.APIGroupDiscovery) {
	if groups == nil {
		groups = []apidiscoveryv2.APIGroupDiscovery{}
	}
	w.Header().Set("Vary", "Accept")
	w.Header().Set("Content-Type", AggregatedContentType)
	writeJSONBody(w, http.StatusOK, &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"},
		Items:    groups,
	})
}

// legacyDiscovery is the core group ("", version v1) built from the same
// resource list /api/v1 serves: subresources ("pods/log") go under their
// resource.
func legacyDiscovery() []apidiscoveryv2.APIGroupDiscovery {
	var resources []apidiscoveryv2.APIResourceDiscovery
	index := map[string]int{}
	for _, r := range resourceList().APIResources {
		gvk := &metav1.GroupVersionKind{Version: "v1", Kind: r.Kind}
		if parent, sub, ok := strings.Cut(r.Name, "/"); ok {
			if i, found := index[parent]; found {
				resources[i].Subresources = append(resources[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{
					Subresource: sub, ResponseKind: gvk, Verbs: r.Verbs,
				})
			}
			continue
		}
		scope := apidiscoveryv2.ScopeCluster
		if r.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		index[r.Name] = len(resources)
		resources = append(resources, apidiscoveryv2.APIResourceDiscovery{
			Resource: r.Name, ResponseKind: gvk, Scope: scope, SingularResource: r.SingularName,
			Verbs: r.Verbs, ShortNames: r.ShortNames, Categories: r.Categories,
		})
	}
	return []apidiscoveryv2.APIGroupDiscovery{{
		Versions: []apidiscoveryv2.APIVersionDiscovery{{Version: "v1", Resources: resources, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}},
	}}
}
