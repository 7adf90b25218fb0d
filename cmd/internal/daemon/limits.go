package daemon

import (
	"github.com/spf13/pflag"

	"github.com/bootlet/bootlet/podapi"
)

// limitOptions are the API's limits (podapi.Limits, podapi.PodPolicy).
type limitOptions struct {
	api     podapi.Limits
	maxPods int
}

func addLimitFlags(f *pflag.FlagSet, o *limitOptions) {
	d := podapi.DefaultLimits
	f.IntVar(&o.api.MaxRequestsInFlight, "max-requests-inflight", d.MaxRequestsInFlight, "requests (other than watches and streams) served at once, in total; over it: 429 with Retry-After; 0: no limit")
	f.IntVar(&o.api.MaxRequestsInFlightPerUser, "max-requests-inflight-per-user", d.MaxRequestsInFlightPerUser, "requests (other than watches and streams) served at once for one user; 0: no limit")
	f.IntVar(&o.api.MaxWatches, "max-watches", d.MaxWatches, "open watches, in total; 0: no limit")
	f.IntVar(&o.api.MaxWatchesPerUser, "max-watches-per-user", d.MaxWatchesPerUser, "open watches of one user; 0: no limit")
	f.IntVar(&o.api.MaxStreams, "max-streams", d.MaxStreams, "open long-running streams (followed logs, exec, attach, port-forward), in total; 0: no limit")
	f.IntVar(&o.api.MaxStreamsPerUser, "max-streams-per-user", d.MaxStreamsPerUser, "open long-running streams of one user; 0: no limit")
	f.DurationVar(&o.api.RequestTimeout, "request-timeout", d.RequestTimeout, "how long a request other than a watch or stream may take (its read and write deadlines); 0: none")
	f.IntVar(&o.maxPods, "max-pods", podapi.DefaultMaxPods, "pods the API holds at most, as the kubelet's maxPods; a create past it gets 403; 0: no limit")
}
