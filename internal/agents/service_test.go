package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/registry"
)

const (
	operator  = "arn:aws:iam::111122223333:role/BuyflowOperator"
	prefix    = "buyflow/agents/"
	sellerTok = "seller-token-0123456789"
)

type env struct {
	svc       *agents.Service
	store     *registry.Store
	sellerURL string
}

// newEnv serves a simulated seller (a real MCP server) and the operator API over a real
// DynamoDB stand-in; the prober is the AdCP client the agents function uses.
func newEnv(t *testing.T) *env {
	t.Helper()
	client, table := dynamotest.Start(t)
	return newEnvOn(t, client, table)
}

// newEnvOn is newEnv with the registry in table through api.
func newEnvOn(t *testing.T, api registry.API, table string) *env {
	t.Helper()
	v, err := adcptest.NewValidator("")
	if err != nil {
		t.Fatal(err)
	}
	seller := httptest.NewServer(adcptest.NewSeller(adcptest.SellerOptions{Token: sellerTok, Validator: v}))
	t.Cleanup(seller.Close)
	store := registry.NewStore(api, table)
	creds := adcp.CredentialsFunc(func(_ context.Context, ref string) (string, error) {
		if ref == prefix+"acme" {
			return sellerTok, nil
		}
		return "wrong-token-0123456789", nil
	})
	prober, err := adcp.New(adcp.Options{Agents: store, Credentials: creds, Validator: adcp.NewReleasesValidator(adcpschemas.Open), CapabilitiesTTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := agents.New(agents.Config{Registry: store, Prober: prober, SecretPrefix: prefix,
		Operators: []string{operator}, ProbeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &env{svc: svc, store: store, sellerURL: seller.URL + "/mcp"}
}

func (e *env) call(t *testing.T, principal, method, path, body string) (int, map[string]any) {
	t.Helper()
	req := events.APIGatewayV2HTTPRequest{RawPath: path, Body: body}
	req.RequestContext.HTTP.Method = method
	req.RequestContext.RequestID = "req-1"
	if principal != "" {
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccountID: "111122223333", UserARN: principal}}
	}
	raw, _ := json.Marshal(req)
	out, err := e.svc.Invoke(context.Background(), raw)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp := out.(events.APIGatewayV2HTTPResponse)
	var m map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &m); err != nil {
		t.Fatalf("%s %s: body %q", method, path, resp.Body)
	}
	return resp.StatusCode, m
}

func code(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (e *env) sellerBody(id string) string {
	return `{"id":"` + id + `","role":"seller","mcp_url":"` + e.sellerURL + `","credential_ref":"` + prefix + id + `",
		"webhook":{"mode":"rfc9421","jwks_uri":"https://` + id + `.example/.well-known/jwks.json"},"settings":{"sweep_reads_per_second":5}}`
}

func TestOnlyOperatorsGetIn(t *testing.T) {
	e := newEnv(t)
	if st, m := e.call(t, "", "GET", agents.Prefix, ""); st != 401 || code(m) != "no_identity" {
		t.Errorf("no identity: %d %v", st, m)
	}
	if st, m := e.call(t, "arn:aws:iam::111122223333:user/buyer", "GET", agents.Prefix, ""); st != 403 || code(m) != "not_an_operator" {
		t.Errorf("a buyer: %d %v", st, m)
	}
	// A session of the operator role is the operator; a session of another role is not.
	if st, _ := e.call(t, "arn:aws:sts::111122223333:assumed-role/BuyflowOperator/alice", "GET", agents.Prefix, ""); st != 200 {
		t.Errorf("operator session: %d", st)
	}
	if st, _ := e.call(t, "arn:aws:sts::111122223333:assumed-role/BuyflowOperatorX/alice", "GET", agents.Prefix, ""); st != 403 {
		t.Errorf("another role's session: %d", st)
	}
}

// TestAddChecksCapabilitiesAndAudits: an add stores the agent, asks it get_adcp_capabilities
// and tools/list, keeps what buyflow needs, and records who did it.
func TestAddChecksCapabilitiesAndAudits(t *testing.T) {
	e := newEnv(t)
	st, m := e.call(t, operator, "POST", agents.Prefix, e.sellerBody("acme"))
	if st != 201 {
		t.Fatalf("add: %d %v", st, m)
	}
	caps, _ := m["capabilities"].(map[string]any)
	if caps == nil || caps["error"] != nil || caps["replay_ttl_seconds"].(float64) <= 0 {
		t.Fatalf("capabilities = %v", caps)
	}
	if vs, _ := caps["supported_versions"].([]any); len(vs) == 0 {
		t.Errorf("no versions kept: %v", caps)
	}
	if tools, _ := json.Marshal(caps["tools"]); !strings.Contains(string(tools), `"create_media_buy"`) {
		t.Errorf("tools = %s", tools)
	}
	st, m = e.call(t, operator, "GET", agents.Prefix+"/acme", "")
	hist, _ := json.Marshal(m["history"])
	if st != 200 || !strings.Contains(string(hist), `"action":"added","actor":"`+operator+`"`) || !strings.Contains(string(hist), `"action":"capabilities"`) {
		t.Fatalf("show: %d %s", st, hist)
	}
	if st, m := e.call(t, operator, "POST", agents.Prefix, e.sellerBody("acme")); st != 409 || code(m) != "agent_exists" {
		t.Errorf("second add: %d %v", st, m)
	}
}

// TestAddOfAnUnreachableAgentRecordsTheFailure: the agent is stored (the seller may be down
// for a minute) and the check's failure is on the record for the operator to see.
func TestAddOfAnUnreachableAgentRecordsTheFailure(t *testing.T) {
	e := newEnv(t)
	body := strings.Replace(e.sellerBody("beta"), e.sellerURL, "http://127.0.0.1:1/mcp", 1)
	st, m := e.call(t, operator, "POST", agents.Prefix, body)
	caps, _ := m["capabilities"].(map[string]any)
	if st != 201 || caps == nil || caps["error"] == "" || caps["error"] == nil {
		t.Fatalf("add unreachable: %d %v", st, m)
	}
}

func TestRefusals(t *testing.T) {
	e := newEnv(t)
	if st, _ := e.call(t, operator, "POST", agents.Prefix, e.sellerBody("acme")); st != 201 {
		t.Fatal(st)
	}
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"not json", "POST", agents.Prefix, `{"id":`, 400, "malformed_json"},
		{"unknown field", "POST", agents.Prefix, `{"id":"x","role":"seller","colour":"red"}`, 400, "malformed_json"},
		{"trailing data", "POST", agents.Prefix, e.sellerBody("x2") + `{}`, 400, "malformed_json"},
		{"too big", "POST", agents.Prefix, `{"id":"` + strings.Repeat("a", agents.MaxBodyBytes) + `"}`, 413, "body_too_large"},
		{"secret outside the prefix", "POST", agents.Prefix, strings.Replace(e.sellerBody("x3"), prefix+"x3", "prod/db", 1), 422, "invalid_agent"},
		{"http off loopback", "POST", agents.Prefix, strings.Replace(e.sellerBody("x4"), e.sellerURL, "http://x4.example/mcp", 1), 422, "invalid_agent"},
		{"role change", "PATCH", agents.Prefix + "/acme", `{"role":"governance"}`, 422, "role_immutable"},
		{"empty update", "PATCH", agents.Prefix + "/acme", `{}`, 422, "empty_update"},
		{"update to an invalid agent", "PATCH", agents.Prefix + "/acme", `{"webhook":null}`, 422, "invalid_agent"},
		{"auth with an unknown field", "PATCH", agents.Prefix + "/acme", `{"auth":{"mode":"bearer","client_secret":"x"}}`, 400, "malformed_json"},
		{"oauth without a client id", "PATCH", agents.Prefix + "/acme", `{"auth":{"mode":"oauth2_client_credentials"}}`, 422, "invalid_agent"},
		{"unknown agent", "PATCH", agents.Prefix + "/nobody", `{"mcp_url":"https://n.example/mcp"}`, 404, "not_found"},
		{"unknown route", "DELETE", agents.Prefix + "/acme", ``, 404, "no_route"},
		{"a path that only starts like the prefix", "GET", agents.Prefix + "acme", ``, 404, "no_route"},
		{"another operator path", "GET", "/v1/operator/other", ``, 404, "no_route"},
		{"unknown action", "POST", agents.Prefix + "/acme/explode", ``, 404, "no_route"},
		{"disable body not json", "POST", agents.Prefix + "/acme/disable", `nope`, 400, "malformed_json"},
	}
	for _, c := range cases {
		st, m := e.call(t, operator, c.method, c.path, c.body)
		if st != c.status || code(m) != c.code {
			t.Errorf("%s: %d %v, want %d %s", c.name, st, m, c.status, c.code)
		}
	}
	// Nothing refused was written: acme has its add and its capabilities check only.
	hist, _ := e.store.History(context.Background(), "acme")
	if len(hist) != 2 {
		t.Errorf("refusals wrote events: %+v", hist)
	}
	if all, _ := e.store.List(context.Background()); len(all) != 1 {
		t.Errorf("refusals stored agents: %d", len(all))
	}
}

