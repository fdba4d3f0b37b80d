package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/apigwtest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/registry"
)

// operatorAPI serves the real operator API over HTTP, as API Gateway and the local stack's
// dev header would: the registry in a DynamoDB stand-in, a simulated seller to probe.
func operatorAPI(t *testing.T) (api, sellerURL string) {
	t.Helper()
	v, err := adcptest.NewValidator("")
	if err != nil {
		t.Fatal(err)
	}
	seller := httptest.NewServer(adcptest.NewSeller(adcptest.SellerOptions{Token: "tok-0123456789abcdef", Validator: v}))
	t.Cleanup(seller.Close)
	client, table := dynamotest.Start(t)
	store := registry.NewStore(client, table)
	creds := adcp.CredentialsFunc(func(context.Context, string) (string, error) { return "tok-0123456789abcdef", nil })
	prober, err := adcp.New(adcp.Options{Agents: store, Credentials: creds, Validator: adcpvalidate.NewReleasesValidator(adcpschemas.Open), CapabilitiesTTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := agents.New(agents.Config{Registry: store, Prober: prober, SecretPrefix: "buyflow/agents/",
		Operators: []string{"dev:operator"}, DevTenantHeader: "X-Buyflow-Tenant"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := apigwtest.Request(r, "ANY /v1/operator/{proxy+}", nil)
		if err != nil {
			t.Error(err)
			return
		}
		resp, _ := svc.HandleHTTP(r.Context(), ev)
		_ = apigwtest.WriteResponse(w, resp)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, seller.URL + "/mcp"
}

func TestAgentsCommands(t *testing.T) {
	api, sellerURL := operatorAPI(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "acme.json")
	if err := os.WriteFile(file, []byte(`{"id":"acme","role":"seller","mcp_url":"`+sellerURL+`","credential_ref":"buyflow/agents/acme",
		"webhook":{"mode":"rfc9421","jwks_uri":"https://acme.example/.well-known/jwks.json"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	patch := filepath.Join(dir, "patch.json")
	if err := os.WriteFile(patch, []byte(`{"settings":{"sweep_reads_per_second":4}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(principal string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		env := map[string]string{"BUYFLOW_ENDPOINT": api, "BUYFLOW_TENANT": "demo", "BUYFLOW_PRINCIPAL": principal}
		code := run(context.Background(), append([]string{"agents"}, args...), func(k string) string { return env[k] }, nil, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	steps := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"list"}, 0, []string{"the registry has no agents"}},
		{[]string{"add", file}, 0, []string{"mcp url", "replay window    86400s", "create_media_buy", "by dev:operator"}},
		{[]string{"add", file}, 1, []string{"agent_exists"}},
		{[]string{"update", "acme", patch}, 0, []string{`{"sweep_reads_per_second":4}`}},
		{[]string{"disable", "acme", "--reason", "contract paused"}, 0, []string{"disabled", "contract paused"}},
		{[]string{"list"}, 0, []string{"acme", "disabled", sellerURL}},
		{[]string{"enable", "acme"}, 0, []string{"enabled"}},
		{[]string{"check", "acme"}, 0, []string{"adcp versions"}},
		{[]string{"show", "acme"}, 0, []string{"added", "updated", "disabled", "contract paused", "enabled", "capabilities"}},
		{[]string{"show", "nobody"}, 1, []string{"not_found"}},
		{[]string{"explode"}, 2, []string{"unknown subcommand"}},
		{[]string{"show"}, 2, []string{"wrong number of arguments"}},
	}
	for _, s := range steps {
		code, out, errOut := cli("dev:operator", s.args...)
		if code != s.code {
			t.Fatalf("agents %v: exit %d, want %d\n%s%s", s.args, code, s.code, out, errOut)
		}
		for _, w := range s.want {
			if !strings.Contains(out+errOut, w) {
				t.Errorf("agents %v: no %q in\n%s%s", s.args, w, out, errOut)
			}
		}
	}
	if code, out, errOut := cli("dev:demo", "list"); code != 1 || !strings.Contains(out+errOut, "not_an_operator") {
		t.Errorf("a buyer listing agents: exit %d\n%s%s", code, out, errOut)
	}
}

// TestAgentsAuthModes: an agent added with OAuth client credentials shows its client, secret
// and token endpoint, and its check reports an authorization server that fails in words an
// operator can act on; "auth": null returns it to its static bearer token, which the seller
// accepts.
func TestAgentsAuthModes(t *testing.T) {
	api, sellerURL := operatorAPI(t)
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(as.Close)
	dir := t.TempDir()
	file := filepath.Join(dir, "acme.json")
	if err := os.WriteFile(file, []byte(`{"id":"acme","role":"seller","mcp_url":"`+sellerURL+`","credential_ref":"buyflow/agents/acme",
		"auth":{"mode":"oauth2_client_credentials","client_id":"buyflow-prod","token_url":"`+as.URL+`/token","scopes":["adcp:buy"]},
		"webhook":{"mode":"rfc9421","jwks_uri":"https://acme.example/.well-known/jwks.json"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	toBearer := filepath.Join(dir, "bearer.json")
	if err := os.WriteFile(toBearer, []byte(`{"auth":null}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		env := map[string]string{"BUYFLOW_ENDPOINT": api, "BUYFLOW_TENANT": "demo", "BUYFLOW_PRINCIPAL": "dev:operator"}
		code := run(context.Background(), append([]string{"agents"}, args...), func(k string) string { return env[k] }, nil, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	steps := []struct {
		args []string
		want []string
	}{
		{[]string{"add", file}, []string{"OAuth 2.0 client credentials, client buyflow-prod, client secret buyflow/agents/acme",
			"token endpoint  " + as.URL + "/token", `scopes "adcp:buy"`,
			"BUYFLOW_TOKEN_ENDPOINT_FAILED", "answered HTTP 503"}},
		{[]string{"update", "acme", toBearer}, []string{"static bearer token buyflow/agents/acme"}},
		{[]string{"check", "acme"}, []string{"adcp versions"}},
	}
	for _, s := range steps {
		code, out := cli(s.args...)
		if code != 0 {
			t.Fatalf("agents %v: exit %d\n%s", s.args, code, out)
		}
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				t.Errorf("agents %v: no %q in\n%s", s.args, w, out)
			}
		}
	}
	if _, out := cli("check", "acme"); strings.Contains(out, "check failed") {
		t.Errorf("a bearer agent's check still fails:\n%s", out)
	}
}
