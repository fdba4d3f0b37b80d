package archtest

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/buyflow/buyflow"

type pkg struct {
	ImportPath string
	Standard   bool
	Deps       []string
	Imports    []string
}

// list runs `go list -deps -json` on patterns and returns the named packages (not their deps).
func list(t *testing.T, patterns ...string) map[string]pkg {
	t.Helper()
	args := append([]string{"list", "-json=ImportPath,Standard,Deps,Imports"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", patterns, err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %v matched no package", patterns)
	}
	return pkgs
}

func isStd(path string) bool { return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") }

func TestLambdasNeverLinkCDK(t *testing.T) {
	for path, p := range list(t, "./functions/...") {
		for _, d := range p.Deps {
			if strings.Contains(d, "aws-cdk-go") || strings.Contains(d, "jsii-runtime-go") || strings.HasPrefix(d, module+"/infra") {
				t.Errorf("%s links %s: a bootstrap would grow to 28-90 MB", path, d)
			}
		}
	}
}

// The functions that send no AdCP request never link the JSON Schema library: its init compiles
// every draft's metaschema (5-8 ms of each cold start) whether anything validates or not. The
// validator lives in internal/adcpvalidate, reached through functions/internal/agentclient.
func TestFunctionsWithoutAgentCallsNeverLinkJSONSchema(t *testing.T) {
	var patterns []string
	for _, f := range []string{"webhook", "approve", "notify", "inform", "publish"} {
		patterns = append(patterns, "./functions/"+f)
	}
	for path, p := range list(t, patterns...) {
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "github.com/santhosh-tekuri/jsonschema") || d == module+"/internal/adcpvalidate" {
				t.Errorf("%s links %s, though it validates no AdCP request", path, d)
			}
		}
	}
}

// Test-support packages (simulated agents, emulators, event converters) never reach a Lambda.
func TestLambdasNeverLinkTestSupport(t *testing.T) {
	support := []string{"/internal/adcptest", "/internal/buytest", "/internal/dynamotest", "/internal/apigwtest", "/internal/metrics/metricstest", "/internal/logging/logtest", "/internal/devstack",
		"/internal/approvaltest", "/internal/stagetest", "/internal/clocktest", "/internal/benchtest", "/internal/iampolicy", "/internal/buyerstoryboards"}
	// The sandbox's functions are the simulated agents (topology.Sandbox), deployed only with
	// infra's buyflow:sandbox: they may link those, and only through internal/sandbox; so may
	// the cold start they share (a production function linking it links internal/sandbox).
	sandboxed := map[string]bool{module + "/internal/adcptest": true, module + "/internal/sandbox": true}
	for path, p := range list(t, "./functions/...") {
		sandbox := strings.HasPrefix(path, module+"/functions/sandbox") || path == module+"/functions/internal/sandboxwire"
		for _, d := range p.Deps {
			if !sandbox && d == module+"/internal/sandbox" {
				t.Errorf("%s links %s, which only the sandbox's functions may", path, d)
			}
			if sandbox && sandboxed[d] {
				continue
			}
			for _, s := range support {
				if d == module+s || strings.HasPrefix(d, module+s+"/") {
					t.Errorf("%s links the test-support package %s", path, d)
				}
			}
		}
	}
}

// The use cases' test harnesses build whole use cases over emulators; only test files import
// them (go list's Imports leaves test files out).
func TestHarnessesServeTestsOnly(t *testing.T) {
	harnesses := []string{module + "/internal/approvaltest", module + "/internal/stagetest"}
	for path, p := range list(t, "./...") {
		for _, d := range p.Imports {
			if slices.Contains(harnesses, d) {
				t.Errorf("%s imports the test harness %s outside its tests", path, d)
			}
		}
	}
}

func TestNothingImportsInfraOrFunctions(t *testing.T) {
	for path, p := range list(t, "./...") {
		if strings.HasPrefix(path, module+"/infra") {
			continue
		}
		for _, d := range p.Imports {
			// The Lambdas share their wiring under functions/internal (Go keeps it theirs).
			if strings.HasPrefix(path, module+"/functions/") && strings.HasPrefix(d, module+"/functions/internal/") {
				continue
			}
			if strings.HasPrefix(d, module+"/infra") || strings.HasPrefix(d, module+"/functions/") {
				t.Errorf("%s imports %s", path, d)
			}
		}
	}
}

