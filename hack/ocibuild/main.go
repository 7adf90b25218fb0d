// Command ocibuild packs a root filesystem directory into a single-layer,
// single-platform (linux/amd64) OCI image layout tarball, without docker.
//
// The resulting archive (oci-layout, index.json, blobs/sha256/...) can be
// imported with `ctr -n k8s.io images import` or containerd's client.Import:
// the index entry carries both io.containerd.image.name (full reference) and
// org.opencontainers.image.ref.name (the tag).
//
// Output is deterministic: entries are sorted, owned by root, and all
// timestamps are the Unix epoch (or $SOURCE_DATE_EPOCH). A regular file's
// file capabilities (the security.capability xattr, e.g. set with setcap)
// are kept as a SCHILY.xattr PAX record, which containerd applies; no other
// xattr is.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type imageConfig struct {
	User         string              `json:"User,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type history struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

type image struct {
	Created      string      `json:"created"`
	Architecture string      `json:"architecture"`
	OS           string      `json:"os"`
	Config       imageConfig `json:"config"`
	RootFS       rootFS      `json:"rootfs"`
	History      []history   `json:"history"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var (
		rootfs     = flag.String("rootfs", "", "root filesystem directory to pack as the single layer (required)")
		name       = flag.String("name", "", "full image reference, e.g. registry.k8s.io/pause:3.10.1 (required)")
		out        = flag.String("o", "", "output OCI layout tarball (required)")
		entrypoint = flag.String("entrypoint", "", "entrypoint as a JSON array, e.g. '[\"/pause\"]'")
		cmd        = flag.String("cmd", "", "cmd as a JSON array, e.g. '[\"sh\"]'")
		workdir    = flag.String("workdir", "/", "working directory")
		user       = flag.String("user", "", "user")
		gzipLevel  = flag.Int("gzip-level", gzip.BestCompression, "gzip level of the layer, 1 (fastest) to 9 (smallest)")
		envs       multiFlag
		ports      multiFlag
		labels     multiFlag
	)
	flag.Var(&envs, "env", "environment variable KEY=VALUE (repeatable)")
	flag.Var(&ports, "expose", "exposed port, e.g. 8080/tcp (repeatable)")
	flag.Var(&labels, "label", "label KEY=VALUE (repeatable)")
	flag.Parse()
	if *rootfs == "" || *name == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}

	cfg := imageConfig{Env: envs, WorkingDir: *workdir, User: *user}
	must(parseJSONArray(*entrypoint, &cfg.Entrypoint))
	must(parseJSONArray(*cmd, &cfg.Cmd))
	if len(ports) > 0 {
		cfg.ExposedPorts = map[string]struct{}{}
		for _, p := range ports {
			cfg.ExposedPorts[p] = struct{}{}
		}
	}
	if len(labels) > 0 {
		cfg.Labels = map[string]string{}
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			cfg.Labels[k] = v
		}
	}
	if *gzipLevel < gzip.BestSpeed || *gzipLevel > gzip.BestCompression {
		must(fmt.Errorf("-gzip-level %d: want %d..%d", *gzipLevel, gzip.BestSpeed, gzip.BestCompression))
	}
	must(build(*rootfs, *name, *out, cfg, *gzipLevel))
}

func parseJSONArray(s string, dst *[]string) error {
	if s == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(s), dst); err != nil {
		return fmt.Errorf("parse %q as JSON array: %w", s, err)
	}
	return nil
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "ocibuild:", err)
		os.Exit(1)
	}
}

func epoch() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// splitRef splits "registry/repo:tag" into the tag; defaults to "latest".
func tagOf(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	slash := strings.LastIndex(ref, "/")
	if colon := strings.LastIndex(ref, ":"); colon > slash {
		return ref[colon+1:]
	}
	return "latest"
}

