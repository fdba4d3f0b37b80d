package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/devstack"
)

// `buyflow smoke`, the CLI a cloud team runs after a deploy, runs one buy through every stage
// of the local stack at its simulated agents and prints each stage; a seller that refuses the
// buy stops it at "create sent", and the diagnosis names the stage, the function and the call.
func TestSmokeCommandOnTheLocalStack(t *testing.T) {
	c := begin(t)
	if suite.local == nil {
		t.Skip("the local stack's event sink is what --events reads; a deployed stack is smoked by hand (README)")
	}
	cli := filepath.Join(t.TempDir(), "buyflow")
	build := exec.Command("go", "build", "-o", cli, "./cmd/buyflow")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the CLI: %v\n%s", err, out)
	}
	smoke := func(t *testing.T, extra ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		args := append([]string{"--endpoint", suite.api, "--tenant", c.Tenant, "smoke",
			"--seller", devstack.SellerID, "--governance", devstack.GovernanceID, "--events", suite.local.EventSinkURL, "--timeout", "2m"}, extra...)
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, cli, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("run buyflow smoke: %v", err)
		}
		return out.String(), cmd.ProcessState.ExitCode()
	}

	t.Run("every stage", func(t *testing.T) {
		t.Parallel()
		out, code := smoke(t)
		if code != 0 {
			t.Fatalf("buyflow smoke exited %d:\n%s", code, out)
		}
		for _, stage := range []string{"governance checked", "approval               skipped", "create sent", "seller task submitted",
			"webhook received", "completed", "outcome reported", "status event seen", "every stage passed"} {
			if !strings.Contains(out, stage) {
				t.Errorf("the output lacks %q:\n%s", stage, out)
			}
		}
	})
	t.Run("the seller refuses", func(t *testing.T) {
		t.Parallel()
		out, code := smoke(t, "--sim", "rejected")
		if code != 8 {
			t.Fatalf("buyflow smoke exited %d, want 8 (a stage failed):\n%s", code, out)
		}
		for _, want := range []string{`FAILED at stage "create sent"`, "function    create", "create_media_buy", "POLICY_VIOLATION", "buy status  failed"} {
			if !strings.Contains(out, want) {
				t.Errorf("the diagnosis lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "webhook received") {
			t.Errorf("a refused buy reported a later stage:\n%s", out)
		}
	})
}
