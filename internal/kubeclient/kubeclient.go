package kubeclient

import (
	"bytes"
	"context"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Reloading builds a client from Path once the file loads, and a new one
// when its bytes change. The file embeds a client certificate, which
// client-go reads once: without the reload a renewed certificate (`bootlet
// certs renew`) would never be used, and every request would be refused
// once the old one expired.
type Reloading struct {
	Path      string
	UserAgent string
	// Timeout of each request but a watch (default 5 s; WithRequestTimeout):
	// a controller's round must not hang on an apiserver that went away.
	Timeout time.Duration
	// Recheck: once a client is built, the file is compared again only
	// when Recheck has passed since the last comparison (0: at every
	// Load). Before the first client every Load reads it.
	Recheck time.Duration
	// Now is the clock of Recheck (default time.Now).
	Now func() time.Time

	data    []byte
	checked time.Time
}

// Load reads the file and, when its bytes differ from the last client's,
// builds a new client. changed is true when the returned client is new.
// An unreadable or unloadable file keeps the last client (nil before the
// first).
func (r *Reloading) Load() (cs kubernetes.Interface, changed bool, err error) {
	changed, err = r.LoadWith(func(cfg *rest.Config) (err error) {
		cs, err = kubernetes.NewForConfig(cfg)
		return err
	})
	if !changed {
		return nil, false, err
	}
	return cs, true, nil
}

// LoadWith is Load for callers that need the REST config itself (its TLS
// settings, a second client without a timeout): when the file's bytes
// differ from those of the last successful build, it calls build with the
// file's config (user agent and request timeout set), and the bytes count
// as loaded only when build returns nil. changed reports a successful
// build.
func (r *Reloading) LoadWith(build func(cfg *rest.Config) error) (changed bool, err error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	if r.data != nil && r.Recheck > 0 && now().Sub(r.checked) < r.Recheck {
		return false, nil
	}
	r.checked = now()
	data, err := os.ReadFile(r.Path)
	if err != nil {
		return false, err
	}
	if r.data != nil && bytes.Equal(data, r.data) {
		return false, nil
	}
	// Read first, then built from the path, so relative file names in it
	// are the file's: a change in between is found at the next Load.
	cfg, err := clientcmd.BuildConfigFromFlags("", r.Path)
	if err != nil {
		return false, err
	}
	if err := build(withDefaults(cfg, r.UserAgent, r.Timeout)); err != nil {
		return false, err
	}
	r.data = data
	return true, nil
}

// New is a clientset of cfg with bootlet's user agent and a request
// timeout (default 5 s).
func New(cfg *rest.Config, userAgent string, timeout time.Duration) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(withDefaults(cfg, userAgent, timeout))
}

// ForFile is a client of the kubeconfig file at path for a command that
// runs once: no reload. cfg is the config the client uses (user agent and
// request timeout set; default 5 s), for callers that also need its TLS
// settings.
func ForFile(path, userAgent string, timeout time.Duration) (cfg *rest.Config, cs kubernetes.Interface, err error) {
	cfg, err = clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, nil, err
	}
	return forRESTConfig(cfg, userAgent, timeout)
}

// ForConfig is ForFile for a kubeconfig already in memory (one a command
// verified, as join's discovery does), with its current context.
func ForConfig(kc clientcmdapi.Config, userAgent string, timeout time.Duration) (cfg *rest.Config, cs kubernetes.Interface, err error) {
	cfg, err = clientcmd.NewDefaultClientConfig(kc, nil).ClientConfig()
	if err != nil {
		return nil, nil, err
	}
	return forRESTConfig(cfg, userAgent, timeout)
}

func forRESTConfig(cfg *rest.Config, userAgent string, timeout time.Duration) (*rest.Config, kubernetes.Interface, error) {
	cfg = withDefaults(cfg, userAgent, timeout)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, cs, nil
}

// withDefaults is a copy of cfg with the user agent and the request
// timeout (default 5 s), which spares watches (WithRequestTimeout).
func withDefaults(cfg *rest.Config, userAgent string, timeout time.Duration) *rest.Config {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	cfg = WithRequestTimeout(cfg, timeout)
	cfg.UserAgent = userAgent
	return cfg
}

// RunWithClient calls run with a client of r's file until ctx ends: with
// the first client once the file loads (checked every recheck), and again
// with a new client whenever the file's bytes change, after cancelling the
// previous run's context and waiting for it to return.
func RunWithClient(ctx context.Context, r *Reloading, recheck time.Duration, onErr func(error), run func(ctx context.Context, cs kubernetes.Interface)) {
	runLoaded(ctx, r, recheck, onErr, func(ctx context.Context, _ *rest.Config, cs kubernetes.Interface) { run(ctx, cs) })
}

// RunWithConfig is Run for a controller that needs more than a clientset
// (a dynamic client): run gets the REST config the clientset was built
// from, anew whenever the file's bytes change.
func RunWithConfig(ctx context.Context, path, userAgent string, logf func(error), run func(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface)) {
	runLoaded(ctx, &Reloading{Path: path, UserAgent: userAgent}, 10*time.Second, logf, run)
}

// runLoaded is RunWithClient's loop, with the config too.
func runLoaded(ctx context.Context, r *Reloading, recheck time.Duration, onErr func(error), run func(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface)) {
	stop := func() {}
	defer func() { stop() }()
	tick := time.NewTicker(recheck)
	defer tick.Stop()
	started := false
	for {
		var cfg *rest.Config
		var cs kubernetes.Interface
		changed, err := r.LoadWith(func(c *rest.Config) (err error) {
			cfg = c
			cs, err = kubernetes.NewForConfig(c)
			return err
		})
		switch {
		case err != nil && !started:
			onErr(err)
		case changed:
			stop()
			stop = start(ctx, cfg, cs, run)
			started = true
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// start runs run in a goroutine and returns what cancels it and waits for
// it to return.
func start(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, run func(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface)) func() {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); run(runCtx, cfg, cs) }()
	return func() { cancel(); <-done }
}

// Run calls run with client when it is set (tests), else with a client of
// the kubeconfig file at path, reloaded as RunWithClient does; logf tells
// why the file does not load yet.
func Run(ctx context.Context, client kubernetes.Interface, path, userAgent string, logf func(error), run func(ctx context.Context, cs kubernetes.Interface)) {
	if client != nil {
		run(ctx, client)
		return
	}
	RunWithClient(ctx, &Reloading{Path: path, UserAgent: userAgent}, 10*time.Second, logf, run)
}

// Wake is a one-slot signal for an informer's event handlers: Poke never
// blocks, and the pokes that arrive while a round runs make one round.
type Wake chan struct{}

// NewWake is an empty Wake.
func NewWake() Wake { return make(Wake, 1) }

// Poke signals a round; its argument lets it serve as a handler func.
func (w Wake) Poke(any) {
	select {
	case w <- struct{}{}:
	default:
	}
}

// Rounds calls round at once, then after every poke and every resync,
// until ctx ends.
func Rounds(ctx context.Context, w Wake, resync time.Duration, round func()) {
	tick := time.NewTicker(resync)
	defer tick.Stop()
	for {
		round()
		select {
		case <-ctx.Done():
			return
		case <-w:
		case <-tick.C:
		}
	}
}