func TestUpdateDisableEnable(t *testing.T) {
	e := newEnv(t)
	if st, _ := e.call(t, operator, "POST", agents.Prefix, e.sellerBody("acme")); st != 201 {
		t.Fatal(st)
	}
	st, m := e.call(t, operator, "PATCH", agents.Prefix+"/acme", `{"settings":{"sweep_reads_per_second":2}}`)
	if set, _ := json.Marshal(m["settings"]); st != 200 || string(set) != `{"sweep_reads_per_second":2}` {
		t.Fatalf("update: %d %v", st, m)
	}
	st, m = e.call(t, operator, "POST", agents.Prefix+"/acme/disable", `{"reason":"contract paused until April"}`)
	if st != 200 || m["disabled"] != true || m["disabled_reason"] != "contract paused until April" || m["updated_by"] != operator {
		t.Fatalf("disable: %d %v", st, m)
	}
	st, m = e.call(t, operator, "POST", agents.Prefix+"/acme/enable", ``)
	if st != 200 || m["disabled"] != false {
		t.Fatalf("enable: %d %v", st, m)
	}
	hist, _ := e.store.History(context.Background(), "acme")
	var actions []string
	for _, h := range hist {
		actions = append(actions, h.Action)
	}
	if got := strings.Join(actions, ","); got != "added,capabilities,updated,capabilities,disabled,enabled" {
		t.Errorf("audit trail = %s", got)
	}
}

