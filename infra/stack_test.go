package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/jsii-runtime-go"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/statemachine"
)

// TestMain runs the tests only where Node.js is: jsii runs aws-cdk-lib in node, and the first
// jsii call without it panics. So no jsii call may run before this check (no package-level
// variable built with jsii). Without node the package is skipped, unless BUYFLOW_NODE_TESTS=1
// (make test) says the Node-backed tests must run.
func TestMain(m *testing.M) {
	if err := os.Setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("BUYFLOW_NODE_TESTS") == "1" {
			fmt.Fprintln(os.Stderr, "BUYFLOW_NODE_TESTS=1 but the CDK tests cannot run: jsii needs Node.js on PATH:", err)
			os.Exit(1)
		}
		fmt.Println("infra: skipped: the CDK tests need Node.js on PATH (jsii runs aws-cdk-lib in node); make test requires it")
		os.Exit(0)
	}
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// synthesized is one synthesized stack: the constructs and the template as JSON.
type synthesized struct {
	stack *BuyflowStack
	tpl   map[string]any
}

func (s synthesized) resources() map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.tpl["Resources"].(map[string]any) {
		out[id] = r.(map[string]any)
	}
	return out
}

func (s synthesized) ofType(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.resources() {
		if r["Type"] == typ {
			out[id] = r
		}
	}
	return out
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// logicalID resolves a token that renders as {"Ref": id} or {"Fn::GetAtt": [id, attr]}.
func (s synthesized) logicalID(t *testing.T, token *string) string {
	t.Helper()
	v := s.stack.Resolve(token)
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("token resolves to %v, not a reference", v)
	}
	if ref, ok := m["Ref"].(string); ok {
		return ref
	}
	if ga, ok := m["Fn::GetAtt"].([]any); ok {
		return ga[0].(string)
	}
	t.Fatalf("token resolves to %v, not a Ref or GetAtt", v)
	return ""
}

// cdkContext is cdk.json's context: the feature flags the real app runs with.
func cdkContext(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("cdk.json: %v", err)
	}
	if len(cfg.Context) < 50 {
		t.Fatalf("cdk.json has %d context entries: the recommended feature flags are missing", len(cfg.Context))
	}
	return cfg.Context
}

// fakeAssets writes <dir>/<name>/bootstrap for every function of app and of the sandbox.
func fakeAssets(t *testing.T, app topology.Application) string {
	t.Helper()
	dir := t.TempDir()
	all := slices.Clone(app.Functions)
	for _, s := range topology.Sandbox {
		all = append(all, s.Function)
	}
	for _, f := range all {
		if err := os.MkdirAll(filepath.Join(dir, f.Name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name, "bootstrap"), []byte("not a real binary: "+f.Name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type variant struct {
	app   topology.Application
	extra map[string]any // context on top of cdk.json
	// mutate, when set, changes the constructs before synthesis.
	mutate func(*BuyflowStack)
	// rawTemplate turns off the cycle check of the assertions library, for the test that
	// proves this file's own check.
	rawTemplate bool
}

// synth builds the stack for v the way main does: context from cdk.json (+ extra),
// ConfigFromContext, statemachine.Definition, assets from a temp dir.
func synth(t *testing.T, v variant) synthesized {
	t.Helper()
	s, err := trySynth(t, v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func trySynth(t *testing.T, v variant) (_ synthesized, err error) {
	t.Helper()
	// jsii turns a JavaScript exception (a failed validation) into a panic.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("synth: %v", r)
		}
	}()
	ctx := cdkContext(t)
	ctx[CtxAssetRoot] = fakeAssets(t, v.app)
	for k, val := range v.extra {
		ctx[k] = val
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx})
	cfg, err := ConfigFromContext(app.Node())
	if err != nil {
		return synthesized{}, err
	}
	stack, err := NewBuyflowStack(app, cfg.StackName, &BuyflowStackProps{App: &v.app, Definition: statemachine.Definition, CampaignDefinition: statemachine.CampaignDefinition, Config: cfg})
	if err != nil {
		return synthesized{}, err
	}
	if v.mutate != nil {
		v.mutate(stack)
	}
	tpl := assertions.Template_FromStack(stack.Stack, &assertions.TemplateParsingOptions{SkipCyclicalDependenciesCheck: jsii.Bool(v.rawTemplate)})
	return synthesized{stack: stack, tpl: *tpl.ToJSON()}, nil
}

var (
	defaultOnce  sync.Once
	defaultSynth synthesized
	defaultErr   error
)

// prod is the default (production) stack of topology.App, synthesized once.
func prod(t *testing.T) synthesized {
	t.Helper()
	defaultOnce.Do(func() { defaultSynth, defaultErr = trySynth(t, variant{app: topology.App}) })
	if defaultErr != nil {
		t.Fatal(defaultErr)
	}
	return defaultSynth
}

func modify(app topology.Application, name string, change func(*topology.Function)) topology.Application {
	out := app
	out.Functions = slices.Clone(app.Functions)
	for i := range out.Functions {
		if out.Functions[i].Name == name {
			change(&out.Functions[i])
		}
	}
	return out
}

// ---------------------------------------------------------------- table

func TestTableMatchesLedgerSchema(t *testing.T) {
	s := prod(t)
	tables := s.ofType("AWS::DynamoDB::Table")
	if len(tables) != 1 {
		t.Fatalf("%d tables, want 1", len(tables))
	}
	id := s.logicalID(t, s.stack.Table.TableName())
	r := tables[id]
	p := props(r)
	schema := ledger.TableSchema("")

	if p["BillingMode"] != "PAY_PER_REQUEST" {
		t.Errorf("BillingMode = %v", p["BillingMode"])
	}
	if got := jsonOf(t, p["KeySchema"]); got != jsonOf(t, schema.KeySchema) {
		t.Errorf("KeySchema = %s, want %s", got, jsonOf(t, schema.KeySchema))
	}
	if got, want := sortedJSON(t, p["AttributeDefinitions"]), sortedJSON(t, schema.AttributeDefinitions); got != want {
		t.Errorf("AttributeDefinitions = %s, want %s", got, want)
	}
	var gsis []any
	for _, g := range schema.GlobalSecondaryIndexes {
		proj := map[string]any{"ProjectionType": string(g.Projection.ProjectionType)}
		if len(g.Projection.NonKeyAttributes) > 0 {
			proj["NonKeyAttributes"] = g.Projection.NonKeyAttributes
		}
		gsis = append(gsis, map[string]any{"IndexName": *g.IndexName, "KeySchema": g.KeySchema, "Projection": proj})
	}
	if got, want := sortedJSON(t, p["GlobalSecondaryIndexes"]), sortedJSON(t, gsis); got != want {
		t.Errorf("GlobalSecondaryIndexes = %s, want %s", got, want)
	}
	if got := jsonOf(t, p["TimeToLiveSpecification"]); got != jsonOf(t, map[string]any{"AttributeName": ledger.AttrTTL, "Enabled": true}) {
		t.Errorf("TimeToLiveSpecification = %s", got)
	}
	if got := jsonOf(t, p["PointInTimeRecoverySpecification"]); got != `{"PointInTimeRecoveryEnabled":true}` {
		t.Errorf("PointInTimeRecoverySpecification = %s", got)
	}
	if _, ok := p["PointInTimeRecoveryEnabled"]; ok {
		t.Error("uses the deprecated PointInTimeRecoveryEnabled")
	}
	if p["DeletionProtectionEnabled"] != true {
		t.Errorf("DeletionProtectionEnabled = %v, want true", p["DeletionProtectionEnabled"])
	}
	if r["DeletionPolicy"] != "Retain" || r["UpdateReplacePolicy"] != "Retain" {
		t.Errorf("DeletionPolicy/UpdateReplacePolicy = %v/%v, want Retain", r["DeletionPolicy"], r["UpdateReplacePolicy"])
	}
}

func TestDevStackIsDisposable(t *testing.T) {
	s := synth(t, variant{app: topology.App, extra: map[string]any{CtxDev: "true", CtxStackName: "BuyflowDev"}})
	for id, r := range s.resources() {
		switch r["Type"] {
		case "AWS::DynamoDB::Table":
			if props(r)["DeletionProtectionEnabled"] != false {
				t.Errorf("%s: DeletionProtectionEnabled = %v in a dev stack", id, props(r)["DeletionProtectionEnabled"])
			}
			fallthrough
		case "AWS::SecretsManager::Secret", "AWS::Logs::LogGroup":
			if r["DeletionPolicy"] != "Delete" {
				t.Errorf("%s (%s): DeletionPolicy = %v in a dev stack", id, r["Type"], r["DeletionPolicy"])
			}
		case "AWS::StepFunctions::StateMachine":
			if n := props(r)["StateMachineName"]; n != "BuyflowDev-"+topology.App.StateMachineName && n != "BuyflowDev-"+topology.App.CampaignStateMachineName {
				t.Errorf("state machine name %v: not prefixed by the stack name", props(r)["StateMachineName"])
			}
		}
	}
}

func TestTracingIsOptional(t *testing.T) {
	off := synth(t, variant{app: topology.App, extra: map[string]any{CtxTracing: "false"}})
	for name, c := range map[string]struct {
		s    synthesized
		want bool
	}{"default": {prod(t), true}, "buyflow:tracing=false": {off, false}} {
		for id, r := range c.s.ofType("AWS::Lambda::Function") {
			tc, _ := props(r)["TracingConfig"].(map[string]any)
			if got := tc["Mode"] == "Active"; got != c.want {
				t.Errorf("%s: %s TracingConfig %v", name, id, tc)
			}
		}
		for id, r := range c.s.ofType("AWS::StepFunctions::StateMachine") {
			tc, _ := props(r)["TracingConfiguration"].(map[string]any)
			if got := tc["Enabled"] == true; got != c.want {
				t.Errorf("%s: %s TracingConfiguration %v", name, id, tc)
			}
		}
	}
	checkLeastPrivilege(t, off, topology.App)
	checkNoCycle(t, off, topology.App)
}

// What `cdk destroy` keeps of a production stack is exactly the data (docs/cloud-team.md): the
// ledger table, the secrets and the log groups; everything else goes with the stack.
func TestProdStackRetainsData(t *testing.T) {
	s := prod(t)
	// The request-signing key too: sellers hold its public half, and a KMS key once deleted
	// cannot be brought back (a redeploy makes a new key; the old one is deleted by hand).
	kept := []string{"AWS::DynamoDB::Table", "AWS::SecretsManager::Secret", "AWS::Logs::LogGroup", "AWS::KMS::Key"}
	for id, r := range s.resources() {
		typ, _ := r["Type"].(string)
		if retained := r["DeletionPolicy"] == "Retain"; retained != slices.Contains(kept, typ) {
			t.Errorf("%s (%s): DeletionPolicy = %v; a destroy keeps exactly the %v", id, typ, r["DeletionPolicy"], kept)
		}
	}
}

// A second synth with nothing changed is the same template, byte for byte: the closest local
// stand-in for an empty `cdk diff` after a deploy (asset hashes are of the bootstraps' content,
// wherever they are; no timestamp or random name anywhere), so a second deploy changes nothing.
func TestSecondSynthIsIdentical(t *testing.T) {
	first, second := synth(t, variant{app: topology.App}), synth(t, variant{app: topology.App})
	if a, b := jsonOf(t, first.tpl), jsonOf(t, second.tpl); a != b {
		one, two := first.resources(), second.resources()
		for _, id := range slices.Sorted(maps.Keys(one)) {
			if jsonOf(t, one[id]) != jsonOf(t, two[id]) {
				t.Errorf("resource %s differs between two synths:\n%s\n%s", id, jsonOf(t, one[id]), jsonOf(t, two[id]))
			}
		}
		t.Fatalf("two synths of the same app differ (%d and %d bytes)", len(a), len(b))
	}
}

// ---------------------------------------------------------------- functions

func TestFunctionsMatchTopology(t *testing.T) {
	s := prod(t)
	lambdas := s.ofType("AWS::Lambda::Function")
	if len(lambdas) != len(topology.App.Functions) {
		t.Errorf("%d Lambda functions, topology has %d", len(lambdas), len(topology.App.Functions))
	}
	logGroups := s.ofType("AWS::Logs::LogGroup")
	for _, f := range topology.App.Functions {
		t.Run(f.Name, func(t *testing.T) {
			fn, ok := s.stack.Functions[f.Name]
			if !ok {
				t.Fatal("not built")
			}
			p := props(lambdas[s.logicalID(t, fn.FunctionArn())])
			if jsonOf(t, p["Architectures"]) != `["arm64"]` || p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" {
				t.Errorf("Architectures %v, Runtime %v, Handler %v", p["Architectures"], p["Runtime"], p["Handler"])
			}
			if p["MemorySize"] != float64(f.MemoryMB) || p["Timeout"] != float64(f.TimeoutSeconds) {
				t.Errorf("MemorySize %v, Timeout %v, want %d, %d", p["MemorySize"], p["Timeout"], f.MemoryMB, f.TimeoutSeconds)
			}
			lc, _ := p["LoggingConfig"].(map[string]any)
			if lc["LogFormat"] != "JSON" {
				t.Errorf("LoggingConfig = %v, want LogFormat JSON", lc)
			}
			if ref, _ := lc["LogGroup"].(map[string]any); ref == nil || logGroups[fmt.Sprint(ref["Ref"])] == nil {
				t.Errorf("LoggingConfig.LogGroup = %v, want a Ref to a log group of the stack", lc["LogGroup"])
			} else if props(logGroups[ref["Ref"].(string)])["RetentionInDays"] == nil {
				t.Errorf("log group %v has no retention", ref["Ref"])
			}
			var got []string
			if env, ok := p["Environment"].(map[string]any); ok {
				for k := range env["Variables"].(map[string]any) {
					got = append(got, k)
				}
			}
			var want []string
			for _, e := range f.Env {
				if e != topology.EnvLocalTenantHeader {
					want = append(want, e)
				}
			}
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("environment %v, want %v", got, want)
			}
		})
	}
}

// The dev-only tenant header would let a caller pick its tenant: no deployed function has it,
// even when every function of the topology asks for it.
func TestDevTenantHeaderIsNeverSet(t *testing.T) {
	app := topology.App
	app.Functions = slices.Clone(app.Functions)
	for i := range app.Functions {
		app.Functions[i].Env = append(slices.Clone(app.Functions[i].Env), topology.EnvLocalTenantHeader)
	}
	for name, s := range map[string]synthesized{"topology.App": prod(t), "every function asks": synth(t, variant{app: app})} {
		for id, r := range s.ofType("AWS::Lambda::Function") {
			env, _ := props(r)["Environment"].(map[string]any)
			vars, _ := env["Variables"].(map[string]any)
			if _, ok := vars[topology.EnvLocalTenantHeader]; ok {
				t.Errorf("%s: %s sets %s", name, id, topology.EnvLocalTenantHeader)
			}
		}
	}
}

// The state machine ARN handed to functions is built from the fixed name, never a reference to
// the state machine resource.
func TestStateMachineArnEnvIsBuiltFromTheName(t *testing.T) {
	s := prod(t)
	smID := s.logicalID(t, s.stack.StateMachine.StateMachineArn())
	for _, f := range topology.App.Functions {
		if !slices.Contains(f.Env, topology.EnvStateMachineARN) {
			continue
		}
		fn := s.resources()[s.logicalID(t, s.stack.Functions[f.Name].FunctionArn())]
		v := props(fn)["Environment"].(map[string]any)["Variables"].(map[string]any)[topology.EnvStateMachineARN]
		raw := jsonOf(t, v)
		if strings.Contains(raw, smID) {
			t.Errorf("%s: %s references the state machine: %s", f.Name, topology.EnvStateMachineARN, raw)
		}
		if !strings.Contains(raw, ":stateMachine:Buyflow-"+topology.App.StateMachineName) {
			t.Errorf("%s: %s = %s, want the ARN of Buyflow-%s", f.Name, topology.EnvStateMachineARN, raw, topology.App.StateMachineName)
		}
	}
}

func TestMissingBootstrapIsAClearError(t *testing.T) {
	ctx := cdkContext(t)
	root := fakeAssets(t, topology.App)
	if err := os.Remove(filepath.Join(root, "poll", "bootstrap")); err != nil {
		t.Fatal(err)
	}
	ctx[CtxAssetRoot] = root
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx})
	cfg, err := ConfigFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewBuyflowStack(app, "Buyflow", &BuyflowStackProps{App: &topology.App, Definition: statemachine.Definition, CampaignDefinition: statemachine.CampaignDefinition, Config: cfg})
	if err == nil || !strings.Contains(err.Error(), "poll") || !strings.Contains(err.Error(), CtxAssetRoot) {
		t.Errorf("err = %v, want one naming poll and %s", err, CtxAssetRoot)
	}
}

