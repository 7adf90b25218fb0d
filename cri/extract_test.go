package cri

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/plugins/content/local"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

type tarEntry struct {
	name, body string
	mode       int64
	typ        byte
}

func layerTar(t *testing.T, gz bool, entries ...tarEntry) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	var w = &buf
	tw := tar.NewWriter(w)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.body)), Typeflag: typ}
		if typ != tar.TypeReg {
			h.Size, h.Linkname = 0, "elsewhere"
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	if !gz {
		return buf.Bytes(), ocispec.MediaTypeImageLayer
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(buf.Bytes())
	zw.Close()
	return z.Bytes(), ocispec.MediaTypeImageLayerGzip
}

func putBlob(t *testing.T, cs content.Store, media string, b []byte) ocispec.Descriptor {
	t.Helper()
	d := ocispec.Descriptor{MediaType: media, Digest: digest.FromBytes(b), Size: int64(len(b))}
	if err := content.WriteBlob(context.Background(), cs, d.Digest.String(), bytes.NewReader(b), d); err != nil {
		t.Fatal(err)
	}
	return d
}

// image stores an image of layers (bottom first) and returns its manifest.
func image(t *testing.T, cs content.Store, layers ...[]tarEntry) ocispec.Descriptor {
	t.Helper()
	cfg, _ := json.Marshal(ocispec.Image{Platform: ocispec.Platform{OS: "linux", Architecture: runtime.GOARCH}})
	m := ocispec.Manifest{Config: putBlob(t, cs, ocispec.MediaTypeImageConfig, cfg)}
	m.SchemaVersion = 2
	m.MediaType = ocispec.MediaTypeImageManifest
	for i, l := range layers {
		b, media := layerTar(t, i%2 == 1, l...)
		m.Layers = append(m.Layers, putBlob(t, cs, media, b))
	}
	mb, _ := json.Marshal(m)
	return putBlob(t, cs, ocispec.MediaTypeImageManifest, mb)
}

func TestExtractFromImage(t *testing.T) {
	cs, err := local.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	base := []tarEntry{{name: "usr/local/bin/kubelet", body: "v1.36.3", mode: 0o755}, {name: "etc/passwd", body: "root:x:0:0", mode: 0o644}}
	newer := []tarEntry{{name: "./usr/local/bin/kubelet", body: "v1.37.2", mode: 0o755}}
	deleted := []tarEntry{{name: "usr/local/bin/.wh.kubelet", mode: 0o644}}
	link := []tarEntry{{name: "usr/local/bin/kubelet", typ: tar.TypeSymlink}}
	opaque := []tarEntry{{name: "usr/local/bin/", typ: tar.TypeDir, mode: 0o755}, {name: "usr/local/bin/.wh..wh..opq", mode: 0o644}}
	dirGone := []tarEntry{{name: "usr/local/.wh.bin", mode: 0o644}}
	dirIsFile := []tarEntry{{name: "usr/local/bin", body: "a file now", mode: 0o644}}
	// An entry in the same layer as its whiteout wins over it.
	recreated := []tarEntry{{name: "usr/local/bin/.wh..wh..opq", mode: 0o644}, {name: "usr/local/bin/kubelet", body: "v1.37.2", mode: 0o755}}
	dirStays := []tarEntry{{name: "usr/local/bin", typ: tar.TypeDir, mode: 0o755}}
	tests := []struct {
		name     string
		layers   [][]tarEntry
		file     string
		want     string
		wantMode os.FileMode
		wantErr  string
	}{
		{"one layer", [][]tarEntry{base}, "/usr/local/bin/kubelet", "v1.36.3", 0o755, ""},
		{"the top layer wins (gzip)", [][]tarEntry{base, newer}, "/usr/local/bin/kubelet", "v1.37.2", 0o755, ""},
		{"a lower layer's file", [][]tarEntry{base, newer}, "etc/passwd", "root:x:0:0", 0o644, ""},
		{"deleted above", [][]tarEntry{base, deleted}, "/usr/local/bin/kubelet", "", 0, "deletes it"},
		{"absent", [][]tarEntry{base}, "/usr/bin/kubelet", "", 0, "no such file"},
		{"a symlink", [][]tarEntry{base, link}, "/usr/local/bin/kubelet", "", 0, "not a regular file"},
		{"an opaque directory above", [][]tarEntry{base, opaque}, "/usr/local/bin/kubelet", "", 0, "deletes it"},
		{"its directory deleted above", [][]tarEntry{base, dirGone}, "/usr/local/bin/kubelet", "", 0, "deletes it"},
		{"its directory replaced by a file", [][]tarEntry{base, dirIsFile}, "/usr/local/bin/kubelet", "", 0, "deletes it"},
		{"recreated beside an opaque whiteout", [][]tarEntry{base, recreated}, "/usr/local/bin/kubelet", "v1.37.2", 0o755, ""},
		{"its directory listed again above", [][]tarEntry{base, dirStays}, "/usr/local/bin/kubelet", "v1.36.3", 0o755, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			dest := filepath.Join(dir, "kubelet")
			if err := os.WriteFile(dest, []byte("previous"), 0o700); err != nil {
				t.Fatal(err)
			}
			err := extractFromImage(context.Background(), cs, image(t, cs, tt.layers...), tt.file, dest)
			got, _ := os.ReadFile(dest)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				if string(got) != "previous" {
					t.Errorf("a failed extraction changed dest: %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, _ := os.Stat(dest)
			if string(got) != tt.want || st.Mode().Perm() != tt.wantMode {
				t.Errorf("dest %q mode %v, want %q %v", got, st.Mode().Perm(), tt.want, tt.wantMode)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".kubelet.*")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}