// TestSeedThroughCloudFormation: the custom resource's Create loads the seed and answers
// CloudFormation at its response URL; a bad seed fails the deploy with its reason; Delete
// leaves the registry alone.
func TestSeedThroughCloudFormation(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var answers []map[string]any
	cfn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		answers = append(answers, m)
		mu.Unlock()
	}))
	defer cfn.Close()
	invoke := func(kind, seed string) map[string]any {
		t.Helper()
		ev, _ := json.Marshal(map[string]any{"RequestType": kind, "RequestId": "r-" + kind, "ResponseURL": cfn.URL + "/answer",
			"ResourceType": agents.SeedResourceType, "LogicalResourceId": "AgentsSeed", "StackId": "arn:aws:cloudformation:us-east-1:111122223333:stack/Buyflow/x",
			"ResourceProperties": map[string]any{agents.SeedProperty: seed}})
		if _, err := e.svc.Invoke(context.Background(), ev); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		mu.Lock()
		defer mu.Unlock()
		return answers[len(answers)-1]
	}
	seed := `{"agents":[` + e.sellerBody("acme")[:strings.Index(e.sellerBody("acme"), `,"settings"`)] + `}]}`
	if a := invoke("Create", seed); a["Status"] != "SUCCESS" {
		t.Fatalf("create answered %v", a)
	}
	got, err := e.store.Get(context.Background(), "acme")
	if err != nil || got.UpdatedBy != agents.ActorDeploy || got.Capabilities == nil {
		t.Fatalf("seeded agent = %+v, %v", got, err)
	}
	if a := invoke("Update", `{"agents":[{"id":"bad","role":"seller"}]}`); a["Status"] != "FAILED" || !strings.Contains(a["Reason"].(string), "mcp_url") {
		t.Fatalf("bad seed answered %v", a)
	}
	if a := invoke("Delete", seed); a["Status"] != "SUCCESS" {
		t.Fatalf("delete answered %v", a)
	}
	if _, err := e.store.Get(context.Background(), "acme"); err != nil {
		t.Fatalf("delete removed the agent: %v", err)
	}
}