// ---------------------------------------------------------------- state machine

func TestStateMachine(t *testing.T) {
	s := prod(t)
	sms := s.ofType("AWS::StepFunctions::StateMachine")
	if len(sms) != 2 {
		t.Fatalf("%d state machines, want 2 (MediaBuy, Campaign)", len(sms))
	}
	for _, m := range []struct {
		sm           awsstepfunctions.StateMachine
		name, def    string
		placeholders []string
	}{
		{s.stack.StateMachine, topology.App.StateMachineName, statemachine.Definition, statemachine.Placeholders},
		{s.stack.CampaignStateMachine, topology.App.CampaignStateMachineName, statemachine.CampaignDefinition, statemachine.CampaignPlaceholders},
	} {
		p := props(sms[s.logicalID(t, m.sm.StateMachineArn())])
		if p["StateMachineType"] != "STANDARD" {
			t.Errorf("%s: StateMachineType = %v", m.name, p["StateMachineType"])
		}
		if p["StateMachineName"] != "Buyflow-"+m.name {
			t.Errorf("StateMachineName = %v, want Buyflow-%s", p["StateMachineName"], m.name)
		}
		if p["DefinitionString"] != m.def {
			t.Errorf("%s: DefinitionString is not the embedded definition verbatim", m.name)
		}
		subs, _ := p["DefinitionSubstitutions"].(map[string]any)
		var keys []string
		for k := range subs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		want := slices.Sorted(slices.Values(m.placeholders))
		if !slices.Equal(keys, want) {
			t.Errorf("%s: DefinitionSubstitutions %v, placeholders %v", m.name, keys, want)
		}
		if used := statemachine.Used(m.def); !slices.Equal(used, want) {
			t.Errorf("%s: the definition uses %v, its placeholders list says %v", m.name, used, want)
		}
		for _, f := range topology.App.Functions {
			if f.Placeholder == "" || !slices.Contains(want, f.Placeholder) {
				continue
			}
			if got, want := jsonOf(t, subs[f.Placeholder]), jsonOf(t, s.stack.Resolve(s.stack.Functions[f.Name].FunctionArn())); got != want {
				t.Errorf("%s: %s = %s, want %s's ARN %s", m.name, f.Placeholder, got, f.Name, want)
			}
		}
		lc, _ := p["LoggingConfiguration"].(map[string]any)
		if lc["Level"] != "ALL" || lc["IncludeExecutionData"] != false {
			t.Errorf("%s: LoggingConfiguration = %v, want Level ALL, IncludeExecutionData false", m.name, lc)
		}
	}
	// Every function with a placeholder is invoked by one of the two.
	for _, f := range topology.App.Functions {
		if f.Placeholder != "" && !slices.Contains(statemachine.Placeholders, f.Placeholder) && !slices.Contains(statemachine.CampaignPlaceholders, f.Placeholder) {
			t.Errorf("function %s's placeholder %s is in neither definition", f.Name, f.Placeholder)
		}
	}
}

func TestDefinitionValidation(t *testing.T) {
	if err := validate(topology.App, statemachine.Definition, "Buyflow", DefaultConfig()); err != nil {
		t.Errorf("statemachine.Definition: %v", err)
	}
	bad := strings.Replace(statemachine.Definition, "${PollFunctionArn}", "${ReconcileFunctionArn}", 1)
	if err := validate(topology.App, bad, "Buyflow", DefaultConfig()); err == nil || !strings.Contains(err.Error(), "ReconcileFunctionArn") {
		t.Errorf("unknown placeholder: err = %v", err)
	}
	sqs := strings.Replace(statemachine.Definition, "arn:aws:states:::lambda:invoke", "arn:aws:states:::sqs:sendMessage", 1)
	if err := validate(topology.App, sqs, "Buyflow", DefaultConfig()); err == nil || !strings.Contains(err.Error(), "sqs:sendMessage") {
		t.Errorf("ungranted task resource: err = %v", err)
	}
	if err := validate(topology.App, statemachine.Definition, strings.Repeat("x", 80), DefaultConfig()); err == nil {
		t.Error("an 80-character stack name passed")
	}
}

// ---------------------------------------------------------------- API

