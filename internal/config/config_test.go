package config

import (
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/topology"
)

func TestLoadReportsEveryMissingVariableOfEveryFunction(t *testing.T) {
	t.Parallel()
	for _, f := range topology.App.Functions {
		_, err := Load(f.Name, func(string) string { return "" })
		if err == nil {
			t.Fatalf("%s: loaded without configuration", f.Name)
		}
		for _, name := range f.Env {
			if named := strings.Contains(err.Error(), name); named == topology.Optional(name) {
				t.Errorf("%s: %v: names %s = %v, but it is optional = %v", f.Name, err, name, named, topology.Optional(name))
			}
		}
	}
}

func TestLoadReportsEveryProblemTogether(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		topology.EnvTableName: "t", topology.EnvAgentsSecretPrefix: "buyflow/agents/",
		topology.EnvCallerURI: "not a uri", topology.EnvPublicBaseURL: "https://api.example/?q=1",
		topology.EnvRunConfig: `{"poll_max_seconds":-1}`,
	}
	env[topology.EnvTableName] = " "
	_, err := Load("create", func(k string) string { return env[k] })
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{topology.EnvCallerURI, topology.EnvPublicBaseURL, "missing environment variables: " + topology.EnvTableName} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	// create does not declare the run configuration: a bad one is not its problem.
	if strings.Contains(err.Error(), topology.EnvRunConfig) {
		t.Errorf("%q names a variable create does not read", err)
	}
	env[topology.EnvTableName] = "t"
	_, err = Load("webhook", func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), topology.EnvRunConfig) {
		t.Errorf("webhook: err = %v, want the run configuration refused", err)
	}
	env[topology.EnvRunConfig] = `{"poll_max_secs":60}`
	if _, err = Load("webhook", func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("webhook: err = %v, want an unknown run configuration field refused", err)
	}
}

func TestLoadReadsOnlyWhatTopologyDeclares(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		topology.EnvTableName: " ledger ", topology.EnvOperators: `["arn:aws:iam::111122223333:role/Ops"]`, topology.EnvAgentsSecretPrefix: "buyflow/agents/",
		topology.EnvCallerURI: "https://buyflow.example/agent", topology.EnvPublicBaseURL: "https://api.example/",
		topology.EnvStateMachineARN: "arn:aws:states:us-east-1:123456789012:stateMachine:MediaBuy",
		topology.EnvRunConfig:       `{"poll_max_seconds":120}`, topology.EnvSlackSecret: "slack", topology.EnvRouteKeySecret: "route-key",
	}
	got, err := Load("create", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if got.TableName != "ledger" || got.PublicBaseURL != "https://api.example" || got.CallerURI != env[topology.EnvCallerURI] ||
		got.Operators != nil || got.AgentSecretPrefix != "buyflow/agents/" || got.RouteKeySecret != "route-key" {
		t.Errorf("create = %+v", got)
	}
	// Only the agents function reads the operators.
	if got, err := Load("agents", func(k string) string { return env[k] }); err != nil || len(got.Operators) != 1 || got.Operators[0] != "arn:aws:iam::111122223333:role/Ops" {
		t.Errorf("agents = %+v, %v", got, err)
	}
	// create declares neither the state machine, the Slack secret nor the run configuration.
	if got.StateMachineARN != "" || got.SlackSecret != "" || got.Run.PollMaxSeconds == 120 {
		t.Errorf("create read variables it does not declare: %+v", got)
	}
	got, err = Load("webhook", func(k string) string { return env[k] })
	if err != nil || got.Run.PollMaxSeconds != 120 || got.Run.PollInitialSeconds == 0 {
		t.Errorf("webhook = %+v, %v; want the defaults with poll_max_seconds 120", got.Run, err)
	}
	if _, err := Load("nobody", func(string) string { return "x" }); err == nil {
		t.Error("a function outside the topology loaded")
	}
}

func TestEveryDeclaredVariableIsKnown(t *testing.T) {
	t.Parallel()
	for _, f := range topology.App.Functions {
		for _, name := range f.Env {
			var e Env
			if err := e.set(name, "x"); err != nil && strings.Contains(err.Error(), "does not know it") {
				t.Errorf("%s declares %s, which Load cannot read", f.Name, name)
			}
		}
	}
}

// The approval policy is parsed once, by Load, with the parser infra validates the context
// value with: a bad one is reported together with every other problem, a good one is typed.
func TestLoadParsesTheApprovalPolicyWithTheOtherProblems(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		topology.EnvLinkKeySecret: "k", topology.EnvSlackSecret: "s", topology.EnvPublicBaseURL: "ftp://api.example",
		topology.EnvApprovalPolicy: `{"threshold":"1e6","currency":"USD","approvers":[]}`,
	}
	got, err := Load("notify", func(k string) string { return env[k] })
	if err == nil {
		t.Fatal("loaded a bad policy")
	}
	for _, want := range []string{"missing environment variables: " + topology.EnvTableName, topology.EnvPublicBaseURL,
		topology.EnvApprovalPolicy + ": approvalpolicy: ", `threshold "1e6"`, "approvers must list"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	if got.ApprovalPolicy.Approvers != nil || got.LinkKeySecret != "k" {
		t.Errorf("with an error, Env = %+v: want the well-formed values and no policy", got)
	}

	env[topology.EnvTableName], env[topology.EnvPublicBaseURL] = "t", "https://api.example"
	env[topology.EnvApprovalPolicy] = `{"threshold":"10000.00","currency":"usd","approvers":["U1"],"on_timeout":"escalate","escalation_approvers":["U9"]}`
	got, err = Load("notify", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	p := got.ApprovalPolicy
	if p.Currency != "USD" || p.OnTimeout != approvalpolicy.TimeoutEscalate || len(p.Approvers) != 1 || p.ChangeIncreaseThreshold != "10000.00" {
		t.Errorf("policy = %+v", p)
	}
	if needs, _ := p.Needs("10000.00", "USD"); !needs {
		t.Error("the parsed policy does not hold its threshold")
	}
	// create does not read the policy: a bad one is not its problem.
	env[topology.EnvApprovalPolicy] = `{`
	if got, err := Load("create", func(k string) string { return env[k] }); err != nil && strings.Contains(err.Error(), topology.EnvApprovalPolicy) ||
		got.ApprovalPolicy.Approvers != nil {
		t.Errorf("create: %+v, %v", got.ApprovalPolicy, err)
	}
}
