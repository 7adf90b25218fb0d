package shellcmd

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestScriptFlags(t *testing.T) {
	script := filepath.Join(t.TempDir(), "up.sh")
	if err := os.WriteFile(script, []byte(`#!/bin/bash
echo --not-this
  setsid "${BIN}/thing" daemon \
    --root-dir "${LIB}/x" \
    --flag=value -v=2 \
    positional \
    --last "${RUN}" >>"${LOG}" 2>&1 </dev/null --after-redirect &
  --next-line
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		start string
		want  []string
		err   bool
	}{
		{start: `setsid "${BIN}/thing" daemon`, want: []string{"root-dir", "flag", "v", "last"}},
		{start: `setsid "${BIN}/other"`, err: true},
	} {
		got, err := ScriptFlags(script, tc.start)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("ScriptFlags(%q) = %q, %v; want %q (error %v)", tc.start, got, err, tc.want, tc.err)
		}
	}
	if _, err := ScriptFlags(filepath.Join(t.TempDir(), "missing.sh"), "x"); err == nil {
		t.Error("a missing script gave no error")
	}
}
