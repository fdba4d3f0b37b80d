package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/topology"
)

// sandboxed reports whether a template resource belongs to the sandbox: a Function URL, a
// function or secret the sandbox describes, anything that names a sandbox function.
func sandboxed(id string, r map[string]any) bool {
	if r["Type"] == "AWS::Lambda::Url" {
		return true
	}
	for _, s := range topology.Sandbox {
		if strings.HasPrefix(id, topology.ConstructID(s.Name)) {
			return true
		}
	}
	return strings.HasPrefix(id, "Sandbox")
}

// The production template has none of the sandbox: no simulated agent's function, no Function
// URL, no sandbox secret, no sandbox agent in the seed; every function in it is topology.App's.
func TestProductionHasNoSandbox(t *testing.T) {
	for _, s := range []synthesized{prod(t), synth(t, variant{app: topology.App, extra: map[string]any{CtxSandbox: "false",
		CtxAgents: `{"agents":[{"id":"seller1","role":"seller","mcp_url":"https://seller.example/mcp","credential_ref":"Buyflow/agents/seller1",` +
			`"webhook":{"mode":"hmac","hmac_secret_ref":"Buyflow/agents/seller1-webhook"}}]}`}})} {
		for id, r := range s.resources() {
			if sandboxed(id, r) {
				t.Errorf("the production template has the sandbox's %s (%s)", id, r["Type"])
			}
		}
		if n, want := len(s.ofType("AWS::Lambda::Function")), len(topology.App.Functions); n != want {
			t.Errorf("%d functions, want topology.App's %d", n, want)
		}
		raw, _ := json.Marshal(s.tpl)
		for _, sb := range topology.Sandbox {
			if strings.Contains(string(raw), sb.Agent) || strings.Contains(string(raw), sb.Description) {
				t.Errorf("the production template mentions the sandbox's %s", sb.Agent)
			}
		}
	}
}

