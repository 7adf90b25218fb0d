package cri

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	v1 "k8s.io/api/core/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageInfo is what a container start needs to know about its image.
type ImageInfo struct {
	// Ref is the image ID the runtime resolved (what the kubelet passes as
	// ImageSpec.Image and reports as imageID).
	Ref string
	// UID and User come from the image config's USER.
	UID  *int64
	User string
}

// ErrImageNeverPull is returned for PullPolicy Never when the image is absent,
// matching the kubelet's ErrImageNeverPull reason.
var ErrImageNeverPull = fmt.Errorf("ErrImageNeverPull")

// neverPullError is ErrImageNeverPull with the kubelet's message for it
// (images.imageManager.EnsureImageExists), which the status shows.
type neverPullError struct{ image string }

func (e neverPullError) Error() string {
	return fmt.Sprintf("Container image %q is not present with pull policy of Never", e.image)
}

func (e neverPullError) Is(target error) bool { return target == ErrImageNeverPull }

// EnsureImage is the kubelet's image manager EnsureImageExists: pull
// according to policy, then resolve the image's ID and user. pulled reports
// whether a pull happened (for the Pulled/Pulling events).
func EnsureImage(ctx context.Context, is internalapi.ImageManagerService, image string, policy v1.PullPolicy, sandbox *runtimeapi.PodSandboxConfig) (info ImageInfo, pulled bool, err error) {
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image}
	status, err := is.ImageStatus(ctx, spec, false)
	if err != nil {
		return info, false, fmt.Errorf("image status %s: %w", image, err)
	}
	present := status != nil && status.Image != nil
	needPull := policy == v1.PullAlways || (!present && policy != v1.PullNever)
	if !present && policy == v1.PullNever {
		return info, false, neverPullError{image: image}
	}
	if needPull {
		if _, err := is.PullImage(ctx, spec, nil, sandbox); err != nil {
			// Also when an older copy is present (PullAlways): the kubelet
			// fails the start too, no silent fallback to the local image.
			return info, false, fmt.Errorf("ErrImagePull: %w", err)
		}
		pulled = true
		if status, err = is.ImageStatus(ctx, spec, false); err != nil {
			return info, pulled, err
		}
		if status == nil || status.Image == nil {
			return info, pulled, fmt.Errorf("image %s missing after pull", image)
		}
	}
	img := status.Image
	info.Ref = img.Id
	if img.Uid != nil {
		uid := img.Uid.Value
		info.UID = &uid
	}
	info.User = img.Username
	return info, pulled, nil
}

// ImportArchives imports OCI image layouts and docker-save archives into
// containerd's k8s.io namespace (where its CRI looks) and unpacks them for
// the default snapshotter, so the first container start does not pay for it.
// Every image the archives name is pinned (pinImage), those already there
// too.
// When it imported anything, it returns only once what it wrote is on disk
// (syncImported). address is containerd's gRPC socket path.
func ImportArchives(ctx context.Context, address string, files []string) ([]string, error) {
	client, err := containerd.New(strings.TrimPrefix(address, "unix://"), containerd.WithDefaultNamespace("k8s.io"))
	if err != nil {
		return nil, fmt.Errorf("connect containerd %s: %w", address, err)
	}
	defer client.Close()
	var names []string
	wrote := false
	for _, f := range files {
		got, imported, err := importOne(ctx, client, f)
		wrote = wrote || imported
		if err != nil {
			return names, fmt.Errorf("import %s: %w", f, err)
		}
		for _, name := range got {
			if err := pinImage(ctx, client, name); err != nil {
				return names, fmt.Errorf("import %s: %w", f, err)
			}
		}
		names = append(names, got...)
	}
	if wrote {
		if err := syncImported(ctx, client); err != nil {
			return names, fmt.Errorf("imported, but not yet on disk: %w", err)
		}
	}
	return names, nil
}

// The label containerd's CRI reads as "pinned" (internal/cri/labels in
// containerd v2: PinnedImageLabelKey and PinnedImageLabelValue), which it
// reports in the CRI's Image.pinned and which the kubelet's image GC never
// collects (image_gc_manager.go: "Image is pinned, skipping garbage
// collection"), as it never collects the sandbox image.
const (
	pinnedImageLabel = "io.cri-containerd.pinned"
	pinnedImageValue = "pinned"
)

