package webhook_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
	"github.com/buyflow/buyflow/internal/apigwtest"
	"github.com/buyflow/buyflow/internal/delivery"
	"github.com/buyflow/buyflow/internal/webhook"
)

// TestSellerPushesDeliveryReports places a buy at the simulated seller (a real MCP server that
// offers push reporting) with the reporting_webhook the create stage registers (the buy's
// webhook URL, its token as the Bearer credential), and lets the seller push its reports to
// the webhook handler served over HTTP: each is authenticated by the operation's token,
// recorded once, and the buy is marked pushed. A task update presented with that credential is
// refused: it authenticates delivery reports only.
func TestSellerPushesDeliveryReports(t *testing.T) {
	e := newEnvWith(t, func(c *webhook.Config) {
		c.Reports = delivery.New(c.Ledger.(delivery.Store), nil, delivery.Config{Now: c.Now})
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/v1/webhooks/adcp/")
		req, err := apigwtest.Request(r, "POST /v1/webhooks/adcp/{operation_id}", map[string]string{"operation_id": id})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, _ := e.svc.HandleHTTP(r.Context(), req)
		_ = apigwtest.WriteResponse(w, resp)
	}))
	t.Cleanup(srv.Close)
	seller := adcptest.NewSeller(adcptest.SellerOptions{Now: e.clock.Now, PushReporting: true})
	seller.Start()
	t.Cleanup(seller.Close)
	fsys, err := adcpschemas.FS()
	if err != nil {
		t.Fatal(err)
	}
	v, err := adcpvalidate.NewValidator(fsys)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := adcp.NewRegistry(adcp.RegistryConfig{Agents: []adcp.Agent{{ID: sellerHMAC, Role: adcp.RoleSeller, MCPURL: seller.URL(), CredentialRef: "cred",
		Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookHMAC, HMACSecretRef: "hmac"}}}})
	if err != nil {
		t.Fatal(err)
	}
	client, err := adcp.New(adcp.Options{Registry: reg, Validator: v, CallTimeout: 5 * time.Second,
		Credentials: adcp.CredentialsFunc(func(context.Context, string) (string, error) { return adcptest.DefaultSellerToken, nil })})
	if err != nil {
		t.Fatal(err)
	}
	caps, err := client.Capabilities(e.ctx, sellerHMAC)
	if err != nil || !caps.PushesDelivery() {
		t.Fatalf("the seller does not offer push reporting: %v", err)
	}
	tok := token("op-s") + strings.Repeat("0", 16) // the create stage's tokens are 64 characters
	in, err := adcp.NewIntent(adcp.ToolCreateMediaBuy, adcp.CreateMediaBuyRequest{Account: adcp.AccountRef{AccountID: "acct-1"},
		Brand: adcp.BrandRef{Domain: "acme.example"}, StartTime: "asap", EndTime: "2099-04-01T00:00:00Z", Context: json.RawMessage(`{"sim":"sync"}`),
		Packages: []adcp.PackageRequest{{ProductID: "p", PricingOptionID: "cpm", Budget: "1500"}},
		ReportingWebhook: &adcp.ReportingWebhook{URL: srv.URL + "/v1/webhooks/adcp/op-s", Token: tok, ReportingFrequency: "daily",
			Authentication: adcp.WebhookAuthentication{Schemes: []string{"Bearer"}, Credentials: tok}}}, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	created, err := client.CreateMediaBuy(e.ctx, sellerHMAC, in)
	if err != nil {
		t.Fatal(err)
	}
	e.syncOpWithToken("op-s", sellerHMAC, created.MediaBuyID, tok)

	seller.SetDelivered(created.MediaBuyID, 12000, "700.25")
	for i, want := range []int{1, 1, 2} {
		if i == 2 {
			seller.SetDelivered(created.MediaBuyID, 15000, "900")
		}
		e.clock.Advance(time.Hour)
		if code, err := seller.PushDelivery(created.MediaBuyID, "scheduled"); err != nil || code != http.StatusOK {
			t.Fatalf("push %d: %d %v", i, code, err)
		}
		snaps, err := e.store.ListDeliverySnapshots(e.ctx, tenant, "op-s", 10)
		if err != nil || len(snaps) != want {
			t.Fatalf("after push %d: %d snapshots %v, want %d", i, len(snaps), err, want)
		}
	}
	if !e.get("op-s").DeliveryPushed {
		t.Fatal("the buy is not marked pushed")
	}

	task := payload("op-s", "completed", key("task-with-bearer"))
	req := e.request("op-s", sellerHMAC, mustJSON(t, task), signOpts{})
	delete(req.Headers, "x-adcp-signature")
	req.Headers["authorization"] = "Bearer " + tok
	if resp := e.post(req); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Headers["WWW-Authenticate"], "webhook_mode_mismatch") {
		t.Fatalf("a task update with the reporting credential: %d %v %s", resp.StatusCode, resp.Headers, resp.Body)
	}
}
