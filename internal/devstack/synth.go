package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// SynthTemplate synthesizes the CDK stack as `cdk synth` does (it builds ./infra and runs it
// with the CLI's CDK_OUTDIR and CDK_CONTEXT_JSON: cdk.json's context and the asset folder
// binDir) and returns the template. It needs Node.js (jsii) and takes about a minute; the
// local stack enforces the roles of this template when Options.IAMTemplate is set.
func SynthTemplate(ctx context.Context, repoRoot, binDir string, override map[string]any) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "buyflow-synth-")
	if err != nil {
		return nil, fmt.Errorf("devstack: synth: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }() // temp folder, best effort
	raw, err := os.ReadFile(filepath.Join(repoRoot, "cdk.json"))
	if err != nil {
		return nil, fmt.Errorf("devstack: synth: %w", err)
	}
	var cfg struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("devstack: synth: cdk.json: %w", err)
	}
	if cfg.Context == nil {
		cfg.Context = map[string]any{}
	}
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return nil, fmt.Errorf("devstack: synth: %w", err)
	}
	cfg.Context["buyflow:assetRoot"] = abs
	for k, v := range override {
		cfg.Context[k] = v
	}
	ctxJSON, err := json.Marshal(cfg.Context)
	if err != nil {
		return nil, fmt.Errorf("devstack: synth: %w", err)
	}
	app := filepath.Join(tmp, "infra")
	build := exec.CommandContext(ctx, goTool(), "build", "-o", app, "./infra")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("devstack: synth: build infra: %w\n%s", err, out)
	}
	outDir := filepath.Join(tmp, "cdk.out")
	run := exec.CommandContext(ctx, app)
	run.Dir = repoRoot
	run.Env = append(os.Environ(), "CDK_OUTDIR="+outDir, "CDK_CONTEXT_JSON="+string(ctxJSON), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=1")
	if out, err := run.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("devstack: synth: %w\n%s", err, out)
	}
	found, err := filepath.Glob(filepath.Join(outDir, "*.template.json"))
	if err != nil || len(found) != 1 {
		return nil, fmt.Errorf("devstack: synth: %d templates in %s (want the one stack's)", len(found), outDir)
	}
	return os.ReadFile(found[0])
}
