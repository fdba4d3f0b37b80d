package statemachine

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The static check: npm asl-validator (pinned in the root package.json) reads
// the rendered definition (every ${Placeholder} replaced by a Lambda ARN, as CDK deploys it)
// against the Amazon States Language schema, with its ARN and JSONPath checks on. The
// project's own rules are the contract tests. It needs Node and the root node_modules, and runs
// offline; set BUYFLOW_NODE_TESTS=1 (make test does).

func TestASLValidator(t *testing.T) {
	if os.Getenv("BUYFLOW_NODE_TESTS") != "1" {
		t.Skip("asl-validator runs in Node; set BUYFLOW_NODE_TESTS=1 (make test does)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("BUYFLOW_NODE_TESTS=1 but node is not on PATH: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The package's bin script, run by node itself: no shell and no PATH lookup of .bin.
	cli := filepath.Join(root, "node_modules", "asl-validator", "dist", "bin", "asl-validator.js")
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("asl-validator is not installed (npm ci at the repository root): %v", err)
	}
	subs := map[string]string{}
	for _, p := range Placeholders {
		subs[p] = "arn:aws:lambda:us-east-1:123456789012:function:buyflow-" + p
	}
	rendered, err := Render(subs)
	if err != nil {
		t.Fatal(err)
	}

	validate := func(t *testing.T, name, def string) (string, error) {
		t.Helper()
		file := filepath.Join(t.TempDir(), name+".asl.json")
		if err := os.WriteFile(file, []byte(def), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(node, cli, "--json-path", file)
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}

	t.Run("rendered definition", func(t *testing.T) {
		out, err := validate(t, "mediabuy", rendered)
		if err != nil {
			t.Fatalf("asl-validator rejects the rendered mediabuy.asl.json (%v):\n%s", err, out)
		}
		if !strings.Contains(out, "is valid") {
			t.Fatalf("asl-validator did not say the definition is valid:\n%s", out)
		}
	})

	t.Run("rendered campaign definition", func(t *testing.T) {
		subs := map[string]string{}
		for _, p := range CampaignPlaceholders {
			subs[p] = "arn:aws:lambda:us-east-1:123456789012:function:buyflow-" + p
		}
		campaign, err := RenderCampaign(subs)
		if err != nil {
			t.Fatal(err)
		}
		out, err := validate(t, "campaign", campaign)
		if err != nil || !strings.Contains(out, "is valid") {
			t.Fatalf("asl-validator rejects the rendered campaign.asl.json (%v):\n%s", err, out)
		}
	})

	// The check must bite: a transition to a state that does not exist is an error.
	t.Run("a broken definition is rejected", func(t *testing.T) {
		broken := strings.Replace(rendered, `"Next": "RecordFailure"`, `"Next": "NoSuchState"`, 1)
		if broken == rendered {
			t.Fatal("could not break the definition")
		}
		out, err := validate(t, "broken", broken)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, "NoSuchState") {
			t.Fatalf("asl-validator accepted a Next to a missing state (err %v):\n%s", err, out)
		}
	})
}
