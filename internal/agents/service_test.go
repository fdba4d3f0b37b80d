package agents_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/buyflow/buyflow/internal/adcpvalidate"
	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/registry"
	"github.com/buyflow/buyflow/internal/reqsign"
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
	return newEnvWith(t, api, table, nil, nil)
}

// newEnvWith is newEnvOn with a seller declaring requestSigning and the deployment's signer.
func newEnvWith(t *testing.T, api registry.API, table string, requestSigning json.RawMessage, signer *reqsign.Signer) *env {
	t.Helper()
	v, err := adcptest.NewValidator("")
	if err != nil {
		t.Fatal(err)
	}
	seller := httptest.NewServer(adcptest.NewSeller(adcptest.SellerOptions{Token: sellerTok, Validator: v, RequestSigning: requestSigning}))
	t.Cleanup(seller.Close)
	store := registry.NewStore(api, table)
	creds := adcp.CredentialsFunc(func(_ context.Context, ref string) (string, error) {
		if ref == prefix+"acme" {
			return sellerTok, nil
		}
		return "wrong-token-0123456789", nil
	})
	prober, err := adcp.New(adcp.Options{Agents: store, Credentials: creds, Validator: adcpvalidate.NewReleasesValidator(adcpschemas.Open), CapabilitiesTTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := agents.New(agents.Config{Registry: store, Prober: prober, Signer: signer, SecretPrefix: prefix,
		Secrets: webhookSecrets, Operators: []string{operator}, ProbeTimeout: 5 * time.Second})
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

// webhookSecrets are the webhook secrets the tests' agents name, by name.
var webhookSecrets = secretsOf{
	prefix + "hook-short":          "sixteen-bytes-16",
	prefix + "hook-ok":             "a-webhook-secret-of-32-bytes-ok!",
	prefix + "hook-short-previous": `{"current":"a-webhook-secret-of-32-bytes-ok!","previous":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
}

type secretsOf map[string]string

func (s secretsOf) Get(_ context.Context, name string) ([]byte, error) {
	if v, ok := s[name]; ok {
		return []byte(v), nil
	}
	return nil, errors.New("no secret " + name)
}

// TestAddRefusesAWebhookSecretTheReceiverWouldRefuse: an HMAC or bearer webhook secret under
// 32 bytes (or one repeated byte, current or previous) is refused at add and at update with
// 422 invalid_agent naming the field, the secret and why, never its value; a good secret, or
// one not created yet, is accepted.
func TestAddRefusesAWebhookSecretTheReceiverWouldRefuse(t *testing.T) {
	e := newEnv(t)
	withHook := func(id, mode, ref string) string {
		return strings.Replace(e.sellerBody(id), `{"mode":"rfc9421","jwks_uri":"https://`+id+`.example/.well-known/jwks.json"}`,
			`{"mode":"`+mode+`","`+mode+`_secret_ref":"`+prefix+ref+`"}`, 1)
	}
	for _, c := range []struct{ id, mode, ref, want string }{
		{"short-hmac", "hmac", "hook-short", "webhook.hmac_secret_ref " + prefix + "hook-short: its value is refused (secret has 16 bytes, at least 32 are needed)"},
		{"short-bearer", "bearer", "hook-short", "webhook.bearer_secret_ref " + prefix + "hook-short"},
		{"repeated-previous", "hmac", "hook-short-previous", "its previous value is refused (secret is one repeated byte)"},
	} {
		st, m := e.call(t, operator, "POST", agents.Prefix, withHook(c.id, c.mode, c.ref))
		msg, _ := json.Marshal(m)
		if st != 422 || code(m) != "invalid_agent" || !strings.Contains(string(msg), c.want) {
			t.Errorf("%s: %d %s, want 422 invalid_agent with %q", c.id, st, msg, c.want)
		}
		if strings.Contains(string(msg), "sixteen-bytes-16") || strings.Contains(string(msg), "xxxxxxxx") {
			t.Errorf("%s: the answer carries the secret: %s", c.id, msg)
		}
		if st, _ := e.call(t, operator, "GET", agents.Prefix+"/"+c.id, ""); st != 404 {
			t.Errorf("%s: refused, yet stored (%d)", c.id, st)
		}
	}
	for _, ref := range []string{"hook-ok", "hook-not-created-yet"} {
		if st, m := e.call(t, operator, "POST", agents.Prefix, withHook(ref, "hmac", ref)); st != 201 {
			t.Errorf("%s: %d %v", ref, st, m)
		}
	}
	// An update that names a short secret is refused and changes nothing.
	st, m := e.call(t, operator, "PATCH", agents.Prefix+"/hook-ok", `{"webhook":{"mode":"hmac","hmac_secret_ref":"`+prefix+`hook-short"}}`)
	if msg, _ := json.Marshal(m); st != 422 || code(m) != "invalid_agent" || !strings.Contains(string(msg), "hook-short: its value is refused") {
		t.Errorf("update to a short secret: %d %s", st, msg)
	}
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

// TestTheCheckRecordsTheNegotiatedVersion: the check keeps the AdCP version the functions
// will speak with the agent (adcp.Negotiate); a pin the agent cannot honour fails the check,
// and a pin that is no version buyflow knows is refused at the door.
func TestTheCheckRecordsTheNegotiatedVersion(t *testing.T) {
	e := newEnv(t)
	_, m := e.call(t, operator, "POST", agents.Prefix, e.sellerBody("acme"))
	if caps, _ := m["capabilities"].(map[string]any); caps == nil || caps["wire_version"] != "3.1" {
		t.Fatalf("a 3.0/3.1 seller: %v", caps)
	}
	// The seller's credential is acme's: pin acme itself, in a registry of its own.
	e2 := newEnv(t)
	pinned := strings.Replace(e2.sellerBody("acme"), `"role"`, `"adcp_version":"3.3-rc.0","role"`, 1)
	st, m := e2.call(t, operator, "POST", agents.Prefix, pinned)
	caps, _ := m["capabilities"].(map[string]any)
	if errText, _ := caps["error"].(string); st != 201 || !strings.Contains(errText, "pinned to 3.3-rc.0") {
		t.Fatalf("RC pin at a seller without it: %d %v", st, m)
	}
	bad := strings.Replace(e.sellerBody("old"), `"role"`, `"adcp_version":"2.5","role"`, 1)
	if st, m := e.call(t, operator, "POST", agents.Prefix, bad); st != 422 || code(m) != "invalid_agent" || !strings.Contains(fmt.Sprint(m), "adcp_version") {
		t.Fatalf("pin 2.5: %d %v", st, m)
	}
}

// TestTheCheckReportsRequestSigning: the agent's request_signing block is kept on its record
// with the key buyflow signs with, and the audit line says whether the agent requires signing
// and whether buyflow signs for it.
func TestTheCheckReportsRequestSigning(t *testing.T) {
	requires := json.RawMessage(`{"supported":true,"covers_content_digest":"required","required_for":["create_media_buy"]}`)
	for _, tc := range []struct {
		name   string
		signer *reqsign.Signer
		kid    string
		says   string
	}{
		{"no key", nil, "", "request signing required for create_media_buy; buyflow has no request-signing key: buys to it are refused at submit"},
		{"a key", &reqsign.Signer{KeyID: "kid-1", Key: ed25519.NewKeyFromSeed(make([]byte, 32))}, "kid-1", "request signing required for create_media_buy; buyflow signs what it requires with key kid-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, table := dynamotest.Start(t)
			e := newEnvWith(t, client, table, requires, tc.signer)
			st, m := e.call(t, operator, "POST", agents.Prefix, e.sellerBody("acme"))
			caps, _ := m["capabilities"].(map[string]any)
			rs, _ := json.Marshal(caps["request_signing"])
			if st != 201 || !strings.Contains(string(rs), `"required_for":["create_media_buy"]`) || caps["signing_key_id"] != nil && caps["signing_key_id"] != tc.kid {
				t.Fatalf("add: %d %v", st, caps)
			}
			rec, err := e.store.Get(context.Background(), "acme")
			if err != nil {
				t.Fatal(err)
			}
			if got := agents.SigningSummary(rec); got != tc.says {
				t.Errorf("summary %q, want %q", got, tc.says)
			}
			if !rec.RequiresSignedCreate() {
				t.Error("the record does not say the agent requires signed creates")
			}
			_, m = e.call(t, operator, "GET", agents.Prefix+"/acme", "")
			if hist, _ := json.Marshal(m["history"]); !strings.Contains(string(hist), tc.says) {
				t.Errorf("history %s lacks %q", hist, tc.says)
			}
		})
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

// TestUpdateSignRequests: the operator's flag to sign every request to an agent is set and
// cleared by an update.
func TestUpdateSignRequests(t *testing.T) {
	e := newEnv(t)
	if st, _ := e.call(t, operator, "POST", agents.Prefix, e.sellerBody("acme")); st != 201 {
		t.Fatal(st)
	}
	if st, m := e.call(t, operator, "PATCH", agents.Prefix+"/acme", `{"sign_requests":true}`); st != 200 || m["sign_requests"] != true {
		t.Fatalf("sign_requests on: %d %v", st, m)
	}
	if st, m := e.call(t, operator, "PATCH", agents.Prefix+"/acme", `{"sign_requests":false}`); st != 200 || m["sign_requests"] != nil {
		t.Fatalf("sign_requests off: %d %v", st, m)
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

// panickingRegistry crashes the seed: the handler's bug, not the seed's.
type panickingRegistry struct{ agents.Registry }

func (panickingRegistry) Seed(context.Context, []adcp.Agent, string) ([]string, error) {
	panic("a bug in the seed")
}

// TestSeedKeepsCloudFormationsResponseContract holds the custom resource to what CloudFormation
// accepts, answering at the pre-signed S3 URL it sends: a PUT to that URL with its query kept
// byte for byte (the signature covers it), no Content-Type (the URL was signed without one),
// and a body of at most 4,096 bytes, so that a seed refusing hundreds of agents still fails the
// deploy with its reason instead of leaving the stack waiting. A crash inside the handler
// still answers FAILED.
func TestSeedKeepsCloudFormationsResponseContract(t *testing.T) {
	e := newEnv(t)
	const query = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261202%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261202T000000Z&X-Amz-Expires=7200&X-Amz-SignedHeaders=host&X-Amz-Signature=0123abcd"
	var mu sync.Mutex
	var answers []map[string]any
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch {
		case r.Method != http.MethodPut, r.URL.RawQuery != query, r.Header.Get("Content-Type") != "":
			t.Errorf("answered with %s ?%s Content-Type %q", r.Method, r.URL.RawQuery, r.Header.Get("Content-Type"))
			w.WriteHeader(http.StatusForbidden) // S3: SignatureDoesNotMatch
			return
		case len(b) > 4096:
			t.Errorf("answer of %d bytes: CloudFormation refuses more than 4096", len(b))
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		answers = append(answers, m)
		mu.Unlock()
	}))
	defer s3.Close()
	event := func(kind, seed string) json.RawMessage {
		ev, _ := json.Marshal(map[string]any{"RequestType": kind, "RequestId": "4fd1c2a8-0b6e-4d0e-9c1e-" + strings.Repeat("0", 12),
			"ResponseURL":  s3.URL + "/cloudformation-custom-resource-response-useast1/arn%3Aaws%3Acloudformation%3Aus-east-1%3A111122223333%3Astack/Buyflow/x%7CAgentsSeed%7C4fd1?" + query,
			"ResourceType": agents.SeedResourceType, "LogicalResourceId": "AgentsSeed", "PhysicalResourceId": "buyflow-agents-seed",
			"StackId":            "arn:aws:cloudformation:us-east-1:111122223333:stack/Buyflow/0b6e4d0e-9c1e-11ee-8c90-0242ac120002",
			"ResourceProperties": map[string]any{"ServiceToken": "arn:aws:lambda:us-east-1:111122223333:function:agents", agents.SeedProperty: seed}})
		return ev
	}
	last := func() map[string]any {
		mu.Lock()
		defer mu.Unlock()
		if len(answers) == 0 {
			t.Fatal("CloudFormation got no answer")
		}
		return answers[len(answers)-1]
	}
	seed := `{"agents":[` + e.sellerBody("acme")[:strings.Index(e.sellerBody("acme"), `,"settings"`)] + `}]}`
	for _, kind := range []string{"Create", "Update", "Delete"} {
		if _, err := e.svc.Invoke(context.Background(), event(kind, seed)); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if a := last(); a["Status"] != "SUCCESS" || a["PhysicalResourceId"] != "buyflow-agents-seed" {
			t.Fatalf("%s answered %v", kind, a)
		}
	}

	// Three hundred agents, each refused with its own reason (and quotes to escape).
	var bad []string
	for i := range 300 {
		bad = append(bad, fmt.Sprintf(`{"id":"bad-\"%03d\"","role":"seller"}`, i))
	}
	if _, err := e.svc.Invoke(context.Background(), event("Update", `{"agents":[`+strings.Join(bad, ",")+`]}`)); err != nil {
		t.Fatal(err)
	}
	if a := last(); a["Status"] != "FAILED" || !strings.HasPrefix(a["Reason"].(string), "agents seed: ") {
		t.Fatalf("a refused seed answered %v", a)
	}

	crashing, err := agents.New(agents.Config{Registry: panickingRegistry{e.store}, Prober: noProber{}, Operators: []string{operator}})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }() // the runtime reports the panic; CloudFormation must have its answer first
		_, _ = crashing.Invoke(context.Background(), event("Create", seed))
	}()
	if a := last(); a["Status"] != "FAILED" {
		t.Fatalf("a crash answered %v", a)
	}
}

// noProber reaches no agent: the crash happens before any is checked.
type noProber struct{}

func (noProber) Capabilities(context.Context, string) (*adcp.Capabilities, error) {
	return nil, errors.New("no agent is reachable here")
}

func (noProber) Tools(context.Context, string) (map[string]bool, error) {
	return nil, errors.New("no agent is reachable here")
}
