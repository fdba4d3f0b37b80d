package archtest

import (
	"bytes"
	"encoding/json"
	"os/exec"
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

// Test-support packages (simulated agents, emulators, event converters) never reach a Lambda.
func TestLambdasNeverLinkTestSupport(t *testing.T) {
	support := []string{"/internal/adcptest", "/internal/dynamotest", "/internal/apigwtest", "/internal/metrics/metricstest", "/internal/devstack"}
	for path, p := range list(t, "./functions/...") {
		for _, d := range p.Deps {
			for _, s := range support {
				if d == module+s || strings.HasPrefix(d, module+s+"/") {
					t.Errorf("%s links the test-support package %s", path, d)
				}
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
		// The approval page prints amounts with the currencies' minor units, from the money leaf.
		"./internal/approvalcore": {module + "/internal/money"},
		"./internal/webhookauth":  {"github.com/go-jose/go-jose/v4"},
		"./internal/money":        {module + "/internal/jsonnum"},
		"./internal/jsonnum":      nil,
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
