package nodeagent

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestListeningPorts(t *testing.T) {
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	for _, tc := range []struct {
		name  string
		table string
		want  []int
	}{
		{"header only", header, nil},
		{"a listener on 127.0.0.1:2379 and one on 10.0.0.1:2380", header +
			"   0: 0100007F:094B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n" +
			"   1: 0100000A:094C 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0\n", []int{2379, 2380}},
		{"an established connection is no listener", header +
			"   0: 0100007F:094B 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 20 4 30 10 -1\n", nil},
		{"IPv6", "  sl  local_address                         remote_address                        st\n" +
			"   0: 00000000000000000000000001000000:0955 00000000000000000000000000000000:0000 0A 00000000:00000000\n", []int{2389}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := listeningPorts(strings.NewReader(tc.table))
			if err != nil {
				t.Fatal(err)
			}
			if ports := slices.Sorted(maps.Keys(got)); !slices.Equal(ports, tc.want) {
				t.Errorf("listening ports %v, want %v", ports, tc.want)
			}
		})
	}
	if _, err := listeningPorts(strings.NewReader(header + "   0: 0100007F:ZZZZ 00000000:0000 0A\n")); err == nil {
		t.Error("a port that is no hex number: no error")
	}
}

// A helper's data goes by a rename first: what a removal killed halfway
// leaves is never at the data directory's path, and the next removal
// takes it.
func TestRemoveData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd-upgrade-helper-1")
	if err := os.MkdirAll(filepath.Join(dir, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	left := dir + ".deleting"
	if err := os.MkdirAll(filepath.Join(left, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := removeData(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, left} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is left: %v", p, err)
		}
	}
	if err := removeData(dir); err != nil {
		t.Errorf("removing data that is gone: %v", err)
	}
}
