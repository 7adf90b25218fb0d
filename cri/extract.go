package cri

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/bootlet/bootlet/checkpoint"
)

// ExtractFile copies the regular file at file in the image ref, as the
// runtime at address holds it (containerd's k8s.io namespace, where
// `bootlet images import` puts it), to dest. It is how a node takes a
// binary that ships as an image (the kubelet's, bootlet.dev/kubelet:VERSION)
// without a registry: the image is imported like any other, and its
// binary read out of its layers, unpacked by no one.
//
// dest is replaced atomically (checkpoint.WriteFilesAtomic: a temporary
// file beside it, synced, then renamed), with the file's mode from the
// image, so a process started from dest sees the old binary or the new
// one, never a partial one.
func ExtractFile(ctx context.Context, address, ref, file, dest string) error {
	client, err := containerd.New(strings.TrimPrefix(address, "unix://"), containerd.WithDefaultNamespace("k8s.io"))
	if err != nil {
		return fmt.Errorf("connect containerd %s: %w", address, err)
	}
	defer client.Close()
	img, err := client.ImageService().Get(ctx, ref)
	if err != nil {
		// containerd keeps names fully qualified: "busybox:1" is stored as
		// docker.io/library/busybox:1, as a pull or an import names it.
		if named, perr := reference.ParseDockerRef(ref); perr == nil && named.String() != ref {
			img, err = client.ImageService().Get(ctx, named.String())
		}
	}
	if err != nil {
		return fmt.Errorf("image %s: %w (import it first: bootlet images import)", ref, err)
	}
	if err := extractFromImage(ctx, client.ContentStore(), img.Target, file, dest); err != nil {
		return fmt.Errorf("%s from %s: %w", file, ref, err)
	}
	return nil
}

// errNotInLayer: the layer neither holds the file nor deletes it.
var errNotInLayer = errors.New("not in this layer")

// extractFromImage reads the image's manifest for this platform and looks
// for file from the top layer down: the first layer that holds it, or
// deletes it (an OCI whiteout), decides, as an unpacked root filesystem
// would.
func extractFromImage(ctx context.Context, store content.Provider, target ocispec.Descriptor, file, dest string) error {
	manifest, err := images.Manifest(ctx, store, target, platforms.Default())
	if err != nil {
		return fmt.Errorf("reading the image's manifest: %w", err)
	}
	name := strings.TrimPrefix(path.Clean("/"+file), "/")
	for i := len(manifest.Layers) - 1; i >= 0; i-- {
		err := fromLayer(ctx, store, manifest.Layers[i], name, dest)
		if errors.Is(err, errNotInLayer) {
			continue
		}
		return err
	}
	return fmt.Errorf("no such file in the image")
}

// fromLayer copies name out of one layer to dest. A layer that does not
// hold the file may still hide it from the layers below (OCI's whiteouts):
// a whiteout of the file or of a directory above it, an opaque whiteout
// of a directory above it, or a directory above it replaced by a file.
// An entry of the file in the same layer wins over them, so the whole
// layer is read before it counts as deleting.
func fromLayer(ctx context.Context, store content.Provider, layer ocispec.Descriptor, name, dest string) error {
	ra, err := store.ReaderAt(ctx, layer)
	if err != nil {
		return fmt.Errorf("layer %s: %w", layer.Digest, err)
	}
	defer ra.Close()
	ds, err := compression.DecompressStream(content.NewReader(ra))
	if err != nil {
		return fmt.Errorf("layer %s: %w", layer.Digest, err)
	}
	defer ds.Close()
	hides := hidingEntries(name)
	hidden := false
	tr := tar.NewReader(ds)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("layer %s: %w", layer.Digest, err)
		}
		entry := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if entry == name {
			if h.Typeflag != tar.TypeReg {
				return fmt.Errorf("not a regular file in the image (tar type %q)", h.Typeflag)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return fmt.Errorf("layer %s: %w", layer.Digest, err)
			}
			return checkpoint.WriteFilesAtomic([]checkpoint.AtomicFile{{Path: dest, Data: data, Mode: os.FileMode(h.Mode).Perm()}})
		}
		if kind, ok := hides[entry]; ok && (kind != hidesUnlessDir || h.Typeflag != tar.TypeDir) {
			hidden = true
		}
	}
	if hidden {
		return fmt.Errorf("the image deletes it (layer %s)", layer.Digest)
	}
	return errNotInLayer
}

// How an entry of a layer hides a file of the layers below.
type hideKind int

const (
	hidesAlways    hideKind = iota // a whiteout, or an opaque directory
	hidesUnlessDir                 // an ancestor's path: unless it is a directory
)

// hidingEntries are the layer entries that hide name from the layers
// below: ".wh.NAME" beside the file or any directory above it, ".wh..wh..opq"
// in any directory above it, and any directory above it if that entry is
// not a directory.
func hidingEntries(name string) map[string]hideKind {
	out := map[string]hideKind{}
	for p := name; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		out[path.Join(path.Dir(p), ".wh."+path.Base(p))] = hidesAlways
		if p != name {
			out[path.Join(p, ".wh..wh..opq")] = hidesAlways
			out[p] = hidesUnlessDir
		}
	}
	return out
}
