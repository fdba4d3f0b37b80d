package webhook_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/webhook"
	"github.com/buyflow/buyflow/internal/webhookauth"
	"github.com/buyflow/buyflow/internal/workflow"
)

var update = flag.Bool("update", false, "rewrite testdata/apigw-v2-webhook.json")

const fixturePath = "testdata/apigw-v2-webhook.json"

// fixtureKey is the deterministic Ed25519 key that signed the fixture.
func fixtureKey() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("buyflow webhook fixture key"))
	return ed25519.NewKeyFromSeed(seed[:])
}

// writeFixture builds the API Gateway HTTP API (payload 2.0) event of a signed delivery the way
// API Gateway delivers it: lower-cased headers, a named stage, a base64-encoded body.
func writeFixture(t *testing.T, at time.Time) {
	body := mustJSON(t, payload("op-fixture", "completed", key("fixture")))
	hr, _ := http.NewRequest(http.MethodPost, "https://api.buyflow.example/v1/webhooks/adcp/op-fixture", bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	s := &webhookauth.RFC9421Signer{KeyID: "fixture-kid", Key: fixtureKey(), Now: func() time.Time { return at },
		Nonce: func() string { return "bm9uY2Utb2YtdGhlLWZpeHR1cmU" }}
	if err := s.Sign(hr, body); err != nil {
		t.Fatal(err)
	}
	h := map[string]string{"host": "api.buyflow.example", "user-agent": "adcp-sdk/6.11.0", "content-length": strconv.Itoa(len(body)),
		"x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.7", "x-amzn-trace-id": "Root=1-5e66d96f-7491f09xmpl79d18acf3d050"}
	for k, v := range hr.Header {
		h[strings.ToLower(k)] = strings.Join(v, ",")
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /v1/webhooks/adcp/{operation_id}", RawPath: "/v1/webhooks/adcp/op-fixture",
		Headers: h, PathParameters: map[string]string{"operation_id": "op-fixture"}, IsBase64Encoded: true,
		Body: base64.StdEncoding.EncodeToString(body),
		RequestContext: events.APIGatewayV2HTTPRequestContext{AccountID: "123456789012", APIID: "r3pmxmplak",
			DomainName: "api.buyflow.example", DomainPrefix: "api", RequestID: "JKJaXmPLvHcESHA=", RouteKey: "POST /v1/webhooks/adcp/{operation_id}",
			Stage: "$default", Time: "01/Jan/2099:12:00:00 +0000", TimeEpoch: at.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/v1/webhooks/adcp/op-fixture",
				Protocol: "HTTP/1.1", SourceIP: "203.0.113.7", UserAgent: "adcp-sdk/6.11.0"}},
	}
	out, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(fixturePath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixturePath, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAPIGatewayFixture runs a recorded-shape API Gateway event through the handler: the exact
// target URI is rebuilt from domainName and rawPath, the base64 body is verified as sent.
func TestAPIGatewayFixture(t *testing.T) {
	at := time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC)
	if *update {
		writeFixture(t, at)
	}
	raw, err := os.ReadFile(fixturePath)
	if err != nil {
		t.Fatal(err)
	}
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	jwk, err := webhookauth.PublicJWK("fixture-kid", fixtureKey())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, func(c *webhook.Config) {
		v, err := webhookauth.New(webhookauth.Config{Mode: webhookauth.ModeRFC9421, JWKS: []byte(`{"keys":[` + string(jwk) + `]}`), Replay: c.Ledger.(webhookauth.ReplayStore), Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		c.Verifiers["fixture-seller"] = v
	})
	e.op("op-fixture", "fixture-seller", true)
	resp, err := e.svc.HandleHTTP(context.Background(), req)
	if err != nil || resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
		t.Fatalf("answer = %d %s %v", resp.StatusCode, resp.Body, err)
	}
	if op := e.get("op-fixture"); op.Status != workflow.StatusCompleted || op.MediaBuyID != "mb-op-fixture" {
		t.Fatalf("operation = %s %q", op.Status, op.MediaBuyID)
	}
	if resp.Headers["Content-Type"] != "application/json" || len(resp.Body) > 64 {
		t.Errorf("answer headers %v body %q: want a small JSON body", resp.Headers, resp.Body)
	}
}
