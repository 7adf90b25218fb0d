package upgrade

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/clitest"
)

func TestVerbsRefuseBeforeAnyCall(t *testing.T) {
	cmds := func(*string) []*cobra.Command { return []*cobra.Command{NewCommand()} }
	missing := filepath.Join(t.TempDir(), "admin.conf")
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"upgrade", "apply"}, "--to is required"},
		{[]string{"upgrade", "apply", "--to", "v1.37.2", "--wait", "--kubeconfig", missing}, "kubeconfig " + missing},
		{[]string{"upgrade", "status", "--kubeconfig", missing}, "kubeconfig " + missing},
		{[]string{"upgrade", "status", "extra"}, "unknown command"},
	}
	for _, tt := range tests {
		_, err := clitest.Run(t, cmds, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.wantErr)
		}
	}
}
