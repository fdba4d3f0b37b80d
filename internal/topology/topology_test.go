package topology

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestEveryRouteNamesAFunction(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range App.Routes {
		if _, ok := App.Function(r.Function); !ok {
			t.Errorf("route %s %s names unknown function %q", r.Method, r.Path, r.Function)
		}
		key := r.Key()
		if seen[key] {
			t.Errorf("route %s declared twice", key)
		}
		seen[key] = true
		if r.Default() {
			if r.Method != "" || r.Auth != AuthNone {
				t.Errorf("the default route has method %q and auth %q, want none of either", r.Method, r.Auth)
			}
			continue
		}
		if r.Auth != AuthIAM && r.Auth != AuthSignature && r.Auth != AuthPublic {
			t.Errorf("route %s has unknown auth %q", key, r.Auth)
		}
		if !strings.HasPrefix(r.Path, "/v1/") {
			t.Errorf("route %s is not versioned", key)
		}
	}
}

// An unknown path gets buyflow's 404, not the gateway's: the table has a default route.
func TestTheDefaultRouteIsDeclared(t *testing.T) {
	n := 0
	for _, r := range App.Routes {
		if r.Default() {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d default routes, want 1", n)
	}
}

func TestFunctionsAreWellFormed(t *testing.T) {
	names := map[string]bool{}
	placeholders := map[string]bool{}
	for _, f := range App.Functions {
		if names[f.Name] {
			t.Errorf("function %s declared twice", f.Name)
		}
		names[f.Name] = true
		if f.Placeholder != "" {
			if placeholders[f.Placeholder] {
				t.Errorf("placeholder %s used twice", f.Placeholder)
			}
			placeholders[f.Placeholder] = true
		}
		if f.MemoryMB < 128 || f.TimeoutSeconds <= 0 || f.TimeoutSeconds > 900 {
			t.Errorf("function %s: memory %d MB, timeout %d s out of range", f.Name, f.MemoryMB, f.TimeoutSeconds)
		}
		for _, s := range f.Secrets {
			if !contains(f.Env, s) {
				t.Errorf("function %s reads secret named by %s but does not get that variable", f.Name, s)
			}
		}
		// The dev-only tenant header stands in for the IAM identity the local emulator does not
		// carry, so only functions behind IAM routes read it (and infra never sets it).
		if contains(f.Env, EnvLocalTenantHeader) && !servesIAMRoute(f.Name) {
			t.Errorf("function %s reads %s but serves no IAM route", f.Name, EnvLocalTenantHeader)
		}
	}
}

func TestRequiredFunctionsAreDeclared(t *testing.T) {
	for _, name := range []string{"submit", "poll", "webhook", "approve"} {
		if _, ok := App.Function(name); !ok {
			t.Errorf("required function %s missing", name)
		}
	}
}

func TestStateMachineFileExists(t *testing.T) {
	if _, err := os.Stat(filepath.Join("..", "..", App.StateMachineFile)); err != nil {
		t.Fatalf("state machine file: %v", err)
	}
}

// TestFunctionsMatchTheFolders keeps the description and functions/* equal: every described
// function has a main.go, and every folder is described (so CDK and the local stack deploy it).
func TestFunctionsMatchTheFolders(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("..", "..", "functions"))
	if err != nil {
		t.Fatal(err)
	}
	folders := map[string]bool{}
	for _, e := range entries {
		// functions/internal holds the wiring the Lambdas share; Go keeps it theirs alone.
		if e.IsDir() && e.Name() != "internal" {
			folders[e.Name()] = true
		}
	}
	all := slices.Clone(App.Functions)
	for _, s := range Sandbox {
		if _, ok := App.Function(s.Name); ok {
			t.Errorf("the sandbox function %s is in App too: a production deploy would get it", s.Name)
		}
		all = append(all, s.Function)
	}
	for _, f := range all {
		if _, err := os.Stat(filepath.Join("..", "..", "functions", f.Name, "main.go")); err != nil {
			t.Errorf("function %s has no functions/%s/main.go", f.Name, f.Name)
		}
		delete(folders, f.Name)
	}
	for name := range folders {
		t.Errorf("functions/%s is described neither in topology.App nor in topology.Sandbox", name)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func servesIAMRoute(fn string) bool {
	for _, r := range App.Routes {
		if r.Function == fn && r.Auth == AuthIAM {
			return true
		}
	}
	return false
}

func TestConstructID(t *testing.T) {
	for in, want := range map[string]string{"submit": "Submit", "send-task_x": "SendTaskX", "": ""} {
		if got := ConstructID(in); got != want {
			t.Errorf("ConstructID(%q) = %q, want %q", in, got, want)
		}
	}
}

// One function plans and runs the sweep's shards, and its queue's settings are ones SQS and
// Lambda accept: a batch SendMessageBatch and the mapping take, a visibility timeout no
// shorter than the function's timeout (Lambda refuses the mapping otherwise), and a retention
// that outlasts every delivery, so a shard that keeps failing reaches the dead-letter queue.
func TestTheSweepQueueFitsItsFunction(t *testing.T) {
	var fns []Function
	for _, f := range App.Functions {
		if f.SweepsShards {
			fns = append(fns, f)
		}
	}
	if len(fns) != 1 {
		t.Fatalf("%d functions sweep shards, want 1", len(fns))
	}
	q, f := App.SweepQueue, fns[0]
	if q.BatchSize < 1 || q.BatchSize > 10 || q.MaximumConcurrency < 2 || q.MaximumConcurrency > 1000 {
		t.Errorf("batch %d, concurrency %d: SQS batches are 1-10, MaximumConcurrency 2-1000", q.BatchSize, q.MaximumConcurrency)
	}
	if q.VisibilityTimeoutSeconds < f.TimeoutSeconds {
		t.Errorf("visibility timeout %d s under %s's timeout %d s", q.VisibilityTimeoutSeconds, f.Name, f.TimeoutSeconds)
	}
	if q.MaxReceiveCount < 1 || q.RetentionSeconds <= q.MaxReceiveCount*q.VisibilityTimeoutSeconds || q.RetentionSeconds > 1209600 {
		t.Errorf("retention %d s for %d deliveries %d s apart", q.RetentionSeconds, q.MaxReceiveCount, q.VisibilityTimeoutSeconds)
	}
	if !strings.Contains(strings.Join(f.Env, ","), EnvSweepQueueURL) {
		t.Errorf("%s is not told its queue (%s)", f.Name, EnvSweepQueueURL)
	}
}