func TestRoutesMatchTopology(t *testing.T) {
	s := prod(t)
	routes := s.ofType("AWS::ApiGatewayV2::Route")
	integrations := s.ofType("AWS::ApiGatewayV2::Integration")
	if len(routes) != len(topology.App.Routes) {
		t.Errorf("%d routes, topology has %d", len(routes), len(topology.App.Routes))
	}
	byKey := map[string]map[string]any{}
	for _, r := range routes {
		byKey[fmt.Sprint(props(r)["RouteKey"])] = props(r)
	}
	for _, want := range topology.App.Routes {
		key := want.Key()
		p, ok := byKey[key]
		if !ok {
			t.Errorf("route %s missing", key)
			continue
		}
		auth := p["AuthorizationType"]
		switch want.Auth {
		case topology.AuthIAM:
			if auth != "AWS_IAM" {
				t.Errorf("%s: AuthorizationType %v, want AWS_IAM", key, auth)
			}
		case topology.AuthSignature, topology.AuthNone, topology.AuthPublic:
			if auth != nil && auth != "NONE" {
				t.Errorf("%s: AuthorizationType %v, want NONE", key, auth)
			}
		}
		// Target: "integrations/<Ref integration>"; the integration's URI is the function's ARN.
		target := jsonOf(t, p["Target"])
		fnID := s.logicalID(t, s.stack.Functions[want.Function].FunctionArn())
		found := false
		for id, integ := range integrations {
			if strings.Contains(target, `"`+id+`"`) && strings.Contains(jsonOf(t, props(integ)["IntegrationUri"]), `"`+fnID+`"`) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: target %s is not an integration of %s", key, target, want.Function)
		}
	}
}

func TestStageThrottlingAndAccessLogs(t *testing.T) {
	s := prod(t)
	stages := s.ofType("AWS::ApiGatewayV2::Stage")
	if len(stages) != 1 {
		t.Fatalf("%d stages, want 1", len(stages))
	}
	for _, st := range stages {
		p := props(st)
		rs, _ := p["DefaultRouteSettings"].(map[string]any)
		if rs["ThrottlingRateLimit"] != float64(50) || rs["ThrottlingBurstLimit"] != float64(100) {
			t.Errorf("DefaultRouteSettings = %v", rs)
		}
		al, _ := p["AccessLogSettings"].(map[string]any)
		if al["DestinationArn"] == nil {
			t.Errorf("AccessLogSettings = %v", al)
		}
		format := fmt.Sprint(al["Format"])
		if !json.Valid([]byte(format)) || !strings.Contains(format, "$context.requestId") {
			t.Errorf("access log format %s", format)
		}
		// Approval links carry their signature in the query string.
		for _, leak := range []string{"querystring", "$context.path", "$context.identity.clientCert"} {
			if strings.Contains(strings.ToLower(format), strings.ToLower(leak)) {
				t.Errorf("access log format logs %s", leak)
			}
		}
	}
}

// ---------------------------------------------------------------- IAM

// wildcardResourceActions may be granted on "*": the task-token callbacks (no resource-level
// permissions exist for them), the log-delivery actions Step Functions logging needs, and X-Ray.
func wildcardResourceAllowed(action string) bool {
	return slices.Contains(SendTaskActions, action) ||
		strings.HasPrefix(action, "xray:") || action == "dynamodb:ListStreams" ||
		slices.Contains([]string{
			"logs:CreateLogDelivery", "logs:DeleteLogDelivery", "logs:DescribeLogGroups", "logs:DescribeResourcePolicies",
			"logs:GetLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:UpdateLogDelivery",
		}, action)
}

type statement struct {
	actions   []string
	resources []any
	raw       string
}

// grantsByRole returns the statements of every inline policy, by role logical id.
func (s synthesized) grantsByRole(t *testing.T) map[string][]statement {
	t.Helper()
	out := map[string][]statement{}
	for id, pol := range s.ofType("AWS::IAM::Policy") {
		p := props(pol)
		doc, _ := p["PolicyDocument"].(map[string]any)
		stmts, _ := doc["Statement"].([]any)
		roles, _ := p["Roles"].([]any)
		if len(roles) == 0 {
			t.Errorf("policy %s attaches to no role", id)
		}
		for _, raw := range stmts {
			st := raw.(map[string]any)
			if st["Effect"] != "Allow" {
				continue
			}
			var one statement
			one.raw = jsonOf(t, st)
			switch a := st["Action"].(type) {
			case string:
				one.actions = []string{a}
			case []any:
				for _, x := range a {
					one.actions = append(one.actions, x.(string))
				}
			}
			if rs, ok := st["Resource"].([]any); ok {
				one.resources = rs
			} else {
				one.resources = []any{st["Resource"]}
			}
			if st["NotAction"] != nil || st["NotResource"] != nil {
				t.Errorf("policy %s uses NotAction/NotResource: %s", id, one.raw)
			}
			for _, r := range roles {
				ref, _ := r.(map[string]any)
				out[fmt.Sprint(ref["Ref"])] = append(out[fmt.Sprint(ref["Ref"])], one)
			}
		}
	}
	return out
}

func (s synthesized) roleOf(t *testing.T, name string) string {
	t.Helper()
	return s.logicalID(t, s.stack.Functions[name].Role().RoleArn())
}

func actionsOf(stmts []statement) []string {
	var out []string
	for _, st := range stmts {
		out = append(out, st.actions...)
	}
	return out
}

func TestIAMIsLeastPrivilege(t *testing.T) {
	s := prod(t)
	checkLeastPrivilege(t, s, topology.App)
}

// A ledger action a role may be granted is one the code can make: the functions reach the
// table only through ledger.API (the registry's store takes a subset of it), which has no
// BatchGetItem, BatchWriteItem or DescribeTable; a transaction's items are IAM's item actions.
func TestLedgerActionsAreCallsTheCodeCanMake(t *testing.T) {
	can := map[string]bool{}
	api := reflect.TypeFor[ledger.API]()
	for i := range api.NumMethod() {
		name := api.Method(i).Name
		if name == "TransactWriteItems" {
			for _, a := range []string{topology.LedgerPut, topology.LedgerUpdate, topology.LedgerDelete, topology.LedgerConditionCheck} {
				can[a] = true
			}
			continue
		}
		can["dynamodb:"+name] = true
	}
	for _, f := range topology.App.Functions {
		for _, a := range f.LedgerActions {
			if !can[a] {
				t.Errorf("%s is granted %s, which ledger.API cannot make", f.Name, a)
			}
		}
		for _, idx := range f.LedgerIndexes {
			if !slices.ContainsFunc(ledger.TableSchema("").GlobalSecondaryIndexes, func(g types.GlobalSecondaryIndex) bool { return *g.IndexName == idx }) {
				t.Errorf("%s queries the index %s, which the ledger does not have", f.Name, idx)
			}
		}
	}
}