func TestLeafPackagesImportOnlyTheStandardLibrary(t *testing.T) {
	leaves := map[string][]string{
		"./internal/workflow": nil,
		// The system's nouns: storage-free, so a policy over them stays pure.
		"./internal/record": {module + "/internal/workflow"},
		// The approval page prints amounts with the currencies' minor units, from the money leaf.
		"./internal/approvalcore": {module + "/internal/money"},
		// The approval policy compares amounts in ISO 4217 currencies; config and infra parse it
		// without linking the approval kernel.
		"./internal/approvalpolicy": {module + "/internal/charclass", module + "/internal/iamarn", module + "/internal/money"},
		// Principals and character classes, matched without compiling a regexp at a cold start.
		"./internal/iamarn":      {module + "/internal/charclass"},
		"./internal/charclass":   nil,
		"./internal/webhookauth": {"github.com/go-jose/go-jose/v4"},
		// The routes of the webhook URLs: sealed by the stages, opened by the receiver.
		"./internal/webhookroute": {module + "/internal/record", module + "/internal/topology"},
		"./internal/money":        {module + "/internal/jsonnum"},
		"./internal/jsonnum":      nil,
		// The status events' contract, read by the publisher and by every consumer.
		"./internal/statusevent": {module + "/internal/charclass"},
		// The HTTP API's JSON, decoded by the CLI: it must not pull the server into it.
		"./internal/api": {module + "/internal/record"},
		// The retry of DynamoDB writes that lost a race, shared by the ledger and the registry.
		"./internal/dynamoretry": {"github.com/aws/aws-sdk-go-v2", module + "/internal/ctxwait"},
		// Waiting a while or until a context is done: the retries' and the polls' pause.
		"./internal/ctxwait": nil,
		// The one dispatcher of the Lambdas that serve several ASL tasks.
		"./internal/dispatch": {module + "/internal/workflow"},
	}
	for pattern, allowed := range leaves {
		t.Run(pattern, func(t *testing.T) {
			for path, p := range list(t, pattern) {
				for _, d := range p.Imports {
					if isStd(d) || slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(d, a) }) {
						continue
					}
					t.Errorf("%s imports %s; it must stay a leaf", path, d)
				}
			}
		})
	}
}

// The approval policy is parsed by its pure leaf: config parses it once per cold start for the
// functions that read it and hands it to the mains typed, and infra validates the context value
// at synth with the same parser. Neither links the approval kernel (its ledger interface, Slack,
// Secrets Manager) for that, and no main parses the policy itself.
func TestThePolicyIsParsedWithoutTheApprovalKernel(t *testing.T) {
	kernel := []string{module + "/internal/approval", module + "/internal/approvalcore"}
	for path, p := range list(t, "./internal/config", "./infra") {
		for _, d := range p.Deps {
			if slices.Contains(kernel, d) {
				t.Errorf("%s depends on %s: parse the policy with internal/approvalpolicy", path, d)
			}
		}
		if !slices.Contains(p.Imports, module+"/internal/approvalpolicy") {
			t.Errorf("%s does not parse the policy with internal/approvalpolicy", path)
		}
	}
	for path, p := range list(t, "./functions/...") {
		if slices.Contains(p.Imports, module+"/internal/approvalpolicy") {
			t.Errorf("%s imports internal/approvalpolicy: take the parsed policy from config.Env", path)
		}
	}
}

// The ledger is the DynamoDB store of the records; the use cases speak package record and name
// the part of the store they need as an interface. Only wiring, the local stack and the test
// emulators and harnesses that build a store import it, and the agent registry's own store,
// which keeps its items in the same table under the ledger's key attributes.
func TestOnlyWiringImportsTheLedger(t *testing.T) {
	allowed := []string{
		module + "/functions/internal/wire", module + "/infra", module + "/internal/devstack",
		module + "/internal/dynamotest", module + "/internal/approvaltest", module + "/internal/stagetest",
		module + "/internal/registry", module + "/internal/ledger",
	}
	for path, p := range list(t, "./...") {
		if slices.Contains(allowed, path) || strings.HasPrefix(path, module+"/cmd/") {
			continue
		}
		if slices.Contains(p.Imports, module+"/internal/ledger") {
			t.Errorf("%s imports the ledger: speak package record and take the store as an interface", path)
		}
	}
}

func TestAdapterPackagesStayOutOfEachOther(t *testing.T) {
	forbidden := map[string][]string{
		// The AdCP client speaks MCP, not AWS.
		"./internal/adcp": {"github.com/aws/aws-sdk-go-v2", module + "/internal/ledger"},
		// The ledger knows DynamoDB and the workflow model, nothing of AdCP or HTTP.
		"./internal/ledger": {module + "/internal/adcp", module + "/internal/httpapi"},
	}
	for pattern, bad := range forbidden {
		t.Run(pattern, func(t *testing.T) {
			pkgs := list(t, pattern)
			for path, p := range pkgs {
				for _, d := range p.Deps {
					for _, b := range bad {
						if strings.HasPrefix(d, b) {
							t.Errorf("%s depends on %s", path, d)
						}
					}
				}
			}
		})
	}
}

