package webhook_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/delivery"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/webhook"
	"github.com/buyflow/buyflow/internal/webhookauth"
	"github.com/buyflow/buyflow/internal/webhookroute"
)

// BenchmarkHandlerRFC9421 is the end-to-end handler cost of one RFC 9421 delivery against
// kumo's DynamoDB (the local stand-in): lookup, Ed25519 verification with the ledger's nonce
// write, receipt, transition and, for completed, the token clear and wake (a no-op fake).
func BenchmarkHandlerRFC9421(b *testing.B) { benchHandler(b, seller9421) }

// BenchmarkHandlerHMAC is BenchmarkHandlerRFC9421 for a legacy HMAC-SHA256 seller.
func BenchmarkHandlerHMAC(b *testing.B) { benchHandler(b, sellerHMAC) }

func benchHandler(b *testing.B, seller string) {
	cases := []struct{ name, status string }{
		{"applied-working", "working"},
		{"applied-completed-wake", "completed"},
		{"duplicate", ""},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b)
			e.op("op-dup", seller, true)
			if c.status == "" {
				if resp := e.deliver("op-dup", seller, payload("op-dup", "working", key("dup")), signOpts{}); resp.StatusCode != http.StatusOK {
					b.Fatalf("first delivery: %d %s", resp.StatusCode, resp.Body)
				}
			}
			n := 0
			for b.Loop() {
				b.StopTimer()
				var req events.APIGatewayV2HTTPRequest
				if c.status == "" {
					req = e.request("op-dup", seller, mustJSON(b, payload("op-dup", "working", key("dup"))), signOpts{})
				} else {
					id := fmt.Sprintf("op-b%d", n)
					e.op(id, seller, true)
					req = e.request(id, seller, mustJSON(b, payload(id, c.status, key(fmt.Sprintf("b%d", n)))), signOpts{})
				}
				n++
				b.StartTimer()
				resp, err := e.svc.HandleHTTP(e.ctx, req)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("delivery: %d %s %v", resp.StatusCode, resp.Body, err)
				}
			}
		})
	}
}

// BenchmarkPushReport is the handler cost of one pushed delivery report (Bearer, as the
// reporting_webhook is registered) that moved, against kumo: the operation's lookup, the
// reader's buy state and newest snapshot, the snapshot and its event. statemachine's
// whole-life model takes a push's Lambda time as its ledger calls plus pushCPU, which the
// CPU profile of this benchmark bounds (buyflow's own frames, not kumo's or the SDK's).
func BenchmarkPushReport(b *testing.B) {
	e := newEnvWith(b, func(c *webhook.Config) {
		c.Reports = delivery.New(c.Ledger.(delivery.Store), nil, delivery.Config{Now: c.Now})
	})
	e.syncOp("op-r", sellerHMAC, "mb-r")
	n := 0
	for b.Loop() {
		b.StopTimer()
		n++
		body := mustJSON(b, report("op-r", "mb-r", key(fmt.Sprintf("p%d", n)), 1, fmt.Sprint(n), 1000*n))
		req := events.APIGatewayV2HTTPRequest{RawPath: "/v1/webhooks/adcp/op-r", Body: string(body),
			PathParameters: map[string]string{"operation_id": "op-r"},
			Headers:        map[string]string{"content-type": "application/json", "authorization": "Bearer " + token("op-r")}}
		req.RequestContext.HTTP.Method = http.MethodPost
		b.StartTimer()
		resp, err := e.svc.HandleHTTP(e.ctx, req)
		if err != nil || resp.StatusCode != http.StatusOK || outcome(b, resp) != webhook.OutcomeReported {
			b.Fatalf("report: %d %s %v", resp.StatusCode, resp.Body, err)
		}
	}
}

// tableRTT stands for one DynamoDB request's round trip from a Lambda function in the table's
// region (single-digit milliseconds; 2 ms here). On the local stack a table request is kumo's
// CPU on the same two cores as the function, so requests sent together barely overlap there;
// at AWS they are waits on the network, and the handler's time is its sequential round trips.
const tableRTT = 2 * time.Millisecond

// BenchmarkHandlerAtTableRTT is a seller's completed task, RFC 9421-signed, delivered to a
// warm receiver that has not seen the buy, with every table request a tableRTT away: what the
// handler's sequential round trips cost where the table is across a network. It reports
// round-trips, the handler's time in tableRTTs (its CPU included, so a little above the
// count of sequential requests: the index, unless the URL's route names the owner; the
// operation with the receipt's claim and the nonce; the transition; the receipt's completion).
func BenchmarkHandlerAtTableRTT(b *testing.B) {
	var cfg webhook.Config
	e := newEnvWith(b, func(c *webhook.Config) { cfg = *c })
	slow := ledger.New(hookedAPI{API: e.api, before: func() { time.Sleep(tableRTT) }}, e.table)
	slow.Now = e.clock.Now
	jwk, err := webhookauth.PublicJWK("kid-1", e.key)
	if err != nil {
		b.Fatal(err)
	}
	v, err := webhookauth.New(webhookauth.Config{Mode: webhookauth.ModeRFC9421, JWKS: []byte(`{"keys":[` + string(jwk) + `]}`), Replay: slow, Now: e.clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	cfg.Ledger, cfg.Operations, cfg.Verifiers = slow, slow, map[string]webhook.Verifier{seller9421: v}
	routes := webhookroute.FromSecret(routeSecret("route secret of the webhook benchmarks, 32 bytes+"), "routes")
	routeKey, err := routes.Key(e.ctx)
	if err != nil {
		b.Fatal(err)
	}
	// "index": a URL without a route (registered before routes), its owner read from the
	// operation index; "routed": the URL the stages register now.
	for _, routed := range []bool{false, true} {
		b.Run(map[bool]string{false: "index", true: "routed"}[routed], func(b *testing.B) {
			cfg.Routes = nil
			if routed {
				cfg.Routes = routes
			}
			if e.svc, err = webhook.New(cfg); err != nil {
				b.Fatal(err)
			}
			n := 0
			for b.Loop() {
				b.StopTimer()
				id := fmt.Sprintf("op-rtt%v%d", routed, n)
				e.op(id, seller9421, true)
				var o signOpts
				if routed {
					r, err := routeKey.Seal(id, record.OperationOwner{Tenant: tenant, SellerID: seller9421})
					if err != nil {
						b.Fatal(err)
					}
					o.query = webhookroute.Param + "=" + r
				}
				req := e.request(id, seller9421, mustJSON(b, payload(id, "completed", key(id))), o)
				n++
				b.StartTimer()
				resp, err := e.svc.HandleHTTP(e.ctx, req)
				if err != nil || resp.StatusCode != http.StatusOK || outcome(b, resp) != webhook.OutcomeApplied {
					b.Fatalf("delivery: %d %s %v", resp.StatusCode, resp.Body, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(tableRTT), "round-trips")
		})
	}
}