func checkLeastPrivilege(t *testing.T, s synthesized, app topology.Application) {
	t.Helper()
	smID := s.logicalID(t, s.stack.StateMachine.StateMachineArn())
	smRole := s.logicalID(t, s.stack.StateMachine.Role().RoleArn())

	for id, r := range s.resources() {
		switch r["Type"] {
		case "AWS::IAM::Role":
			for _, arn := range asSlice(props(r)["ManagedPolicyArns"]) {
				if raw := jsonOf(t, arn); strings.Contains(raw, "FullAccess") || strings.Contains(raw, "AdministratorAccess") || strings.Contains(raw, "PowerUserAccess") {
					t.Errorf("role %s has managed policy %s", id, raw)
				}
			}
			if props(r)["Policies"] != nil {
				t.Errorf("role %s has inline Policies outside AWS::IAM::Policy", id)
			}
		case "AWS::IAM::ManagedPolicy", "AWS::IAM::User", "AWS::IAM::Group":
			t.Errorf("%s is a %s", id, r["Type"])
		}
	}

	byRole := s.grantsByRole(t)
	for role, stmts := range byRole {
		for _, st := range stmts {
			for _, a := range st.actions {
				if strings.Contains(a, "*") {
					t.Errorf("role %s: wildcard action %s", role, a)
				}
			}
			for _, res := range st.resources {
				if res == "*" {
					for _, a := range st.actions {
						if !wildcardResourceAllowed(a) {
							t.Errorf("role %s: %s on *", role, a)
						}
					}
				}
			}
			// StartExecution is granted by the built ARN, never by a reference to the state machine.
			if slices.Contains(st.actions, "states:StartExecution") && strings.Contains(st.raw, `"`+smID+`"`) {
				t.Errorf("role %s: StartExecution references the state machine resource (a cycle): %s", role, st.raw)
			}
		}
	}

	// No managed policy on any role (AWSLambdaBasicExecutionRole's logs actions are on *), no
	// index/* on the ledger, no <function>:* for the state machine.
	for id, r := range s.ofType("AWS::IAM::Role") {
		if arns := asSlice(props(r)["ManagedPolicyArns"]); len(arns) > 0 {
			t.Errorf("role %s has managed policies %s", id, jsonOf(t, arns))
		}
	}
	for role, stmts := range byRole {
		for _, st := range stmts {
			if strings.Contains(st.raw, "/index/*") {
				t.Errorf("role %s: grant on every index: %s", role, st.raw)
			}
			if role == smRole && slices.Contains(st.actions, "lambda:InvokeFunction") && strings.Contains(st.raw, ":*") {
				t.Errorf("state machine may invoke every version and alias: %s", st.raw)
			}
		}
	}

	tableArn := jsonOf(t, s.stack.Resolve(s.stack.Table.TableArn()))
	for _, f := range app.Functions {
		role := s.roleOf(t, f.Name)
		acts := actionsOf(byRole[role])
		has := func(a string) bool { return slices.Contains(acts, a) }
		// The ledger: exactly the declared actions on the table, and Query on the declared
		// indexes; nothing on any other resource of the table.
		var onTable, onIndexes []string
		for _, st := range byRole[role] {
			for _, a := range st.actions {
				if !strings.HasPrefix(a, "dynamodb:") || slices.Contains([]string{"dynamodb:ListStreams", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:DescribeStream"}, a) {
					continue
				}
				for _, res := range st.resources {
					raw := jsonOf(t, res)
					switch {
					case raw == tableArn:
						onTable = append(onTable, a)
					case strings.Contains(raw, "/index/"):
						if a != topology.LedgerQuery {
							t.Errorf("%s may %s on an index: %s", f.Name, a, raw)
						}
						for _, idx := range f.LedgerIndexes {
							if strings.Contains(raw, `"/index/`+idx+`"`) {
								onIndexes = append(onIndexes, idx)
							}
						}
					default:
						t.Errorf("%s may %s on %s", f.Name, a, raw)
					}
				}
			}
		}
		slices.Sort(onTable)
		if want := slices.Sorted(slices.Values(f.LedgerActions)); !slices.Equal(onTable, want) {
			t.Errorf("%s: ledger actions on the table %v, LedgerActions %v", f.Name, onTable, want)
		}
		slices.Sort(onIndexes)
		if want := slices.Sorted(slices.Values(f.LedgerIndexes)); !slices.Equal(onIndexes, want) {
			t.Errorf("%s: queries the indexes %v, LedgerIndexes %v", f.Name, onIndexes, want)
		}
		// Status events: PutEvents on the stack's bus only, to the functions that put them;
		// the stream's reads on the ledger's stream only, to the function it invokes.
		busArn := jsonOf(t, s.stack.Resolve(s.stack.EventBus.EventBusArn()))
		streamArn := jsonOf(t, s.stack.Resolve(s.stack.Table.TableStreamArn()))
		for _, st := range byRole[role] {
			for _, a := range st.actions {
				raw := jsonOf(t, st.resources)
				switch {
				case strings.HasPrefix(a, "events:"):
					if a != "events:PutEvents" || raw != "["+busArn+"]" || !f.PutsEvents {
						t.Errorf("%s may %s on %s (PutsEvents %v)", f.Name, a, raw, f.PutsEvents)
					}
				case a == "dynamodb:ListStreams":
					if !f.ReadsLedgerStream {
						t.Errorf("%s may list streams", f.Name)
					}
				case a == "dynamodb:GetRecords", a == "dynamodb:GetShardIterator", a == "dynamodb:DescribeStream":
					if raw != "["+streamArn+"]" || !f.ReadsLedgerStream {
						t.Errorf("%s may %s on %s", f.Name, a, raw)
					}
				}
			}
		}
		if has("events:PutEvents") != f.PutsEvents || has("dynamodb:GetRecords") != f.ReadsLedgerStream {
			t.Errorf("%s: PutEvents %v (PutsEvents %v), GetRecords %v (ReadsLedgerStream %v)", f.Name, has("events:PutEvents"), f.PutsEvents, has("dynamodb:GetRecords"), f.ReadsLedgerStream)
		}
		// The sweep's queue: the function that sweeps shards sends to it and the Lambda service
		// reads it with that role (exactly the event source's three actions); no other role
		// touches it.
		if s.stack.SweepQueue != nil {
			queueArn := jsonOf(t, s.stack.Resolve(s.stack.SweepQueue.QueueArn()))
			var onQueue []string
			for _, st := range byRole[role] {
				for _, res := range st.resources {
					if jsonOf(t, res) != queueArn {
						continue
					}
					onQueue = append(onQueue, st.actions...)
				}
			}
			slices.Sort(onQueue)
			var want []string
			if f.SweepsShards {
				want = slices.Sorted(slices.Values(append([]string{"sqs:SendMessage"}, sweepQueueConsumer...)))
			}
			if !slices.Equal(onQueue, want) {
				t.Errorf("%s: on the sweep queue %v, want %v", f.Name, onQueue, want)
			}
		}
		// Logs: its own log group only.
		logGroup := jsonOf(t, s.stack.Resolve(s.stack.Functions[f.Name].LogGroup().LogGroupArn()))
		for _, st := range byRole[role] {
			if slices.Contains(st.actions, "logs:PutLogEvents") && jsonOf(t, st.resources) != "["+logGroup+"]" {
				t.Errorf("%s may write logs to %s, not only its log group %s", f.Name, jsonOf(t, st.resources), logGroup)
			}
		}
		if !has("logs:PutLogEvents") || !has("logs:CreateLogStream") {
			t.Errorf("%s cannot write to its log group", f.Name)
		}
		if has("states:DescribeExecution") != f.DescribesExecutions {
			t.Errorf("%s: states:DescribeExecution granted = %v, DescribesExecutions = %v", f.Name, has("states:DescribeExecution"), f.DescribesExecutions)
		}
		if has("states:StartExecution") != f.StartsExecutions {
			t.Errorf("%s: states:StartExecution granted = %v, StartsExecutions = %v", f.Name, has("states:StartExecution"), f.StartsExecutions)
		}
		if has("states:SendTaskSuccess") != f.CompletesTasks || has("states:SendTaskFailure") != f.FailsTasks || has("states:SendTaskHeartbeat") {
			t.Errorf("%s: SendTaskSuccess %v (CompletesTasks %v), SendTaskFailure %v (FailsTasks %v), SendTaskHeartbeat %v",
				f.Name, has("states:SendTaskSuccess"), f.CompletesTasks, has("states:SendTaskFailure"), f.FailsTasks, has("states:SendTaskHeartbeat"))
		}
		if has("secretsmanager:DescribeSecret") {
			t.Errorf("%s may DescribeSecret, which no code calls", f.Name)
		}
		if has("secretsmanager:GetSecretValue") != (len(f.Secrets) > 0) {
			t.Errorf("%s: GetSecretValue granted = %v, secrets %v", f.Name, has("secretsmanager:GetSecretValue"), f.Secrets)
		}
		for _, st := range byRole[role] {
			if !slices.Contains(st.actions, "secretsmanager:GetSecretValue") {
				continue
			}
			for _, res := range st.resources {
				raw := jsonOf(t, res)
				ok := false
				for _, sec := range f.Secrets {
					if sec == topology.EnvAgentsSecretPrefix {
						ok = ok || strings.Contains(raw, ":secret:Buyflow/agents/*")
					} else {
						ok = ok || raw == jsonOf(t, s.stack.Resolve(s.stack.Secrets[sec].SecretArn()))
					}
				}
				if !ok {
					t.Errorf("%s may read secret %s, which none of %v names", f.Name, raw, f.Secrets)
				}
			}
		}
		for _, a := range acts {
			if strings.HasPrefix(a, "lambda:") || strings.HasPrefix(a, "iam:") {
				t.Errorf("%s: unexpected %s", f.Name, a)
			}
		}
	}

	// Each state machine invokes exactly the functions its definition names.
	campaignRole := s.logicalID(t, s.stack.CampaignStateMachine.Role().RoleArn())
	for _, m := range []struct {
		role         string
		placeholders []string
	}{{smRole, statemachine.Placeholders}, {campaignRole, statemachine.CampaignPlaceholders}} {
		var invoked []string
		for _, st := range byRole[m.role] {
			if slices.Contains(st.actions, "lambda:InvokeFunction") {
				for _, res := range st.resources {
					invoked = append(invoked, jsonOf(t, res))
				}
			}
		}
		for _, f := range app.Functions {
			arn := jsonOf(t, s.stack.Resolve(s.stack.Functions[f.Name].FunctionArn()))
			if want := f.Placeholder != "" && slices.Contains(m.placeholders, f.Placeholder); slices.Contains(invoked, arn) != want {
				t.Errorf("state machine role %s may invoke %s = %v, want %v", m.role, f.Name, slices.Contains(invoked, arn), want)
			}
		}
	}
	// The Campaign state machine starts MediaBuy executions by the built ARN, follows and stops
	// only MediaBuy executions, and manages only Step Functions' managed EventBridge rule.
	for _, st := range byRole[campaignRole] {
		raw := jsonOf(t, st.resources)
		for _, a := range st.actions {
			switch {
			case a == "states:StartExecution":
				if raw != "["+jsonOf(t, s.stack.Resolve(s.stack.StateMachineArn))+"]" {
					t.Errorf("campaign state machine may start executions of %s", raw)
				}
			case a == "states:DescribeExecution", a == "states:StopExecution":
				if !strings.Contains(raw, ":execution:Buyflow-"+app.StateMachineName+":*") || strings.Contains(raw, app.CampaignStateMachineName) {
					t.Errorf("campaign state machine may %s on %s", a, raw)
				}
			case strings.HasPrefix(a, "events:"):
				if !strings.Contains(raw, ":rule/StepFunctionsGetEventsForStepFunctionsExecutionRule") {
					t.Errorf("campaign state machine may %s on %s", a, raw)
				}
			}
		}
	}
	if usesStartExecution(statemachine.Definition) && !slices.Contains(actionsOf(byRole[smRole]), "states:StartExecution") {
		t.Error("the definition starts executions but the state machine role may not")
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// ---------------------------------------------------------------- cycles

// subRE matches the ${Name} and ${Name.Attr} of Fn::Sub (not the ${!Literal} escapes).
var subRE = regexp.MustCompile(`\$\{([^!}][^}]*)\}`)

// dependencies returns, per resource, the logical ids it references through Ref, Fn::GetAtt,
// Fn::Sub and DependsOn.
func dependencies(resources map[string]any) map[string][]string {
	deps := map[string][]string{}
	for id, raw := range resources {
		r, _ := raw.(map[string]any)
		seen := map[string]bool{}
		add := func(dep string) {
			if _, ok := resources[dep]; ok && !seen[dep] {
				seen[dep] = true
				deps[id] = append(deps[id], dep)
			}
		}
		var walk func(v any)
		walk = func(v any) {
			switch t := v.(type) {
			case map[string]any:
				if ref, ok := t["Ref"].(string); ok {
					add(ref)
				}
				switch ga := t["Fn::GetAtt"].(type) {
				case []any:
					if len(ga) > 0 {
						add(fmt.Sprint(ga[0]))
					}
				case string:
					add(strings.SplitN(ga, ".", 2)[0])
				}
				if sub, ok := t["Fn::Sub"]; ok {
					str, _ := sub.(string)
					if arr, ok := sub.([]any); ok && len(arr) > 0 {
						str, _ = arr[0].(string)
					}
					for _, m := range subRE.FindAllStringSubmatch(str, -1) {
						add(strings.SplitN(m[1], ".", 2)[0])
					}
				}
				for _, c := range t {
					walk(c)
				}
			case []any:
				for _, c := range t {
					walk(c)
				}
			}
		}
		walk(r["Properties"])
		switch d := r["DependsOn"].(type) {
		case string:
			add(d)
		case []any:
			for _, x := range d {
				add(fmt.Sprint(x))
			}
		}
		sort.Strings(deps[id])
	}
	return deps
}

// findCycle returns one dependency cycle, or nil.
func findCycle(deps map[string][]string) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var cycle []string
	var visit func(n string) bool
	visit = func(n string) bool {
		color[n] = grey
		stack = append(stack, n)
		for _, d := range deps[n] {
			switch color[d] {
			case grey:
				i := slices.Index(stack, d)
				cycle = append(slices.Clone(stack[i:]), d)
				return true
			case white:
				if visit(d) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	ids := make([]string, 0, len(deps))
	for id := range deps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if color[id] == white && visit(id) {
			return cycle
		}
	}
	return nil
}

func reaches(deps map[string][]string, from, to string) bool {
	seen := map[string]bool{}
	var walk func(n string) bool
	walk = func(n string) bool {
		if n == to {
			return true
		}
		if seen[n] {
			return false
		}
		seen[n] = true
		for _, d := range deps[n] {
			if walk(d) {
				return true
			}
		}
		return false
	}
	return walk(from)
}

func TestCycleDetector(t *testing.T) {
	var res map[string]any
	err := json.Unmarshal([]byte(`{
		"Fn":   {"Properties": {"Env": {"Fn::Sub": "x ${SM.Name}"}}},
		"SM":   {"Properties": {"Subs": {"A": {"Fn::GetAtt": ["Fn", "Arn"]}}}, "DependsOn": ["Pol"]},
		"Pol":  {"Properties": {"Roles": [{"Ref": "Role"}]}},
		"Role": {"Properties": {}},
		"Other": {"Properties": {"X": {"Ref": "AWS::Region"}}, "DependsOn": "Role"}
	}`), &res)
	if err != nil {
		t.Fatal(err)
	}
	if c := findCycle(dependencies(res)); len(c) == 0 {
		t.Error("missed the Fn -> SM -> Fn cycle through Fn::Sub")
	}
	delete(res["Fn"].(map[string]any), "Properties")
	if c := findCycle(dependencies(res)); c != nil {
		t.Errorf("false cycle %v", c)
	}
	if !reaches(dependencies(res), "Other", "Role") || reaches(dependencies(res), "Role", "Other") {
		t.Error("reaches is wrong")
	}
}

// CloudFormation refuses a template with a dependency cycle at deploy time; synth does not.
func TestTemplateHasNoDependencyCycle(t *testing.T) {
	s := prod(t)
	checkNoCycle(t, s, topology.App)
}

func checkNoCycle(t *testing.T, s synthesized, app topology.Application) {
	t.Helper()
	deps := dependencies(s.tpl["Resources"].(map[string]any))
	if c := findCycle(deps); c != nil {
		t.Fatalf("dependency cycle: %s", strings.Join(c, " -> "))
	}
	smID := s.logicalID(t, s.stack.StateMachine.StateMachineArn())
	for _, f := range app.Functions {
		id := s.logicalID(t, s.stack.Functions[f.Name].FunctionArn())
		if f.Placeholder != "" && reaches(deps, id, smID) {
			t.Errorf("%s is invoked by the state machine and depends on it", f.Name)
		}
	}
}

// A known CloudFormation trap: a function the state machine invokes that references the state
// machine back (the state machine needs the function's ARN first, so the stack has a cycle). With cdk.json's flags (@aws-cdk/core:validateAgainstDefaultRules) synthesis
// refuses it, so does the assertions library's template parser, and so does this file's own walk
// of Ref/GetAtt/Sub/DependsOn when both are off.
func TestCycleInTheTemplateIsCaught(t *testing.T) {
	backRef := func(b *BuyflowStack) {
		b.Functions["poll"].AddEnvironment(jsii.String("BACK_REF"), b.StateMachine.StateMachineArn(), nil)
	}
	s := synth(t, variant{app: topology.App, mutate: backRef, rawTemplate: true,
		extra: map[string]any{"@aws-cdk/core:validateAgainstDefaultRules": false}})
	c := findCycle(dependencies(s.tpl["Resources"].(map[string]any)))
	smID := s.logicalID(t, s.stack.StateMachine.StateMachineArn())
	if !slices.Contains(c, smID) {
		t.Errorf("cycle %v does not go through the state machine %s", c, smID)
	}
	_, err := trySynth(t, variant{app: topology.App, mutate: backRef})
	if err == nil || !strings.Contains(err.Error(), "Validation failed") {
		t.Errorf("with cdk.json's flags: err = %v, want a failed validation", err)
	}
	_, err = trySynth(t, variant{app: topology.App, mutate: backRef, extra: map[string]any{"@aws-cdk/core:validateAgainstDefaultRules": false}})
	if err == nil || !strings.Contains(err.Error(), "dependency cycle") {
		t.Errorf("assertions.Template_FromStack: err = %v, want a dependency cycle", err)
	}
}

// A function the state machine invokes may also start executions (continue-as-new from a
// Lambda): granted by the built ARN, it adds no cycle.
func TestInvokedFunctionStartingExecutionsHasNoCycle(t *testing.T) {
	app := modify(topology.App, "poll", func(f *topology.Function) { f.StartsExecutions = true })
	s := synth(t, variant{app: app})
	checkNoCycle(t, s, app)
	checkLeastPrivilege(t, s, app)
}

// ---------------------------------------------------------------- schedule, alarms, outputs

// sweepSchedules are the schedules of s but the agents function's capabilities check.
func sweepSchedules(t *testing.T, s synthesized) map[string]map[string]any {
	t.Helper()
	out := s.ofType("AWS::Scheduler::Schedule")
	agentsID := s.logicalID(t, s.stack.Functions[AgentsFunction].FunctionArn())
	for id, sc := range out {
		if strings.Contains(jsonOf(t, props(sc)["Target"]), `"`+agentsID+`"`) {
			delete(out, id)
		}
	}
	return out
}

// TestCapabilitiesSchedule: every few hours (buyflow:capabilitiesHours) the agents function
// is invoked with the refresh action, by a role of its own.
func TestCapabilitiesSchedule(t *testing.T) {
	s := synth(t, variant{app: topology.App, extra: map[string]any{CtxCapabilitiesHours: "12"}})
	agentsID := s.logicalID(t, s.stack.Functions[AgentsFunction].FunctionArn())
	found := 0
	for _, sc := range s.ofType("AWS::Scheduler::Schedule") {
		p := props(sc)
		target := jsonOf(t, p["Target"])
		if !strings.Contains(target, `"`+agentsID+`"`) {
			continue
		}
		found++
		if p["ScheduleExpression"] != "rate(12 hours)" || !strings.Contains(target, agents.ActionRefresh) {
			t.Errorf("capabilities schedule %v, target %s", p["ScheduleExpression"], target)
		}
	}
	if found != 1 {
		t.Errorf("%d capabilities schedules, want 1", found)
	}
}

func TestReconcileSchedule(t *testing.T) {
	without := topology.App
	without.Functions = slices.DeleteFunc(slices.Clone(topology.App.Functions), func(f topology.Function) bool { return f.Name == ReconcileFunction })
	if n := len(sweepSchedules(t, synth(t, variant{app: without}))); n != 0 {
		t.Errorf("%d schedules without a reconcile function", n)
	}
	app := topology.App
	if _, ok := app.Function(ReconcileFunction); !ok {
		t.Fatal("the topology has no reconcile function")
	}
	s := synth(t, variant{app: app, extra: map[string]any{CtxReconcileMinutes: "10"}})
	schedules := sweepSchedules(t, s)
	if len(schedules) != 1 {
		t.Fatalf("%d schedules, want 1", len(schedules))
	}
	fnID := s.logicalID(t, s.stack.Functions[ReconcileFunction].FunctionArn())
	for _, sc := range schedules {
		p := props(sc)
		if p["ScheduleExpression"] != "rate(10 minutes)" {
			t.Errorf("ScheduleExpression = %v", p["ScheduleExpression"])
		}
		if !strings.Contains(jsonOf(t, p["Target"]), `"`+fnID+`"`) {
			t.Errorf("Target %s is not the reconcile function", jsonOf(t, p["Target"]))
		}
	}
	checkNoCycle(t, s, app)
	checkLeastPrivilege(t, s, app)
}

func TestAlarmsDashboardAndOutputs(t *testing.T) {
	s := prod(t)
	topicID := s.logicalID(t, s.stack.AlarmTopic.TopicArn())
	type key struct{ ns, metric, dim string }
	alarms := map[key]map[string]any{}
	for id, a := range s.ofType("AWS::CloudWatch::Alarm") {
		p := props(a)
		for _, actions := range []string{"AlarmActions", "OKActions"} {
			if !strings.Contains(jsonOf(t, p[actions]), `"`+topicID+`"`) {
				t.Errorf("alarm %s: %s do not notify the alarm topic", id, actions)
			}
		}
		dims := jsonOf(t, p["Dimensions"])
		k := key{fmt.Sprint(p["Namespace"]), fmt.Sprint(p["MetricName"]), dims}
		if _, dup := alarms[k]; dup {
			t.Errorf("two alarms on %v", k)
		}
		alarms[k] = p
	}
	// want checks one alarm: a Sum over 5 minutes, >= threshold, missing data not breaching.
	want := func(k key, threshold float64) {
		t.Helper()
		p, ok := alarms[k]
		if !ok {
			t.Errorf("no alarm on %s %s %s", k.ns, k.metric, k.dim)
			return
		}
		if p["Threshold"] != threshold || p["Statistic"] != "Sum" || p["Period"] != 300.0 || p["EvaluationPeriods"] != 1.0 ||
			p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || p["TreatMissingData"] != "notBreaching" {
			t.Errorf("alarm on %s %s %s: Threshold %v Statistic %v Period %v EvaluationPeriods %v %v %v, want Sum over 300 s >= %v once, notBreaching",
				k.ns, k.metric, k.dim, p["Threshold"], p["Statistic"], p["Period"], p["EvaluationPeriods"], p["ComparisonOperator"], p["TreatMissingData"], threshold)
		}
	}
	smDim := jsonOf(t, []any{map[string]any{"Name": "StateMachineArn", "Value": s.stack.Resolve(s.stack.StateMachine.StateMachineArn())}})
	for _, m := range []string{"ExecutionsFailed", "ExecutionsTimedOut"} {
		want(key{"AWS/States", m, smDim}, 1)
	}
	// A sweep that stopped running (its schedule disabled) pages: no invocations in 15 minutes,
	// missing data breaching.
	sweepDim := jsonOf(t, []any{map[string]any{"Name": "FunctionName", "Value": s.stack.Resolve(s.stack.Functions[ReconcileFunction].FunctionName())}})
	if p, ok := alarms[key{"AWS/Lambda", "Invocations", sweepDim}]; !ok {
		t.Error("no alarm on the reconcile function's invocations (a stopped sweep)")
	} else if p["Threshold"] != 1.0 || p["Statistic"] != "Sum" || p["Period"] != 900.0 ||
		p["ComparisonOperator"] != "LessThanThreshold" || p["TreatMissingData"] != "breaching" {
		t.Errorf("sweep-stopped alarm: Threshold %v Statistic %v Period %v %v %v, want Sum over 900 s < 1, breaching",
			p["Threshold"], p["Statistic"], p["Period"], p["ComparisonOperator"], p["TreatMissingData"])
	}
	// A campaign that fails in its own steps: its machine's failed executions page too.
	campaignDim := jsonOf(t, []any{map[string]any{"Name": "StateMachineArn", "Value": s.stack.Resolve(s.stack.CampaignStateMachine.StateMachineArn())}})
	want(key{"AWS/States", "ExecutionsFailed", campaignDim}, 1)
	for _, f := range topology.App.Functions {
		dim := jsonOf(t, []any{map[string]any{"Name": "FunctionName", "Value": s.stack.Resolve(s.stack.Functions[f.Name].FunctionName())}})
		want(key{"AWS/Lambda", "Errors", dim}, 1)
		want(key{"AWS/Lambda", "Throttles", dim}, 1)
	}
	// Approvals past SLA: internal/notify records Timeouts{Kind=approval} on an expiry.
	want(key{"Buyflow", "Timeouts", `[{"Name":"Kind","Value":"approval"}]`}, 1)
	// Webhook signature failures: the dimensionless series internal/webhook records next to
	// the one by Code (an alarm needs one exact dimension set).
	want(key{"Buyflow", "WebhookSignatureFailures", "null"}, 5)
	// Spend past the approved budget: the dimensionless series internal/delivery records next
	// to the one by Seller; the first one pages.
	want(key{"Buyflow", "SpendOverBudget", "null"}, 1)
	// A task the seller lost past the grace: the dimensionless series internal/sellertask
	// records next to the one by Seller; an order may exist there, so the first one pages.
	want(key{"Buyflow", "LostSellerTasks", "null"}, 1)
	// An open circuit breaker: the dimensionless series internal/breaker records next to the
	// one by Agent, for the agents an operator adds after the deploy.
	want(key{"Buyflow", "AgentUnavailable", "null"}, 1)
	if metrics.Namespace != "Buyflow" || metrics.Timeouts != "Timeouts" || metrics.TimeoutApproval != "approval" ||
		metrics.WebhookSignatureFailures != "WebhookSignatureFailures" || metrics.SpendOverBudget != "SpendOverBudget" ||
		metrics.AgentUnavailable != "AgentUnavailable" || metrics.LostSellerTasks != "LostSellerTasks" {
		t.Error("the metric names the alarms read changed: update this test and infra/README.md")
	}
	api := false
	for k := range alarms {
		api = api || (k.ns == "AWS/ApiGateway" && k.metric == "5xx")
	}
	if !api {
		t.Error("no API 5xx alarm")
	}
	// A status event that could not be published, a requester not told, or a sweep shard that
	// failed every delivery: what is left in a failure queue pages.
	for _, q := range []awssqs.Queue{s.stack.PublishFailures, s.stack.NotifyFailures, s.stack.SweepShardFailures} {
		want(key{"AWS/SQS", "ApproximateNumberOfMessagesVisible", jsonOf(t, []map[string]any{{"Name": "QueueName", "Value": s.stack.Resolve(q.QueueName())}})}, 1)
	}
	// Nothing else: 2 execution alarms of the MediaBuy machine and 1 of the Campaign machine,
	// API 5xx, 5 on buyflow metrics, the three failure queues, the stopped sweep, errors and
	// throttles per function.
	if n := 14 + 2*len(topology.App.Functions); len(alarms) != n {
		t.Errorf("%d alarms, want %d", len(alarms), n)
	}

	dashboards := s.ofType("AWS::CloudWatch::Dashboard")
	if len(dashboards) != 1 {
		t.Fatalf("%d dashboards, want 1", len(dashboards))
	}
	dashID := s.logicalID(t, s.stack.Dashboard.DashboardName())
	widgets := dashboardWidgets(t, props(dashboards[dashID])["DashboardBody"])
	type metricWant struct {
		title string
		// metric is [namespace, name, dim, value, ...] and stat, or expression and its label
		// in stat.
		metric     []string
		stat       string
		expression string
	}
	// A SEARCH, and its label in stat: a dynamic label, one per series.
	search := func(name, dim, stat string) string {
		return `SEARCH('{Buyflow,` + dim + `} MetricName="` + name + `"', '` + stat + `', 300)`
	}
	byDim := func(prefix, dim string) string { return prefix + "${PROP('Dim." + dim + "')}" }
	for _, w := range []metricWant{
		{title: "Approval latency (ms)", metric: []string{"Buyflow", "ApprovalLatency", "Outcome", "approved"}, stat: "p50"},
		{title: "Approval latency (ms)", metric: []string{"Buyflow", "ApprovalLatency", "Outcome", "approved"}, stat: "p90"},
		{title: "Approval latency (ms)", metric: []string{"Buyflow", "ApprovalLatency", "Outcome", "rejected"}, stat: "p50"},
		{title: "Approval latency (ms)", metric: []string{"Buyflow", "ApprovalLatency", "Outcome", "rejected"}, stat: "p90"},
		{title: "Approvals decided, rejected, past SLA", metric: []string{"Buyflow", "ApprovalDecided", "Outcome", "approved"}, stat: "Sum"},
		{title: "Approvals decided, rejected, past SLA", metric: []string{"Buyflow", "ApprovalDecided", "Outcome", "rejected"}, stat: "Sum"},
		{title: "Approvals decided, rejected, past SLA", metric: []string{"Buyflow", "ApprovalRejected"}, stat: "Sum"},
		{title: "Approvals decided, rejected, past SLA", metric: []string{"Buyflow", "Timeouts", "Kind", "approval"}, stat: "Sum"},
		{title: "Governance denied", metric: []string{"Buyflow", "GovernanceDenied"}, stat: "Sum"},
		{title: "AdCP errors by code", expression: search("AdcpErrors", "Code", "Sum"), stat: byDim("", "Code")},
		{title: "Webhooks: signature failures and duplicates", metric: []string{"Buyflow", "WebhookSignatureFailures"}, stat: "Sum"},
		{title: "Webhooks: signature failures and duplicates", metric: []string{"Buyflow", "WebhookDuplicates"}, stat: "Sum"},
		{title: "Webhooks: signature failures and duplicates", expression: search("WebhookSignatureFailures", "Code", "Sum"), stat: byDim("signature failures ", "Code")},
		{title: "Pending operations by stage", expression: search("PendingOperations", "Stage", "Maximum"), stat: byDim("", "Stage")},
		{title: "Reconcile findings by kind", expression: search("ReconcileFindings", "Kind", "Sum"), stat: byDim("", "Kind")},
		{title: "Seller task duration by status (ms)", expression: search("SellerTaskDuration", "Status", "p50"), stat: byDim("p50 ", "Status")},
		{title: "Seller task duration by status (ms)", expression: search("SellerTaskDuration", "Status", "p90"), stat: byDim("p90 ", "Status")},
		{title: "Timeouts by kind", expression: search("Timeouts", "Kind", "Sum"), stat: byDim("", "Kind")},
	} {
		found := false
		for _, m := range widgets[w.title] {
			opts, _ := m[len(m)-1].(map[string]any)
			if w.expression != "" {
				found = found || (len(m) == 1 && opts["expression"] == w.expression && opts["label"] == w.stat)
				continue
			}
			if len(m) != len(w.metric)+1 || opts["stat"] != w.stat {
				continue
			}
			same := true
			for i, v := range w.metric {
				same = same && m[i] == v
			}
			found = found || same
		}
		if !found {
			t.Errorf("dashboard widget %q has no %v %s%s (it has %v)", w.title, w.metric, w.stat, w.expression, widgets[w.title])
		}
	}
	for _, title := range []string{"Executions", "API requests", "Lambda errors", "Lambda throttles", "Lambda duration p99 (ms)"} {
		if len(widgets[title]) == 0 {
			t.Errorf("no dashboard widget %q", title)
		}
	}
	if n := len(widgets["Lambda throttles"]); n != len(topology.App.Functions) {
		t.Errorf("Lambda throttles widget has %d metrics, want one per function (%d)", n, len(topology.App.Functions))
	}

	outputs, _ := s.tpl["Outputs"].(map[string]any)
	for _, o := range []string{"ApiUrl", "TableName", "StateMachineArn", "DashboardUrl"} {
		if _, ok := outputs[o]; !ok {
			t.Errorf("output %s missing", o)
		}
	}
	url, _ := outputs["DashboardUrl"].(map[string]any)
	region := map[string]any{"Ref": "AWS::Region"}
	wantURL := jsonOf(t, map[string]any{"Fn::Join": []any{"", []any{
		"https://", region, ".console.aws.amazon.com/cloudwatch/home?region=", region, "#dashboards:name=", map[string]any{"Ref": dashID},
	}}})
	if got := jsonOf(t, url["Value"]); got != wantURL {
		t.Errorf("DashboardUrl = %s, want %s", got, wantURL)
	}
	if name := props(dashboards[dashID])["DashboardName"]; name != "Buyflow-buyflow" {
		t.Errorf("DashboardName = %v, want Buyflow-buyflow", name)
	}
}

// dashboardWidgets parses a DashboardBody (a string, or an Fn::Join whose references sit inside
// JSON strings) and returns each graph widget's metrics by title.
func dashboardWidgets(t *testing.T, body any) map[string][][]any {
	t.Helper()
	var text string
	switch b := body.(type) {
	case string:
		text = b
	case map[string]any:
		join, _ := b["Fn::Join"].([]any)
		if len(join) != 2 || join[0] != "" {
			t.Fatalf("DashboardBody %s is not an Fn::Join on \"\"", jsonOf(t, b))
		}
		var sb strings.Builder
		for _, part := range asSlice(join[1]) {
			if str, ok := part.(string); ok {
				sb.WriteString(str)
			} else {
				sb.WriteString("TOKEN") // a Ref or GetAtt, inside a JSON string
			}
		}
		text = sb.String()
	default:
		t.Fatalf("DashboardBody is %T", body)
	}
	var doc struct {
		Widgets []struct {
			Properties struct {
				Title   string  `json:"title"`
				Metrics [][]any `json:"metrics"`
			} `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("DashboardBody: %v\n%s", err, text)
	}
	out := map[string][][]any{}
	for _, w := range doc.Widgets {
		if _, dup := out[w.Properties.Title]; dup {
			t.Errorf("two dashboard widgets titled %q", w.Properties.Title)
		}
		out[w.Properties.Title] = w.Properties.Metrics
	}
	return out
}

func TestSecrets(t *testing.T) {
	s := prod(t)
	secrets := s.ofType("AWS::SecretsManager::Secret")
	names := map[string]map[string]any{}
	for _, sec := range secrets {
		names[fmt.Sprint(props(sec)["Name"])] = props(sec)
	}
	for _, n := range []string{"Buyflow/approval-link-keys", "Buyflow/approval-link-key-seed", "Buyflow/slack", "Buyflow/webhook-route-key"} {
		if names[n] == nil {
			t.Errorf("secret %s missing (have %v)", n, slices.Sorted(func(yield func(string) bool) {
				for k := range names {
					if !yield(k) {
						return
					}
				}
			}))
		}
	}
	// The link keys are built from the generated seed by a dynamic reference: no key material
	// in the template.
	keys := jsonOf(t, names["Buyflow/approval-link-keys"]["SecretString"])
	if !strings.Contains(keys, "{{resolve:secretsmanager:") || !strings.Contains(keys, `{\"current\":\"k1\",\"keys\":{\"k1\":\"`) {
		t.Errorf("link keys SecretString = %s", keys)
	}
	if names["Buyflow/approval-link-key-seed"]["GenerateSecretString"] == nil {
		t.Error("the link key seed is not generated")
	}
	// The route key is generated by Secrets Manager: no key material in the template either.
	if names["Buyflow/webhook-route-key"]["GenerateSecretString"] == nil || names["Buyflow/webhook-route-key"]["SecretString"] != nil {
		t.Errorf("the webhook route key is not generated: %v", names["Buyflow/webhook-route-key"])
	}
}

// The approval policy and the operators have no default: synth warns when they are unset,
// refuses JSON that does not parse, and passes them through when set. The agents seed is in
// no function's environment: the seed's custom resource carries it.
func TestDeploymentConfig(t *testing.T) {
	ann := assertions.Annotations_FromStack(prod(t).stack.Stack)
	for _, key := range []string{CtxOperators, CtxApprovalPolicy} {
		if w := ann.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String(key))); len(*w) == 0 {
			t.Errorf("no warning for unset %s", key)
		}
	}
	agentsSeed := `{"agents":[{"id":"seller1","role":"seller","mcp_url":"https://seller.example/mcp","credential_ref":"Buyflow/agents/seller1",` +
		`"webhook":{"mode":"hmac","hmac_secret_ref":"Buyflow/agents/seller1-webhook"}}]}`
	policy := `{"threshold":"10000.00","currency":"USD","approvers":["U123"],"on_timeout":"reject"}`
	operators := `["arn:aws:iam::111122223333:role/BuyflowOperator"]`
	s := synth(t, variant{app: topology.App, extra: map[string]any{CtxAgents: agentsSeed, CtxApprovalPolicy: policy, CtxOperators: operators}})
	if w := assertions.Annotations_FromStack(s.stack.Stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("buyflow:"))); len(*w) != 0 {
		t.Errorf("warnings with the config set: %d", len(*w))
	}
	for _, f := range topology.App.Functions {
		vars := props(s.resources()[s.logicalID(t, s.stack.Functions[f.Name].FunctionArn())])["Environment"].(map[string]any)["Variables"].(map[string]any)
		for name, v := range vars {
			if strings.Contains(fmt.Sprint(v), "seller1") {
				t.Errorf("%s: %s carries the agents seed", f.Name, name)
			}
		}
		if slices.Contains(f.Env, topology.EnvOperators) && vars[topology.EnvOperators] != operators {
			t.Errorf("%s: %s = %v", f.Name, topology.EnvOperators, vars[topology.EnvOperators])
		}
		if slices.Contains(f.Env, topology.EnvApprovalPolicy) && vars[topology.EnvApprovalPolicy] != policy {
			t.Errorf("%s: %s = %v", f.Name, topology.EnvApprovalPolicy, vars[topology.EnvApprovalPolicy])
		}
	}
	// The seller gets an alarm of its own for webhooks that are all refused.
	found := false
	for _, a := range s.ofType("AWS::CloudWatch::Alarm") {
		p := props(a)
		m := jsonOf(t, p["Metrics"])
		if strings.Contains(m, `"IF(FILL(rejected, 0) \u003e 0 AND FILL(accepted, 0) == 0, 1, 0)"`) || strings.Contains(m, `IF(FILL(rejected, 0) > 0 AND FILL(accepted, 0) == 0, 1, 0)`) {
			found = strings.Contains(m, `"MetricName":"WebhookRejected"`) && strings.Contains(m, `"MetricName":"WebhookAccepted"`) &&
				strings.Contains(m, `{"Name":"Seller","Value":"seller1"}`) && p["Threshold"] == 1.0
		}
	}
	if !found {
		t.Error("no all-webhooks-refused alarm for seller1 on WebhookRejected and WebhookAccepted by Seller")
	}
	// And one for its circuit breaker.
	found = false
	for _, a := range s.ofType("AWS::CloudWatch::Alarm") {
		p := props(a)
		found = found || (p["MetricName"] == metrics.AgentUnavailable && jsonOf(t, p["Dimensions"]) == `[{"Name":"Agent","Value":"seller1"}]` && p["Threshold"] == 1.0)
	}
	if !found {
		t.Error("no circuit breaker alarm for seller1 on AgentUnavailable by Agent")
	}
	seeds := s.ofType(agents.SeedResourceType)
	agentsFn, _ := topology.App.Function(AgentsFunction)
	for _, r := range seeds {
		if props(r)[agents.SeedProperty] != agentsSeed {
			t.Errorf("seed custom resource = %v", r)
		}
		// No stack waits CloudFormation's default hour on a seed that never answered.
		if got, want := fmt.Sprint(props(r)["ServiceTimeout"]), fmt.Sprint(agentsFn.TimeoutSeconds+60); got != want {
			t.Errorf("seed custom resource's ServiceTimeout = %v, want %v (the function's timeout and a minute)", got, want)
		}
	}
	if len(seeds) != 1 {
		t.Errorf("%d seed custom resources, want 1", len(seeds))
	}
	if len(prod(t).ofType(agents.SeedResourceType)) != 0 {
		t.Error("a stack without a seed has a seed custom resource")
	}
	cfg := DefaultConfig()
	cfg.ApprovalPolicy = `{"threshold":`
	if err := validate(topology.App, statemachine.Definition, "Buyflow", cfg); err == nil || !strings.Contains(err.Error(), CtxApprovalPolicy) {
		t.Errorf("malformed policy: err = %v", err)
	}
	cfg = DefaultConfig()
	cfg.Operators = `["arn:aws:sts::111122223333:assumed-role/Ops/alice"]`
	if err := validate(topology.App, statemachine.Definition, "Buyflow", cfg); err == nil || !strings.Contains(err.Error(), CtxOperators) {
		t.Errorf("a session ARN as operator: err = %v", err)
	}
}

// TestEnvironmentSizeDoesNotGrowWithAgents: Lambda allows 4 KB of environment per function.
// The agents are read from the registry, and the seed travels in the seed's custom resource,
// so each function's environment is the same size with no seed and with a seed of 200 agents
// (more than ten times what fitted in the environment before), and far below 4 KB.
func TestEnvironmentSizeDoesNotGrowWithAgents(t *testing.T) {
	var doc adcp.RegistryConfig
	for i := range 200 {
		a := adcp.Agent{ID: fmt.Sprintf("governance-%03d", i), Role: adcp.RoleGovernance,
			MCPURL: fmt.Sprintf("https://governance-%03d.example/mcp", i), CredentialRef: fmt.Sprintf("Buyflow/agents/governance-%03d", i)}
		if i < 5 { // sellers get an alarm each: a handful is enough to see they are there
			a.ID, a.Role = fmt.Sprintf("seller-%03d", i), adcp.RoleSeller
			a.Webhook = &adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKSURI: fmt.Sprintf("https://seller-%03d.example/.well-known/jwks.json", i)}
		}
		doc.Agents = append(doc.Agents, a)
	}
	seed, _ := json.Marshal(doc)
	if len(seed) < 25_000 {
		t.Fatalf("the seed is only %d bytes", len(seed))
	}
	size := func(s synthesized) map[string]int {
		out := map[string]int{}
		for _, f := range topology.App.Functions {
			vars := props(s.resources()[s.logicalID(t, s.stack.Functions[f.Name].FunctionArn())])["Environment"].(map[string]any)["Variables"].(map[string]any)
			for k, v := range vars {
				// Tokens (Ref, GetAtt) resolve to names and ARNs of at most ~150 bytes each.
				n := len(jsonOf(t, v))
				if _, ok := v.(string); !ok {
					n = 150
				}
				out[f.Name] += len(k) + n
			}
		}
		return out
	}
	without, with := size(prod(t)), size(synth(t, variant{app: topology.App, extra: map[string]any{CtxAgents: string(seed)}}))
	for _, f := range topology.App.Functions {
		if without[f.Name] != with[f.Name] {
			t.Errorf("%s: environment %d bytes without a seed, %d with 200 agents", f.Name, without[f.Name], with[f.Name])
		}
		if with[f.Name] > 1024 {
			t.Errorf("%s: environment %d bytes, over a quarter of Lambda's 4 KB", f.Name, with[f.Name])
		}
		t.Logf("%-10s environment ≤ %4d bytes of 4096", f.Name, with[f.Name])
	}
}

// The JSON settings are checked with the functions' own parsers, the approval SLA against the
// longest execution, and the alarm e-mail is a plain address: each mistake fails synth naming
// its key.
func TestConfigValidation(t *testing.T) {
	good := DefaultConfig()
	good.Agents = `{"agents":[{"id":"gov","role":"governance","mcp_url":"https://gov.example/mcp","credential_ref":"Buyflow/agents/gov"}]}`
	good.ApprovalPolicy = `{"threshold":"10000.00","currency":"USD","approvers":["U123"]}`
	good.RunConfig = `{"approval_timeout_seconds":3600}`
	good.AlarmEmail = "ops@example.com"
	if err := validate(topology.App, statemachine.Definition, "Buyflow", good); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	for name, c := range map[string]struct {
		change func(*Config)
		key    string
		want   string
	}{
		"seller without webhook": {func(c *Config) {
			c.Agents = `{"agents":[{"id":"s","role":"seller","mcp_url":"https://s.example/mcp","credential_ref":"Buyflow/agents/s"}]}`
		}, CtxAgents, "webhook"},
		"credential outside the prefix": {func(c *Config) { c.Agents = strings.Replace(c.Agents, "Buyflow/agents/gov", "other/gov", 1) }, CtxAgents, "not under Buyflow/agents/"},
		"unknown agent field":           {func(c *Config) { c.Agents = `{"agents":[],"extra":1}` }, CtxAgents, "extra"},
		"policy without approvers":      {func(c *Config) { c.ApprovalPolicy = `{"threshold":"1.00","currency":"USD"}` }, CtxApprovalPolicy, "approvers"},
		"policy bad on_timeout":         {func(c *Config) { c.ApprovalPolicy = `{"approvers":["U1"],"on_timeout":"later"}` }, CtxApprovalPolicy, "on_timeout"},
		"zero approval SLA":             {func(c *Config) { c.RunConfig = `{"approval_timeout_seconds":0}` }, CtxRunConfig, "approval_timeout_seconds"},
		"approval SLA over a year":      {func(c *Config) { c.RunConfig = `{"approval_timeout_seconds":40000000}` }, CtxRunConfig, "one year"},
		"unknown run config field":      {func(c *Config) { c.RunConfig = `{"approval_sla":3600}` }, CtxRunConfig, "approval_sla"},
		"e-mail with a display name":    {func(c *Config) { c.AlarmEmail = "Ops <ops@example.com>" }, CtxAlarmEmail, "plain e-mail"},
		"e-mail without a domain":       {func(c *Config) { c.AlarmEmail = "ops" }, CtxAlarmEmail, "plain e-mail"},
		"e-mail without a dot":          {func(c *Config) { c.AlarmEmail = "ops@localhost" }, CtxAlarmEmail, "plain e-mail"},
	} {
		cfg := good
		c.change(&cfg)
		err := validate(topology.App, statemachine.Definition, "Buyflow", cfg)
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming %s and %q", name, err, c.key, c.want)
		}
	}
}

func TestConfigFromContext(t *testing.T) {
	ctx := map[string]any{
		CtxDev: "true", CtxTracing: true, CtxLogRetentionDays: "30", CtxThrottleRate: float64(10),
		CtxAlarmEmail: "ops@example.com", CtxStackName: "B2",
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx})
	cfg, err := ConfigFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Dev, want.Tracing, want.LogRetentionDays, want.ThrottleRate, want.AlarmEmail, want.StackName = true, true, 30, 10, "ops@example.com", "B2"
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config %+v, want %+v", cfg, want)
	}
	bad := map[string]any{CtxDev: "yes please", CtxLogRetentionDays: "-1"}
	app = awscdk.NewApp(&awscdk.AppProps{Context: &bad})
	if _, err := ConfigFromContext(app.Node()); err == nil || !strings.Contains(err.Error(), CtxDev) || !strings.Contains(err.Error(), CtxLogRetentionDays) {
		t.Errorf("err = %v", err)
	}
	if _, err := retentionDays(31); err == nil {
		t.Error("31 days accepted")
	}
}

