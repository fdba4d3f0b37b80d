package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/buyflow/buyflow/internal/topology"
)

// FindRepoRoot walks up from dir to the folder holding go.mod and statemachine/ (the buyflow
// repository root).
func FindRepoRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("devstack: find repository root: %w", err)
	}
	for {
		if isFile(filepath.Join(d, "go.mod")) && isFile(filepath.Join(d, topology.App.StateMachineFile)) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("devstack: no buyflow repository (go.mod and %s) above %s", topology.App.StateMachineFile, dir)
		}
		d = parent
	}
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// missingFunctions lists the topology functions that have no functions/<name>/main.go under
// repoRoot.
func missingFunctions(repoRoot string) []string {
	var missing []string
	for _, f := range topology.App.Functions {
		if !isFile(filepath.Join(repoRoot, "functions", f.Name, "main.go")) {
			missing = append(missing, f.Name)
		}
	}
	return missing
}

// goTool is the go command of the toolchain running this process when GOROOT names one.
func goTool() string {
	if gr := os.Getenv("GOROOT"); gr != "" && isFile(filepath.Join(gr, "bin", "go")) {
		return filepath.Join(gr, "bin", "go")
	}
	return "go"
}

// PrebuiltEnv names a folder of host bootstraps built beforehand (make build-host), which the
// test suites that start the local stack use instead of building their own.
const PrebuiltEnv = "BUYFLOW_E2E_BIN"

// Bootstraps returns the folder of host bootstraps a local stack runs: PrebuiltEnv's when it is
// set, else dir after building every function into it. make test builds them once and sets
// PrebuiltEnv, so the suites that start a stack in parallel do not each link all of them.
func Bootstraps(ctx context.Context, repoRoot, dir string) (string, error) {
	if prebuilt := os.Getenv(PrebuiltEnv); prebuilt != "" {
		return prebuilt, nil
	}
	return dir, Build(ctx, repoRoot, dir, nil)
}

// Build compiles every topology function for the host into outDir/<name>/bootstrap, as
// `go build -trimpath -tags lambda.norpc` does, two at a time. It fails, naming them, when a
// function has no source folder, and otherwise reports every build failure together.
func Build(ctx context.Context, repoRoot, outDir string, log io.Writer) error {
	if missing := missingFunctions(repoRoot); len(missing) > 0 {
		return fmt.Errorf("devstack: the topology declares functions that have no functions/<name>/main.go yet: %s", strings.Join(missing, ", "))
	}
	goBin := goTool()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, 2)
	)
	for _, f := range topology.App.Functions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out := BootstrapPath(outDir, f.Name)
			cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-buildvcs=false", "-tags", "lambda.norpc",
				"-o", out, "./functions/"+f.Name)
			cmd.Dir = repoRoot
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			b, err := cmd.CombinedOutput()
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("build functions/%s: %w\n%s", f.Name, err, b))
				mu.Unlock()
				return
			}
			if log != nil {
				mu.Lock()
				_, _ = fmt.Fprintf(log, "built %s\n", out) // progress only
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("devstack: %w", errors.Join(errs...))
	}
	return nil
}