// pinImage labels an image as pinned, unless it already is. An imported
// image cannot be pulled again on a node with no registry, so the kubelet
// must not collect it: on a disk over the image GC's threshold (85% used)
// the kubelet deletes every image no container uses within minutes, an
// upgrade's target before its step and the previous version a rollback
// needs after it. Removing a pinned image is a person's decision
// (`crictl rmi`).
func pinImage(ctx context.Context, client *containerd.Client, name string) error {
	is := client.ImageService()
	img, err := is.Get(ctx, name)
	if err != nil {
		return fmt.Errorf("pin %s: %w", name, err)
	}
	if img.Labels[pinnedImageLabel] == pinnedImageValue {
		return nil
	}
	if img.Labels == nil {
		img.Labels = map[string]string{}
	}
	img.Labels[pinnedImageLabel] = pinnedImageValue
	if _, err := is.Update(ctx, img, "labels."+pinnedImageLabel); err != nil {
		return fmt.Errorf("pin %s: %w", name, err)
	}
	return nil
}

// importOne imports one archive; imported is false when it was already
// there (alreadyImported) and nothing was written.
func importOne(ctx context.Context, client *containerd.Client, file string) (names []string, imported bool, err error) {
	if names, ok := alreadyImported(ctx, client, file); ok {
		return names, false, nil
	}
	r, err := os.Open(file)
	if err != nil {
		return nil, false, err
	}
	defer r.Close()
	imgs, err := client.Import(ctx, io.Reader(r),
		containerd.WithImportPlatform(platforms.Default()),
		containerd.WithSkipMissing(),
	)
	if err != nil {
		return nil, true, err
	}
	for _, i := range imgs {
		img := containerd.NewImageWithPlatform(client, i, platforms.Default())
		if err := img.Unpack(ctx, ""); err != nil {
			return names, true, fmt.Errorf("unpack %s: %w", i.Name, err)
		}
		names = append(names, i.Name)
	}
	return names, true, nil
}

// ImportPaths is ImportArchives (`bootlet images import`) over paths that
// may name directories: each directory stands for its archives (ArchivesIn).
// The files are imported in name order, so a run imports the same way
// whatever order the shell or the caller listed them in.
func ImportPaths(ctx context.Context, address string, paths []string) ([]string, error) {
	files, err := expandArchivePaths(paths)
	if err != nil {
		return nil, err
	}
	return ImportArchives(ctx, address, files)
}

// expandArchivePaths replaces each directory of paths by its archives and
// sorts the result. A path that cannot be stat'ed is kept as a file, for
// the import to report.
func expandArchivePaths(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			more, err := ArchivesIn(p)
			if err != nil {
				return nil, err
			}
			files = append(files, more...)
		} else {
			files = append(files, p)
		}
	}
	sort.Strings(files)
	return files, nil
}

// ArchivesIn lists the image archives (*.tar, *.tar.gz, *.oci) in dir.
func ArchivesIn(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && (strings.HasSuffix(n, ".tar") || strings.HasSuffix(n, ".tar.gz") || strings.HasSuffix(n, ".oci")) {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out, nil
}

// alreadyImported reports whether every image of an OCI archive is already
// in containerd under its name, with the same manifest digest, and
// unpacked. Then importing it again would change nothing, and skipping it
// saves reading and hashing the whole archive at every start
// (--preload-images, `bootlet images import`): about 1.5 s for the
// control-plane images here. Any doubt (a docker-save archive, a
// compressed one, an image without io.containerd.image.name, a lookup
// error) means "import it".
func alreadyImported(ctx context.Context, client *containerd.Client, file string) ([]string, bool) {
	refs, err := archiveImageNames(file)
	if err != nil || len(refs) == 0 {
		return nil, false
	}
	names := make([]string, 0, len(refs))
	for _, ref := range refs {
		img, err := client.ImageService().Get(ctx, ref.name)
		if err != nil || string(img.Target.Digest) != ref.digest {
			return nil, false
		}
		unpacked, err := containerd.NewImageWithPlatform(client, img, platforms.Default()).IsUnpacked(ctx, "")
		if err != nil || !unpacked {
			return nil, false
		}
		names = append(names, ref.name)
	}
	return names, true
}

type archiveRef struct {
	name   string
	digest string
}

// archiveImageNames reads index.json of an uncompressed OCI archive (tar
// headers only: archive/tar seeks past the blobs of a file) and returns
// each manifest's io.containerd.image.name with its digest, as containerd's
// Import names them. A manifest without that annotation is an error: its
// name would depend on the importer's options.
func archiveImageNames(file string) ([]archiveRef, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: no index.json", file)
		}
		if err != nil {
			return nil, err
		}
		if filepath.Clean(h.Name) != "index.json" {
			continue
		}
		var idx ocispec.Index
		if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&idx); err != nil {
			return nil, fmt.Errorf("%s: index.json: %w", file, err)
		}
		refs := make([]archiveRef, 0, len(idx.Manifests))
		for _, m := range idx.Manifests {
			name := m.Annotations["io.containerd.image.name"]
			if name == "" {
				return nil, fmt.Errorf("%s: manifest %s has no io.containerd.image.name", file, m.Digest)
			}
			refs = append(refs, archiveRef{name: name, digest: string(m.Digest)})
		}
		return refs, nil
	}
}