// ---------------------------------------------------------------- helpers

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// Round-trip through any so SDK structs and template maps compare alike.
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(x)
	return string(b)
}

// sortedJSON renders a list with its elements sorted by their JSON.
func sortedJSON(t *testing.T, v any) string {
	t.Helper()
	var list []any
	if err := json.Unmarshal([]byte(jsonOf(t, v)), &list); err != nil {
		t.Fatalf("not a list: %v", err)
	}
	var parts []string
	for _, e := range list {
		parts = append(parts, jsonOf(t, e))
	}
	sort.Strings(parts)
	return "[" + strings.Join(parts, ",") + "]"
}

// TestRequestSigningKey: one KMS ECC_NIST_P256 sign/verify key; kms:Sign (and GetPublicKey,
// to name the key) exactly to the functions that call agents, GetPublicKey alone to the JWKS
// function, both on that key only; its ARN reaches them as BUYFLOW_SIGNING_KEY.
func TestRequestSigningKey(t *testing.T) {
	s := prod(t)
	keys := s.ofType("AWS::KMS::Key")
	if len(keys) != 1 {
		t.Fatalf("%d KMS keys, want 1", len(keys))
	}
	keyID := s.logicalID(t, s.stack.SigningKey.KeyArn())
	if p := props(keys[keyID]); p["KeySpec"] != "ECC_NIST_P256" || p["KeyUsage"] != "SIGN_VERIFY" {
		t.Fatalf("signing key %v", p)
	}
	byRole := s.grantsByRole(t)
	signers := 0
	for _, f := range topology.App.Functions {
		role := s.roleOf(t, f.Name)
		var acts []string
		for _, st := range byRole[role] {
			for _, a := range st.actions {
				if strings.HasPrefix(a, "kms:") {
					acts = append(acts, a)
					if !strings.Contains(st.raw, `"`+keyID+`"`) {
						t.Errorf("%s: %s on something other than the signing key: %s", f.Name, a, st.raw)
					}
				}
			}
		}
		slices.Sort(acts)
		var want []string
		switch {
		case f.SignsRequests:
			want = []string{"kms:GetPublicKey", "kms:Sign"}
			signers++
		case f.PublishesKeys:
			want = []string{"kms:GetPublicKey"}
		}
		if !slices.Equal(acts, want) {
			t.Errorf("%s: KMS actions %v, want %v", f.Name, acts, want)
		}
		env := props(s.ofType("AWS::Lambda::Function")[s.logicalID(t, s.stack.Functions[f.Name].FunctionArn())])["Environment"]
		raw := jsonOf(t, env)
		if has := strings.Contains(raw, topology.EnvSigningKey); has != slices.Contains(f.Env, topology.EnvSigningKey) ||
			has && !strings.Contains(raw, keyID) {
			t.Errorf("%s: environment %s (declares the key: %v)", f.Name, raw, slices.Contains(f.Env, topology.EnvSigningKey))
		}
	}
	if signers == 0 {
		t.Fatal("no function signs requests")
	}
}

