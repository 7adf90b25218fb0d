package pivot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsureTCPMigrateReq(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tcp_migrate_req")
	if v, err := EnsureTCPMigrateReq(p, true); v != "" || err != nil {
		t.Errorf("absent: %q %v", v, err)
	}
	if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := EnsureTCPMigrateReq(p, false); v != "0" || err != nil {
		t.Errorf("off: %q %v", v, err)
	}
	if v, err := EnsureTCPMigrateReq(p, true); v != "1" || err != nil {
		t.Errorf("on: %q %v", v, err)
	}
	if data, _ := os.ReadFile(p); strings.TrimSpace(string(data)) != "1" {
		t.Errorf("file holds %q", data)
	}
}
