package devstack_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

func runGo(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	return cmd.CombinedOutput()
}

// testWriter sends the functions' log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