// kmsGrants is, for each function, the KMS actions its role has on each key (logical id).
func (s synthesized) kmsGrants(t *testing.T) map[string]map[string][]string {
	t.Helper()
	keys := s.ofType("AWS::KMS::Key")
	byRole := s.grantsByRole(t)
	out := map[string]map[string][]string{}
	for _, f := range topology.App.Functions {
		out[f.Name] = map[string][]string{}
		for _, st := range byRole[s.roleOf(t, f.Name)] {
			for _, a := range st.actions {
				if !strings.HasPrefix(a, "kms:") {
					continue
				}
				on := 0
				for id := range keys {
					if strings.Contains(st.raw, `"`+id+`"`) {
						out[f.Name][id] = append(out[f.Name][id], a)
						on++
					}
				}
				if on == 0 {
					t.Errorf("%s: %s on none of the stack's keys: %s", f.Name, a, st.raw)
				}
			}
		}
		for id := range out[f.Name] {
			slices.Sort(out[f.Name][id])
		}
	}
	return out
}

// TestSigningKeyRotation: the three deploys of a rotation (docs/cloud-team.md). With
// buyflow:signingKeys=1,2 the stack holds both keys; key 2 is published (the JWKS function
// reads its public half, BUYFLOW_SIGNING_KEYS_PUBLISHED names it) and nothing may sign with it.
// buyflow:signingKey=2 then switches: the functions that call agents sign with key 2 only, key
// 1 stays published, and neither key is replaced. Dropping key 1 leaves key 2 alone. A signing
// key that is not among the stack's keys, and the retired signingKeysPublished, are refused.
func TestSigningKeyRotation(t *testing.T) {
	type step struct {
		name          string
		keys, signing string
	}
	var ids map[string]string // key name -> logical id, as the first step created them
	for _, st := range []step{{"publish the next key", "1,2", ""}, {"sign with it", "1,2", "2"}, {"retire the old key", "2", ""}} {
		extra := map[string]any{CtxSigningKeys: st.keys}
		if st.signing != "" {
			extra[CtxSigningKey] = st.signing
		}
		s := synth(t, variant{app: topology.App, extra: extra})
		names := strings.Split(st.keys, ",")
		keys := s.ofType("AWS::KMS::Key")
		if len(keys) != len(names) {
			t.Fatalf("%s: %d KMS keys, want %d", st.name, len(keys), len(names))
		}
		signer := s.logicalID(t, s.stack.SigningKey.KeyArn())
		var published []string
		for _, k := range s.stack.PublishedKeys {
			published = append(published, s.logicalID(t, k.KeyArn()))
		}
		if ids == nil {
			ids = map[string]string{"1": signer, "2": published[0]}
			if !strings.HasPrefix(ids["1"], "RequestSigningKey") || !strings.HasPrefix(ids["2"], "RequestSigningKey2") {
				t.Fatalf("logical ids %v: key 1 must keep the id of the stack's one key", ids)
			}
		}
		wantSigner := ids[cmp.Or(st.signing, names[0])]
		if signer != wantSigner {
			t.Errorf("%s: signs with %s, want %s (a switch must not replace a key)", st.name, signer, wantSigner)
		}
		for _, id := range append([]string{signer}, published...) {
			if _, ok := keys[id]; !ok {
				t.Errorf("%s: key %s is not the one created first (%v)", st.name, id, ids)
			}
		}
		grants := s.kmsGrants(t)
		for _, f := range topology.App.Functions {
			want := map[string][]string{}
			switch {
			case f.SignsRequests:
				want[signer] = []string{"kms:GetPublicKey", "kms:Sign"}
			case f.PublishesKeys:
				for _, id := range append([]string{signer}, published...) {
					want[id] = []string{"kms:GetPublicKey"}
				}
			}
			if !reflect.DeepEqual(grants[f.Name], want) {
				t.Errorf("%s: %s has KMS grants %v, want %v", st.name, f.Name, grants[f.Name], want)
			}
			env := jsonOf(t, props(s.ofType("AWS::Lambda::Function")[s.logicalID(t, s.stack.Functions[f.Name].FunctionArn())])["Environment"])
			if !slices.Contains(f.Env, topology.EnvSigningKeysPublished) {
				continue
			}
			for _, id := range published {
				if !strings.Contains(env, `"`+id+`"`) {
					t.Errorf("%s: %s's environment does not publish %s: %s", st.name, f.Name, id, env)
				}
			}
		}
	}
	for name, ctx := range map[string]map[string]any{
		"a signing key the stack does not hold": {CtxSigningKeys: "1", CtxSigningKey: "2"},
		"a key named twice":                     {CtxSigningKeys: "1,1"},
		"four keys":                             {CtxSigningKeys: "1,2,3,4"},
		"a name no logical id can carry":        {CtxSigningKeys: "1,next-key"},
		"the retired list of ARNs":              {ctxSigningKeysPublished: "kms:arn:aws:kms:us-east-1:111122223333:key/x"},
	} {
		if _, err := trySynth(t, variant{app: topology.App, extra: ctx}); err == nil || !strings.Contains(err.Error(), "buyflow:signingKey") {
			t.Errorf("%s: err = %v, want a refusal naming the context key", name, err)
		}
	}
}

