package etcdsnapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// Client is how to reach one member as a client. A snapshot is that one
// member's state, so there is one endpoint, not a list.
type Client struct {
	// Endpoint is an http:// or https:// client URL.
	Endpoint string
	// CAFile verifies the member's serving certificate; CertFile and
	// KeyFile are the client's pair. All three are required for https.
	CAFile, CertFile, KeyFile string
	// DialTimeout bounds the wait for a member that does not answer
	// (connect, TLS handshake, the first Status call); the snapshot
	// stream itself is bounded only by the caller's context, since a large
	// database takes as long as it takes.
	DialTimeout time.Duration
}

// DefaultDialTimeout is Client.DialTimeout when it is zero.
const DefaultDialTimeout = 5 * time.Second

// Validate checks c without touching the network or the files.
func (c Client) Validate() error {
	if c.Endpoint == "" {
		return errors.New("an etcd endpoint is required")
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("etcd endpoint %q: want an http:// or https:// URL with a host, like https://127.0.0.1:2379", c.Endpoint)
	}
	if u.Scheme == "https" {
		for _, f := range []struct{ what, path string }{{"CA certificate", c.CAFile}, {"client certificate", c.CertFile}, {"client key", c.KeyFile}} {
			if f.path == "" {
				return fmt.Errorf("etcd endpoint %s is https: a %s file is required", c.Endpoint, f.what)
			}
		}
	}
	return nil
}

// Result is what Save wrote: the file, where from, and etcdutl's status of
// it (hash, revision, keys, size, storage version).
type Result struct {
	Path, Endpoint string
	// ServerVersion is the etcd version of the member that was read.
	ServerVersion string
	snapshot.Status
}

// Save writes a snapshot of the member at c to path. The data goes to a new
// file beside it first (createPart); only a file that is complete (etcd's
// sha256 trailer matches), on disk (fsynced) and a sound bbolt database
// (etcdutl's status reads every key) is renamed to path, so path never
// holds half a snapshot, and an existing path is replaced only by a good
// one. rename(2) replaces whatever path is, a symlink included, and never
// writes through it.
func Save(ctx context.Context, c Client, path string) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	if path == "" {
		return Result{}, errors.New("a snapshot file name is required")
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return Result{}, fmt.Errorf("snapshot %s: its directory %s does not exist", path, filepath.Dir(path))
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	cli, err := c.Dial(ctx)
	if err != nil {
		return Result{}, err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, c.DialTimeout)
	status, err := cli.Status(sctx, c.Endpoint)
	cancel()
	if err != nil {
		return Result{}, fmt.Errorf("etcd at %s did not answer: %w", c.Endpoint, err)
	}

	f, err := createPart(path)
	if err != nil {
		return Result{}, err
	}
	part := f.Name()
	res, err := savePart(ctx, cli, f)
	if err != nil {
		os.Remove(part)
		return Result{}, fmt.Errorf("snapshot of %s: %w", c.Endpoint, err)
	}
	if err := os.Rename(part, path); err != nil {
		os.Remove(part)
		return Result{}, err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return Result{}, err
	}
	res.Path, res.Endpoint, res.ServerVersion = path, c.Endpoint, status.Version
	return res, nil
}

func (c Client) tlsConfig() (*tls.Config, error) {
	if u, _ := url.Parse(c.Endpoint); u.Scheme != "https" {
		return nil, nil
	}
	for _, f := range []string{c.CAFile, c.CertFile, c.KeyFile} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("etcd client TLS: %w", err)
		}
	}
	cfg, err := transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.CAFile}.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd client TLS (%s, %s, CA %s): %w", c.CertFile, c.KeyFile, c.CAFile, err)
	}
	return cfg, nil
}

