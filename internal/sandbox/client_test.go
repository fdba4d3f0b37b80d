package sandbox

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
)

// functionURL serves h over HTTP the way a Lambda Function URL does: each request becomes a
// payload-2.0 event (headers lowercased and joined, the body base64-encoded), the answer is
// written back from the handler's response.
func functionURL(t *testing.T, h func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		hdr := map[string]string{}
		for k, v := range r.Header {
			hdr[strings.ToLower(k)] = strings.Join(v, ",")
		}
		in := events.LambdaFunctionURLRequest{Version: "2.0", RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery, Headers: hdr,
			Body: base64.StdEncoding.EncodeToString(body), IsBase64Encoded: true}
		in.RequestContext.HTTP.Method = r.Method
		in.RequestContext.DomainName = r.Host
		out, err := h(r.Context(), in)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, v := range out.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(out.StatusCode)
		b, _ := base64.StdEncoding.DecodeString(out.Body)
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// buyflow's own AdCP client (the one every function uses) reads both sandbox agents through
// the Lambda handler: the MCP exchange survives the Function URL event and answer, and a
// wrong bearer token is refused as a seller refuses it.
func TestBuyflowsClientCallsTheSandboxAgents(t *testing.T) {
	signer, jwks, err := WebhookKey([]byte(strings.Repeat("k", 48)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Seller(token, signer, jwks)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := Governance(token)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	sellerURL, govURL := functionURL(t, Handler(s, SellerSettle(s))), functionURL(t, Handler(g, nil))
	reg, err := adcp.ParseRegistry([]byte(`{"agents":[
		{"id":"sandbox-seller","role":"seller","mcp_url":"` + sellerURL + `/mcp","credential_ref":"s",
		 "webhook":{"mode":"rfc9421","jwks_uri":"https://sandbox.example/.well-known/jwks.json"}},
		{"id":"sandbox-governance","role":"governance","mcp_url":"` + govURL + `/mcp","credential_ref":"g"},
		{"id":"impostor","role":"governance","mcp_url":"` + govURL + `/mcp","credential_ref":"wrong"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	schemas, err := adcpschemas.FS()
	if err != nil {
		t.Fatal(err)
	}
	v, err := adcpvalidate.NewValidator(schemas)
	if err != nil {
		t.Fatal(err)
	}
	c, err := adcp.New(adcp.Options{Registry: reg, Validator: v, Credentials: adcp.CredentialsFunc(func(_ context.Context, ref string) (string, error) {
		if ref == "wrong" {
			return "not-the-token", nil
		}
		return token, nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"sandbox-seller", "sandbox-governance"} {
		caps, err := c.Capabilities(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if len(caps.SupportedVersions) == 0 {
			t.Errorf("%s: capabilities %s", id, caps.Raw)
		}
	}
	tools, err := c.Tools(ctx, "sandbox-seller")
	if err != nil || !tools["create_media_buy"] || !tools["get_task_status"] {
		t.Errorf("the seller's tools %v (%v)", tools, err)
	}
	_, err = c.Capabilities(ctx, "impostor")
	var ae *adcp.Error
	if err == nil || !errors.As(err, &ae) || !strings.Contains(err.Error(), "AUTH") {
		t.Errorf("a wrong token: %v, want the agent's AUTH_INVALID", err)
	}
}