// The sweep's shard queue invokes the function that sweeps shards with topology's settings,
// reports each failed shard alone, and keeps what failed every delivery in its dead-letter
// queue; the function is told the queue's URL.
func TestTheSweepQueueInvokesTheFunctionThatSweepsShards(t *testing.T) {
	s := prod(t)
	src := topology.App.SweepQueue
	queueArn := jsonOf(t, s.stack.Resolve(s.stack.SweepQueue.QueueArn()))
	var found int
	for id, m := range s.ofType("AWS::Lambda::EventSourceMapping") {
		p := props(m)
		if jsonOf(t, p["EventSourceArn"]) != queueArn {
			continue
		}
		found++
		fn := jsonOf(t, s.stack.Resolve(s.stack.Functions[ReconcileFunction].FunctionName()))
		if jsonOf(t, p["FunctionName"]) != fn || p["BatchSize"] != float64(src.BatchSize) ||
			jsonOf(t, p["ScalingConfig"]) != fmt.Sprintf(`{"MaximumConcurrency":%d}`, src.MaximumConcurrency) ||
			jsonOf(t, p["FunctionResponseTypes"]) != `["ReportBatchItemFailures"]` {
			t.Errorf("mapping %s: %s", id, jsonOf(t, p))
		}
	}
	if found != 1 {
		t.Fatalf("%d mappings of the sweep queue, want 1", found)
	}
	q := props(s.resources()[s.logicalID(t, s.stack.SweepQueue.QueueArn())])
	dlqArn := jsonOf(t, s.stack.Resolve(s.stack.SweepShardFailures.QueueArn()))
	if q["VisibilityTimeout"] != float64(src.VisibilityTimeoutSeconds) || q["MessageRetentionPeriod"] != float64(src.RetentionSeconds) ||
		jsonOf(t, q["RedrivePolicy"]) != fmt.Sprintf(`{"deadLetterTargetArn":%s,"maxReceiveCount":%d}`, dlqArn, src.MaxReceiveCount) ||
		q["SqsManagedSseEnabled"] != true {
		t.Errorf("sweep queue %s", jsonOf(t, q))
	}
	env := props(s.resources()[s.logicalID(t, s.stack.Functions[ReconcileFunction].FunctionArn())])["Environment"]
	if want := jsonOf(t, s.stack.Resolve(s.stack.SweepQueue.QueueUrl())); !strings.Contains(jsonOf(t, env), want) {
		t.Errorf("the reconcile function's environment %s does not name the queue %s", jsonOf(t, env), want)
	}
}