// Dial is a client of c's member, once a connection and, for https, a TLS
// handshake have succeeded (preflight), so that a refused connection or a
// rejected certificate is the error, not a gRPC timeout.
func (c Client) Dial(ctx context.Context) (*clientv3.Client, error) {
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	tlsConfig, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	if err := preflight(ctx, c, tlsConfig); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{c.Endpoint},
		DialTimeout: c.DialTimeout,
		TLS:         tlsConfig,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", c.Endpoint, err)
	}
	return cli, nil
}

// preflight connects and, for https, completes a TLS handshake itself:
// gRPC would report a refused connection or a rejected certificate only as
// a deadline exceeded after DialTimeout, while these errors name the cause.
func preflight(ctx context.Context, c Client, tlsConfig *tls.Config) error {
	u, _ := url.Parse(c.Endpoint)
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	dctx, cancel := context.WithTimeout(ctx, c.DialTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("cannot reach etcd at %s: %w", c.Endpoint, err)
	}
	defer conn.Close()
	if tlsConfig == nil {
		return nil
	}
	cfg := tlsConfig.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	tconn := tls.Client(conn, cfg)
	if err := tconn.HandshakeContext(dctx); err != nil {
		return fmt.Errorf("TLS handshake with etcd at %s failed (CA %s, client certificate %s): %w", c.Endpoint, c.CAFile, c.CertFile, err)
	}
	return nil
}

// createPart creates the file a snapshot for path is written to: a new
// one, FILE.part-RANDOM beside FILE, made with O_EXCL (os.CreateTemp), so
// it is this process's own (root's, mode 0600: it holds every Secret).
// A fixed FILE.part could be one another user planted, or a symlink to
// elsewhere; that name is not used at all, and whatever holds it is left
// as it is. O_EXCL never follows a symlink, dangling or not.
func createPart(path string) (*os.File, error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".part-*")
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: creating its temporary file: %w", path, err)
	}
	// CreateTemp's 0600 is less the umask; say it outright.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// savePart streams the snapshot into f (createPart's), closes it, and
// checks it.
func savePart(ctx context.Context, cli *clientv3.Client, f *os.File) (Result, error) {
	defer f.Close()
	part := f.Name()
	resp, err := cli.SnapshotWithVersion(ctx)
	if err != nil {
		return Result{}, err
	}
	defer resp.Snapshot.Close()
	if _, err := io.Copy(f, resp.Snapshot); err != nil {
		return Result{}, fmt.Errorf("writing %s: %w", part, err)
	}
	if err := f.Sync(); err != nil {
		return Result{}, err
	}
	if err := f.Close(); err != nil {
		return Result{}, err
	}
	if err := VerifyChecksum(part); err != nil {
		return Result{}, err
	}
	st, err := Status(part)
	if err != nil {
		return Result{}, err
	}
	return Result{Status: st}, nil
}

// VerifyChecksum checks the sha256 etcd appends to a snapshot it sends:
// the database, then the digest of the database. A snapshot cut short or
// damaged on the way fails it; etcdutl's restore checks the same trailer.
func VerifyChecksum(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	n := fi.Size()
	// etcd pads the database to a multiple of 512 bytes before the digest.
	if n < sha256.Size || n%512 != sha256.Size {
		return fmt.Errorf("%s (%d bytes) does not end with etcd's sha256 digest: not a complete snapshot", path, n)
	}
	h := sha256.New()
	if _, err := io.CopyN(h, f, n-sha256.Size); err != nil {
		return err
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, want); err != nil {
		return err
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return fmt.Errorf("%s: sha256 mismatch: the snapshot is damaged", path)
	}
	return nil
}

// Status is etcdutl's `snapshot status` of a snapshot file: it checks the
// bbolt database and counts the keys.
func Status(path string) (snapshot.Status, error) {
	if _, err := os.Stat(path); err != nil {
		return snapshot.Status{}, err
	}
	st, err := snapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return snapshot.Status{}, fmt.Errorf("%s is not a readable etcd snapshot: %w", path, err)
	}
	return st, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