// The layers, top-down: functions/* (wiring) → one use case per Lambda → shared kernels →
// adapters → leaves. A use case's package serves its Lambdas alone.
var (
	useCases = []string{
		module + "/internal/submit",     // submit
		module + "/internal/governance", // governance
		module + "/internal/create",     // create
		module + "/internal/poll",       // poll
		module + "/internal/notify",     // notify
		module + "/internal/approve",    // approve
		module + "/internal/webhook",    // webhook
		module + "/internal/reconcile",  // reconcile
		module + "/internal/agents",     // agents
		module + "/internal/publish",    // publish
		module + "/internal/inform",     // inform
		module + "/internal/campaign",   // campaign (and submit's campaign routes)
		module + "/internal/modify",     // modify (and submit's change routes)
		module + "/internal/delivery",   // reconcile's delivery reads
	}
	// Kernels and adapters the use cases share; none of them may reach a use case.
	shared = []string{
		"./internal/buy", "./internal/stage", "./internal/approval", "./internal/sellertask", "./internal/breaker", "./internal/httpapi", "./internal/registry", "./internal/ledger", "./internal/sfn", "./internal/adcp", "./internal/adcpvalidate",
		"./internal/slack", "./internal/secrets", "./internal/metrics", "./internal/config", "./internal/topology",
		"./internal/approvalcore", "./internal/approvalpolicy", "./internal/webhookauth", "./internal/money", "./internal/jsonnum",
		"./internal/workflow", "./internal/record", "./internal/logging", "./internal/registry", "./internal/statusevent",
		"./internal/dynamoretry", "./internal/dispatch", "./internal/api",
	}
)

func isUseCase(path string) bool { return slices.Contains(useCases, path) }

func TestNoUseCaseImportsAnother(t *testing.T) {
	for path, p := range list(t, useCases...) {
		for _, d := range p.Deps {
			if isUseCase(d) && d != path {
				t.Errorf("%s depends on the use case %s: a use case serves its own Lambdas; share a kernel instead", path, d)
			}
		}
	}
}

func TestSharedPackagesReachNoUseCase(t *testing.T) {
	for path, p := range list(t, shared...) {
		for _, d := range p.Deps {
			if isUseCase(d) {
				t.Errorf("%s depends on the use case %s: kernels and adapters sit below the use cases", path, d)
			}
		}
	}
}

// The state-machine stages and the sweep are not HTTP handlers.
func TestTaskUseCasesDoNotImportHTTP(t *testing.T) {
	for path, p := range list(t, "./internal/stage", "./internal/governance", "./internal/create", "./internal/poll", "./internal/reconcile", "./internal/sellertask", "./internal/breaker") {
		for _, d := range p.Deps {
			if d == module+"/internal/httpapi" || d == "github.com/aws/aws-lambda-go/events" {
				t.Errorf("%s depends on %s", path, d)
			}
		}
	}
}

// Only functions/* and cmd/* build AWS clients (and the local stack and the test emulators,
// which stand in for AWS); every package below receives a narrow interface or a client.
func TestOnlyWiringBuildsAWSClients(t *testing.T) {
	allowed := []string{"functions/", "cmd/", "internal/devstack/", "internal/dynamotest/", "infra/"}
	root := "../.."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "node_modules" || rel == ".git" || rel == "bin" || rel == "cdk.out" || strings.HasPrefix(rel, ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") ||
			slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(rel, a) }) {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "NewFromConfig" || sel.Sel.Name == "LoadDefaultConfig") {
				t.Errorf("%s builds an AWS client (%s): only functions/* and cmd/* do", rel, sel.Sel.Name)
			}
			return true
		})
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); p == "github.com/aws/aws-sdk-go-v2/config" {
				t.Errorf("%s imports %s", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A package is named for its folder, and its comment says so: a reader of "Package x" or a log
// line "x: ..." finds the folder x. A command (package main) opens with "Command <folder>".
func TestEveryPackageCommentNamesItsFolder(t *testing.T) {
	root := "../.."
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			base := filepath.Base(rel)
			if rel != "." && (strings.HasPrefix(base, ".") || base == "node_modules" || base == "testdata" || base == "bin" || base == "cdk.out" ||
				rel == "third_party") { // other projects' code, kept as upstream wrote it
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") {
			dirs[filepath.Dir(rel)] = append(dirs[filepath.Dir(rel)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, files := range dirs {
		folder := filepath.Base(dir)
		var docs []string
		for _, path := range files {
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			name := strings.TrimSuffix(f.Name.Name, "_test")
			if name != folder && name != "main" {
				t.Errorf("%s: package %s in folder %s", path, f.Name.Name, folder)
			}
			if f.Doc == nil {
				continue
			}
			want := "Package " + folder + " "
			if name == "main" {
				want = "Command " + folder + " "
			}
			if text := f.Doc.Text(); !strings.HasPrefix(text, want) {
				t.Errorf("%s: the package comment starts %q, not %q", path, strings.SplitN(text, "\n", 2)[0], want)
			}
			docs = append(docs, path)
		}
		if len(docs) == 0 {
			t.Errorf("%s: no package comment", dir)
		}
	}
}
