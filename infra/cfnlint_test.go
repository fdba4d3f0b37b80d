package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
)

// cfnLintVersion is the cfn-lint release the explained warnings below were reviewed with; the
// Makefile's cfn-lint target checks that this is the one installed.
const cfnLintVersion = "1.51.0"

// cfnLintRequiredEnv, set to 1 (.ci/run sets it), makes a missing cfn-lint a failure instead
// of a skip.
const cfnLintRequiredEnv = "BUYFLOW_CFN_LINT"

// explainedWarning is a cfn-lint warning the templates keep, matched by rule and message, with
// the reason it stays.
type explainedWarning struct {
	rule    string
	message *regexp.Regexp
	why     string
}

var explainedWarnings = []explainedWarning{{
	rule:    "W3005",
	message: regexp.MustCompile(`^'\w+Role[0-9A-F]{8}' dependency already enforced by a 'GetAtt' at 'Resources/\w+/Properties/(Role|RoleArn)'$`),
	why: "aws-cdk-lib makes every Lambda function and the state machine DependsOn its role and the role's " +
		"default policy, so the policy is attached before the first invocation; the role half of that " +
		"DependsOn repeats the GetAtt's implicit dependency. The library writes it, it changes no " +
		"deployment order, and removing it would mean editing every function's L1 resource.",
}}

type cfnLintFinding struct {
	Filename string
	Level    string
	Message  string
	Rule     struct{ Id string }
	Location struct{ Path []any }
}

func (f cfnLintFinding) String() string {
	return filepath.Base(f.Filename) + ": " + f.Level + " " + f.Rule.Id + " at " + pathOf(f.Location.Path) + ": " + f.Message
}

func pathOf(p []any) string {
	parts := make([]string, len(p))
	for i, s := range p {
		b, _ := json.Marshal(s)
		parts[i] = strings.Trim(string(b), `"`)
	}
	return strings.Join(parts, "/")
}

// TestTemplatesPassCfnLint runs cfn-lint over the template of every stack variant cdk-nag
// checks (prod, dev, prod with an account and region, fully configured): no error, and no
// warning but the explained ones, each of which must still occur (a stale explanation fails
// too). A deliberately broken copy of the prod template is linted in the same run and must
// report an error, so a cfn-lint that checks nothing (or output this test cannot read) fails.
func TestTemplatesPassCfnLint(t *testing.T) {
	lint, err := exec.LookPath("cfn-lint")
	if err != nil {
		if os.Getenv(cfnLintRequiredEnv) == "1" {
			t.Fatalf("%s=1 but cfn-lint is not on PATH (pip install cfn-lint==%s)", cfnLintRequiredEnv, cfnLintVersion)
		}
		t.Skipf("cfn-lint is not on PATH: the template lint needs cfn-lint %s (pip install cfn-lint==%s); .ci/run requires it", cfnLintVersion, cfnLintVersion)
	}
	dir := t.TempDir()
	var files []string
	for _, v := range nagVariants {
		stack, err := synthWithNag(t, v)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		src := filepath.Join(*awscdk.Stage_Of(stack.Stack).Outdir(), *stack.TemplateFile())
		body, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, v.name+".template.json")
		if err := os.WriteFile(dst, body, 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, dst)
	}
	broken := filepath.Join(dir, "broken.template.json")
	writeBrokenTemplate(t, files[0], broken)

	cmd := exec.Command(lint, append([]string{"--format", "json"}, append(files, broken)...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		t.Fatalf("run cfn-lint: %v", runErr)
	}
	var findings []cfnLintFinding
	if err := json.Unmarshal(stdout.Bytes(), &findings); err != nil {
		t.Fatalf("cfn-lint printed no JSON findings (%v): %s\n%s", err, stdout.String(), stderr.String())
	}

	seen := make([]int, len(explainedWarnings))
	brokenErrors, real := 0, 0
	for _, f := range findings {
		if filepath.Base(f.Filename) == filepath.Base(broken) {
			if f.Level == "Error" {
				brokenErrors++
			}
			continue
		}
		real++
		if f.Level == "Error" {
			t.Errorf("cfn-lint error: %s", f)
			continue
		}
		explained := false
		for i, e := range explainedWarnings {
			if f.Rule.Id == e.rule && e.message.MatchString(f.Message) {
				seen[i]++
				explained = true
				break
			}
		}
		if !explained {
			t.Errorf("cfn-lint %s nobody explained (fix it, or add it to explainedWarnings with the reason): %s", strings.ToLower(f.Level), f)
		}
	}
	for i, e := range explainedWarnings {
		if seen[i] == 0 {
			t.Errorf("explained warning %s (%s) no longer occurs: remove it", e.rule, e.message)
		}
	}
	if brokenErrors == 0 {
		t.Errorf("cfn-lint found no error in a template whose function runtime does not exist; its findings: %s", stdout.String())
	}
	t.Logf("cfn-lint over %d templates: %d findings on the real ones, all explained", len(files), real)
}

// writeBrokenTemplate copies the template at src to dst with the first Lambda function's runtime
// replaced by one that does not exist.
func writeBrokenTemplate(t *testing.T, src, dst string) {
	t.Helper()
	body, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var tpl map[string]any
	if err := json.Unmarshal(body, &tpl); err != nil {
		t.Fatal(err)
	}
	resources, _ := tpl["Resources"].(map[string]any)
	broken := false
	for _, r := range resources {
		res, _ := r.(map[string]any)
		if res["Type"] == "AWS::Lambda::Function" {
			res["Properties"].(map[string]any)["Runtime"] = "no-such-runtime"
			broken = true
			break
		}
	}
	if !broken {
		t.Fatal("the template has no Lambda function to break")
	}
	out, err := json.Marshal(tpl)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, out, 0o600); err != nil {
		t.Fatal(err)
	}
}