func TestScheduledRefresh(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"acme", "beta"} {
		if st, _ := e.call(t, operator, "POST", agents.Prefix, e.sellerBody(id)); st != 201 {
			t.Fatal(st)
		}
	}
	if st, _ := e.call(t, operator, "POST", agents.Prefix+"/beta/disable", ``); st != 200 {
		t.Fatal(st)
	}
	out, err := e.svc.Invoke(context.Background(), json.RawMessage(`{"action":"`+agents.ActionRefresh+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	// beta is disabled: not checked. acme answers.
	if r := out.(agents.RefreshResult); r.Checked != 1 || r.Failed != 0 {
		t.Fatalf("refresh = %+v", r)
	}
	hist, _ := e.store.History(context.Background(), "acme")
	if last := hist[len(hist)-1]; last.Action != registry.ActionCapabilities || last.Actor != agents.ActorSchedule {
		t.Fatalf("last event = %+v", last)
	}
	if _, err := e.svc.Invoke(context.Background(), json.RawMessage(`{"something":"else"}`)); err == nil {
		t.Fatal("an unknown invocation was accepted")
	}
}

// An operator's change whose response DynamoDB's answer never reached buyflow: the SDK sends
// it again, and the change is answered as the success it was, not as a conflict.
func TestAChangeWhoseResponseWasLostAnswersItsSuccess(t *testing.T) {
	client, table, conflicts := dynamotest.StartConflicting(t, 0)
	e := newEnvOn(t, client, table)
	conflicts.LoseResponses(1)
	if st, m := e.call(t, operator, "POST", agents.Prefix, e.sellerBody("acme")); st != 201 {
		t.Fatalf("add: %d %v", st, m)
	}
	conflicts.LoseResponses(1)
	st, m := e.call(t, operator, "PATCH", agents.Prefix+"/acme", `{"settings":{"sweep_reads_per_second":2}}`)
	if set, _ := json.Marshal(m["settings"]); st != 200 || string(set) != `{"sweep_reads_per_second":2}` {
		t.Fatalf("update: %d %v", st, m)
	}
	if conflicts.Lost() != 2 {
		t.Fatalf("%d responses lost, want 2", conflicts.Lost())
	}
}

// alwaysRacing refuses every transaction as DynamoDB refuses one racing another on its items.
type alwaysRacing struct{ registry.API }

func (alwaysRacing) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"),
		CancellationReasons: []types.CancellationReason{{Code: aws.String("TransactionConflict")}, {Code: aws.String("None")}}}
}

// A change that kept losing races after the registry's own retries is a 409 the operator may
// send again at once, not a 500 and not "the agent exists".
func TestAChangeThatKeepsLosingRacesIsAConcurrentWrite(t *testing.T) {
	client, table := dynamotest.Start(t)
	e := newEnvOn(t, alwaysRacing{client}, table)
	st, m := e.call(t, operator, "POST", agents.Prefix, e.sellerBody("acme"))
	if st != 409 || code(m) != httpapi.CodeConcurrentWrite {
		t.Fatalf("add: %d %v, want 409 %s", st, m, httpapi.CodeConcurrentWrite)
	}
	if _, err := e.store.Get(context.Background(), "acme"); !errors.Is(err, registry.ErrUnknown) {
		t.Fatalf("the refused add left an agent: %v", err)
	}
}
