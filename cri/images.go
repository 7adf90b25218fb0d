package cri

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/platforms"
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
// address is containerd's gRPC socket path.
func ImportArchives(ctx context.Context, address string, files []string) ([]string, error) {
	client, err := containerd.New(strings.TrimPrefix(address, "unix://"), containerd.WithDefaultNamespace("k8s.io"))
	if err != nil {
		return nil, fmt.Errorf("connect containerd %s: %w", address, err)
	}
	defer client.Close()
	var names []string
	for _, f := range files {
		got, err := importOne(ctx, client, f)
		if err != nil {
			return names, fmt.Errorf("import %s: %w", f, err)
		}
		names = append(names, got...)
	}
	return names, nil
}

func importOne(ctx context.Context, client *containerd.Client, file string) ([]string, error) {
	r, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	imgs, err := client.Import(ctx, io.Reader(r),
		containerd.WithImportPlatform(platforms.Default()),
		containerd.WithSkipMissing(),
	)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, i := range imgs {
		img := containerd.NewImageWithPlatform(client, i, platforms.Default())
		if err := img.Unpack(ctx, ""); err != nil {
			return names, fmt.Errorf("unpack %s: %w", i.Name, err)
		}
		names = append(names, i.Name)
	}
	return names, nil
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
