package runner

import (
	// Register the core group into legacyscheme with its defaulters, as the
	// kubelet's config sources do.
	_ "k8s.io/kubernetes/pkg/apis/core/install"
)