// layerTar writes rootfs as an uncompressed tar stream.
func layerTar(rootfs string, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var paths []string
	err := filepath.WalkDir(rootfs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != rootfs {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	for _, p := range paths {
		rel, err := filepath.Rel(rootfs, p)
		if err != nil {
			return nil, err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return nil, err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return nil, err
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "root", "root"
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = mtime, time.Time{}, time.Time{}
		hdr.Format = tar.FormatPAX
		hdr.PAXRecords = nil
		if fi.Mode().IsRegular() {
			fcap, err := fileCaps(p)
			if err != nil {
				return nil, err
			}
			if fcap != "" {
				hdr.PAXRecords = map[string]string{"SCHILY.xattr." + xattrCaps: fcap}
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

const xattrCaps = "security.capability"

// fileCaps returns the raw security.capability xattr of path, "" when it
// has none: upstream images such as coredns's ship a binary with file
// capabilities (cap_net_bind_service) so that it runs as a non-root user.
func fileCaps(path string) (string, error) {
	buf := make([]byte, 64)
	for {
		n, err := syscall.Getxattr(path, xattrCaps, buf)
		switch {
		case err == syscall.ENODATA || err == syscall.ENOTSUP:
			return "", nil
		case err == syscall.ERANGE:
			buf = make([]byte, 2*len(buf))
			continue
		case err != nil:
			return "", fmt.Errorf("getxattr %s %s: %w", path, xattrCaps, err)
		}
		return string(buf[:n]), nil
	}
}

func build(rootfs, name, out string, cfg imageConfig, gzipLevel int) error {
	mtime := epoch()
	raw, err := layerTar(rootfs, mtime)
	if err != nil {
		return err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzipLevel)
	if err != nil {
		return err
	}
	zw.ModTime = time.Unix(0, 0)
	if _, err := zw.Write(raw); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	layer := gz.Bytes()

	created := mtime.Format(time.RFC3339)
	img := image{
		Created:      created,
		Architecture: "amd64",
		OS:           "linux",
		Config:       cfg,
		RootFS:       rootFS{Type: "layers", DiffIDs: []string{digestOf(raw)}},
		History:      []history{{Created: created, CreatedBy: "hack/ocibuild"}},
	}
	cfgJSON, err := json.Marshal(img)
	if err != nil {
		return err
	}
	man := manifest{
		SchemaVersion: 2,
		MediaType:     mediaTypeManifest,
		Config:        descriptor{MediaType: mediaTypeConfig, Digest: digestOf(cfgJSON), Size: int64(len(cfgJSON))},
		Layers:        []descriptor{{MediaType: mediaTypeLayerGz, Digest: digestOf(layer), Size: int64(len(layer))}},
	}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return err
	}
	idx := index{
		SchemaVersion: 2,
		MediaType:     mediaTypeIndex,
		Manifests: []descriptor{{
			MediaType: mediaTypeManifest,
			Digest:    digestOf(manJSON),
			Size:      int64(len(manJSON)),
			Platform:  &platform{Architecture: "amd64", OS: "linux"},
			Annotations: map[string]string{
				"io.containerd.image.name":          name,
				"org.opencontainers.image.ref.name": tagOf(name),
			},
		}},
	}
	idxJSON, err := json.Marshal(idx)
	if err != nil {
		return err
	}

	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	dir := func(n string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: n, Mode: 0o755, ModTime: mtime})
	}
	file := func(n string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(b)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	blob := func(b []byte) error {
		return file("blobs/sha256/"+strings.TrimPrefix(digestOf(b), "sha256:"), b)
	}
	for _, step := range []func() error{
		func() error { return file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)) },
		func() error { return file("index.json", idxJSON) },
		func() error { return dir("blobs/") },
		func() error { return dir("blobs/sha256/") },
		func() error { return blob(layer) },
		func() error { return blob(cfgJSON) },
		func() error { return blob(manJSON) },
	} {
		if err := step(); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	fmt.Printf("%s -> %s (manifest %s, layer %d bytes)\n", name, out, digestOf(manJSON), len(layer))
	return nil
}
