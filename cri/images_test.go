package cri

import (
	"archive/tar"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func writeTar(t *testing.T, files map[string]string, order []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "img.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for _, name := range order {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

func TestArchiveImageNames(t *testing.T) {
	named := `{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:aa","size":1,"annotations":{"io.containerd.image.name":"registry.k8s.io/etcd:3.6.8-0","org.opencontainers.image.ref.name":"3.6.8-0"}}]}`
	unnamed := `{"schemaVersion":2,"manifests":[{"digest":"sha256:bb","size":1,"annotations":{"org.opencontainers.image.ref.name":"latest"}}]}`
	for _, tc := range []struct {
		name    string
		files   map[string]string
		order   []string
		want    []archiveRef
		wantErr bool
	}{
		{
			name:  "index after the blobs",
			files: map[string]string{"oci-layout": `{}`, "blobs/sha256/aa": "x", "index.json": named},
			order: []string{"oci-layout", "blobs/sha256/aa", "index.json"},
			want:  []archiveRef{{name: "registry.k8s.io/etcd:3.6.8-0", digest: "sha256:aa"}},
		},
		{
			name:  "./ prefixed names",
			files: map[string]string{"./index.json": named},
			order: []string{"./index.json"},
			want:  []archiveRef{{name: "registry.k8s.io/etcd:3.6.8-0", digest: "sha256:aa"}},
		},
		{
			name:    "no containerd name: import decides the name, so no skip",
			files:   map[string]string{"index.json": unnamed},
			order:   []string{"index.json"},
			wantErr: true,
		},
		{
			name:    "docker-save archive",
			files:   map[string]string{"manifest.json": `[]`},
			order:   []string{"manifest.json"},
			wantErr: true,
		},
		{
			name:    "broken index",
			files:   map[string]string{"index.json": `{`},
			order:   []string{"index.json"},
			wantErr: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := archiveImageNames(writeTar(t, tc.files, tc.order))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestArchiveImageNamesNotATar(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img.tar.gz")
	if err := os.WriteFile(path, []byte("\x1f\x8b\x08 not a tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := archiveImageNames(path); err == nil {
		t.Fatal("a compressed archive must not be read as a plain tar")
	}
}

func TestExpandArchivePaths(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b.tar", "a.oci", "c.tar.gz", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.tar"), 0o755); err != nil {
		t.Fatal(err)
	}
	in := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, filepath.Join(dir, n))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		paths []string
		want  []string
	}{
		{"a directory is its archives", []string{dir}, in("a.oci", "b.tar", "c.tar.gz")},
		{"files are kept whatever their name", in("notes.txt", "b.tar"), in("b.tar", "notes.txt")},
		{"a missing path is kept for the import to report", []string{dir, "/nonexistent/z.tar"}, append([]string{"/nonexistent/z.tar"}, in("a.oci", "b.tar", "c.tar.gz")...)},
		{"an empty subdirectory adds nothing", in("sub.tar"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := expandArchivePaths(tc.paths)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
