package daemon

import (
	"github.com/spf13/pflag"

	"github.com/bootlet/bootlet/node"
	"github.com/bootlet/bootlet/podapi"
)

func addLimitFlags(f *pflag.FlagSet, o *node.LimitOptions) {
	d := podapi.DefaultLimits
	f.IntVar(&o.API.MaxRequestsInFlight, "max-requests-inflight", d.MaxRequestsInFlight, "requests (other than watches and streams) served at once, in total; over it: 429 with Retry-After; 0: no limit")
	f.IntVar(&o.API.MaxRequestsInFlightPerUser, "max-requests-inflight-per-user", d.MaxRequestsInFlightPerUser, "requests (other than watches and streams) served at once for one user; 0: no limit")
	f.IntVar(&o.API.MaxWatches, "max-watches", d.MaxWatches, "open watches, in total; 0: no limit")
	f.IntVar(&o.API.MaxWatchesPerUser, "max-watches-per-user", d.MaxWatchesPerUser, "open watches of one user; 0: no limit")
	f.IntVar(&o.API.MaxStreams, "max-streams", d.MaxStreams, "open long-running streams (followed logs, exec, attach, port-forward), in total; 0: no limit")
	f.IntVar(&o.API.MaxStreamsPerUser, "max-streams-per-user", d.MaxStreamsPerUser, "open long-running streams of one user; 0: no limit")
	f.DurationVar(&o.API.RequestTimeout, "request-timeout", d.RequestTimeout, "how long a request other than a watch or stream may take (its read and write deadlines); 0: none")
	f.IntVar(&o.MaxPods, "max-pods", podapi.DefaultMaxPods, "pods the API holds at most, as the kubelet's maxPods; a create past it gets 403; 0: no limit")
}
