package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/config"
	"github.com/bootlet/bootlet/podapi"
)

// The verbs that work on a node's files (certs, etcd snapshot save) take
// the node's paths from its running daemon: on a node started with other
// paths than the defaults (`make up`'s /var/lib/bootlet-up, say), they
// work without --asset-dir and --root-dir. The daemon serves the
// configuration it runs with on its unix socket (podapi.EffectiveConfigPath,
// the socket --server or $BOOTLET_SERVER names), rather than the CLI
// reading a configuration file: a daemon run with flags alone has none,
// and the socket is already how the CLI finds its node. A flag given on
// the command line wins; with no daemon to ask, the defaults stay.

// daemonConfigTimeout bounds the question: a daemon that does not answer
// at once leaves the defaults.
const daemonConfigTimeout = 2 * time.Second

// NodePaths are the node's paths as its daemon runs with them; "" where it
// does not say.
type NodePaths struct {
	// RootDir is the daemon's --root-dir.
	RootDir string
	// AssetDir is render's asset dir: the parent of the daemon's
	// --self-hosted-assets, as its certificate renewal takes it.
	AssetDir string
}

// DaemonNodePaths asks the daemon at server (--server, else
// $BOOTLET_SERVER, else the default socket) for its paths; ok is false
// when it cannot tell.
func DaemonNodePaths(server string) (paths NodePaths, ok bool) {
	server = podapi.ServerFromEnv(server)
	path, found := strings.CutPrefix(server, "unix://")
	if !found {
		return NodePaths{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), daemonConfigTimeout)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://bootlet"+podapi.EffectiveConfigPath, nil)
	if err != nil {
		return NodePaths{}, false
	}
	resp, err := c.Do(req)
	if err != nil {
		return NodePaths{}, false
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return NodePaths{}, false
	}
	cfg, err := config.Decode(data, "/")
	if err != nil {
		return NodePaths{}, false
	}
	paths.RootDir = cfg.RootDir
	if cfg.Pivot.SelfHostedAssets != "" {
		paths.AssetDir = filepath.Dir(filepath.Clean(cfg.Pivot.SelfHostedAssets))
	}
	return paths, true
}

// NodeDefaults sets the flags assetDir and rootDir of cmd (either may be
// nil: the verb has no such flag) from the daemon's paths, unless they
// were given.
func NodeDefaults(cmd *cobra.Command, assetDir, rootDir *string) {
	needAsset := assetDir != nil && !cmd.Flags().Changed("asset-dir")
	needRoot := rootDir != nil && !cmd.Flags().Changed("root-dir")
	if !needAsset && !needRoot {
		return
	}
	server := ""
	if f := cmd.Flag("server"); f != nil {
		server = f.Value.String()
	}
	paths, ok := DaemonNodePaths(server)
	if !ok {
		return
	}
	if needAsset && paths.AssetDir != "" {
		*assetDir = paths.AssetDir
	}
	if needRoot && paths.RootDir != "" {
		*rootDir = paths.RootDir
	}
}

// DefaultNodeName is the default of every --node-name that names this node
// in the API: the host name, lower-cased, which is the name the kubelet
// registers under without --hostname-override. The daemon and the upgrade
// agent must agree with the kubelet beside them.
func DefaultNodeName() string {
	host, _ := os.Hostname()
	return strings.ToLower(host)
}

// DirFlag is a directory and the flag that sets it.
type DirFlag struct{ Dir, Flag string }

// NameFlag adds to an error about a missing path which flag sets the
// directory it is in, the innermost of dirs that holds it.
func NameFlag(err error, dirs ...DirFlag) error {
	var pe *fs.PathError
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) {
		return err
	}
	best := DirFlag{}
	for _, d := range dirs {
		if d.Dir == "" {
			continue
		}
		if rel, rerr := filepath.Rel(filepath.Clean(d.Dir), filepath.Clean(pe.Path)); rerr == nil && rel != ".." && !strings.HasPrefix(rel, "../") && len(d.Dir) > len(best.Dir) {
			best = d
		}
	}
	if best.Flag == "" {
		return err
	}
	return fmt.Errorf("%w (set %s)", err, best.Flag)
}