// With buyflow:sandbox the simulated agents are functions behind public Function URLs (they
// check the bearer token themselves), read their token from the secret buyflow reads as their
// credential (under the agents' prefix), and the deploy's seed registers them next to the
// context's agents, their URLs resolved by CloudFormation.
func TestSandboxDeploysAndRegistersTheAgents(t *testing.T) {
	s := synth(t, variant{app: topology.App, extra: map[string]any{CtxSandbox: "true",
		CtxAgents: `{"agents":[{"id":"seller1","role":"seller","mcp_url":"https://seller.example/mcp","credential_ref":"Buyflow/agents/seller1",` +
			`"webhook":{"mode":"hmac","hmac_secret_ref":"Buyflow/agents/seller1-webhook"}}]}`}})
	urls := s.ofType("AWS::Lambda::Url")
	if len(urls) != len(topology.Sandbox) {
		t.Fatalf("%d Function URLs, want one per sandbox agent (%d)", len(urls), len(topology.Sandbox))
	}
	urlOf := map[string]string{} // function logical id → its URL's logical id
	for id, u := range urls {
		if props(u)["AuthType"] != "NONE" {
			t.Errorf("Function URL %s: AuthType %v, want NONE (the agent checks its bearer token)", id, props(u)["AuthType"])
		}
		target, _ := props(u)["TargetFunctionArn"].(map[string]any)
		ga, _ := target["Fn::GetAtt"].([]any)
		if len(ga) == 0 {
			t.Fatalf("Function URL %s targets %v", id, props(u)["TargetFunctionArn"])
		}
		urlOf[ga[0].(string)] = id
	}
	secretNames := map[string]bool{}
	for _, sec := range s.ofType("AWS::SecretsManager::Secret") {
		name, _ := props(sec)["Name"].(string)
		secretNames[name] = true
	}
	// secretName is the name an environment value gives, when the stack has that secret.
	secretName := func(v any) string {
		if name, _ := v.(string); secretNames[name] {
			return name
		}
		return ""
	}
	seed := props(s.ofType("AWS::CloudFormation::CustomResource")["AgentsSeed"])
	if seed == nil {
		for id, r := range s.resources() {
			if strings.HasPrefix(id, "AgentsSeed") {
				seed = props(r)
			}
		}
	}
	seedJSON, _ := json.Marshal(seed)
	if !strings.Contains(string(seedJSON), `\"id\":\"seller1\"`) {
		t.Errorf("the seed lost the context's agents: %s", seedJSON)
	}
	for _, sb := range topology.Sandbox {
		fid := ""
		for id := range s.ofType("AWS::Lambda::Function") {
			if strings.HasPrefix(id, topology.ConstructID(sb.Name)+"Function") {
				fid = id
			}
		}
		if fid == "" || urlOf[fid] == "" {
			t.Fatalf("sandbox function %s: function %q, URL %q", sb.Name, fid, urlOf[fid])
		}
		env, _ := props(s.resources()[fid])["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		if got := secretName(vars[topology.EnvSandboxTokenSecret]); got != "Buyflow/agents/"+sb.Agent {
			t.Errorf("%s reads its token from %q, want Buyflow/agents/%s (buyflow's credential for it)", sb.Name, got, sb.Agent)
		}
		if sb.Role == "seller" && secretName(vars[topology.EnvSandboxWebhookKeySecret]) != "Buyflow/sandbox/webhook-key-seed" {
			t.Errorf("%s: webhook key secret %v", sb.Name, vars[topology.EnvSandboxWebhookKeySecret])
		}
		for _, want := range []string{`\"id\":\"` + sb.Agent + `\"`, `\"credential_ref\":\"Buyflow/agents/` + sb.Agent + `\"`, `"` + urlOf[fid] + `","FunctionUrl"`} {
			if !strings.Contains(string(seedJSON), want) {
				t.Errorf("the seed does not register %s with %s: %s", sb.Agent, want, seedJSON)
			}
		}
	}
	if !strings.Contains(string(seedJSON), `\"jwks_uri\":\"`) {
		t.Errorf("the sandbox seller is registered without its JWKS: %s", seedJSON)
	}
	// The status events of buys at the sandbox seller go to the sandbox's queue, which smoke
	// reads (--events SandboxEventsQueueUrl).
	rule := props(s.resources()[onlyID(t, s, "AWS::Events::Rule", "SandboxEventsRule")])
	pattern, _ := json.Marshal(rule["EventPattern"])
	targets, _ := json.Marshal(rule["Targets"])
	if !strings.Contains(string(pattern), `"seller_id":["sandbox-seller"]`) || !strings.Contains(string(targets), onlyID(t, s, "AWS::SQS::Queue", "SandboxEvents")) {
		t.Errorf("the sandbox's events rule: pattern %s, targets %s", pattern, targets)
	}
	if _, ok := s.tpl["Outputs"].(map[string]any)["SandboxEventsQueueUrl"]; !ok {
		t.Error("no SandboxEventsQueueUrl output")
	}
	// Only the sandbox functions are added, and the application's functions are unchanged.
	if n, want := len(s.ofType("AWS::Lambda::Function")), len(topology.App.Functions)+len(topology.Sandbox); n != want {
		t.Errorf("%d functions, want %d", n, want)
	}
}

func TestSandboxIdsAreNotTheContextsToTake(t *testing.T) {
	_, err := trySynth(t, variant{app: topology.App, extra: map[string]any{CtxSandbox: "true",
		CtxAgents: `{"agents":[{"id":"sandbox-seller","role":"seller","mcp_url":"https://seller.example/mcp","credential_ref":"Buyflow/agents/sandbox-seller",` +
			`"webhook":{"mode":"hmac","hmac_secret_ref":"Buyflow/agents/s-webhook"}}]}`}})
	if err == nil || !strings.Contains(err.Error(), "sandbox-seller") {
		t.Errorf("a context agent with the sandbox's id: %v, want a refusal naming it", err)
	}
}

// onlyID is the logical id of the one resource of typ whose id starts with prefix.
func onlyID(t *testing.T, s synthesized, typ, prefix string) string {
	t.Helper()
	var ids []string
	for id := range s.ofType(typ) {
		if strings.HasPrefix(id, prefix) {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("%d %s resources named %s*: %v", len(ids), typ, prefix, ids)
	}
	return ids[0]
}
