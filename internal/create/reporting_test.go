package create_test

import (
	"encoding/json"
	"testing"

	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
)

// TestCreateRegistersReportingWebhook: a seller whose capabilities offer push reporting gets
// the buy's reporting_webhook on create_media_buy (the buy's webhook URL, reports daily, the
// operation's token as token and Bearer credential, valid against the seller's schemas); a
// seller that does not, none.
func TestCreateRegistersReportingWebhook(t *testing.T) {
	t.Parallel()
	for _, push := range []bool{true, false} {
		e := stagetest.NewEnv(t, stagetest.Options{Seller: adcptest.SellerOptions{PushReporting: push}})
		op := e.NewOp("approved,sync", false)
		e.Check(op)
		if out := e.Create(op); out.Status != workflow.StatusCompleted {
			t.Fatalf("push %v: output %+v", push, out)
		}
		calls := e.Seller.CallsTo("create_media_buy")
		if len(calls) != 1 {
			t.Fatalf("push %v: %d create calls", push, len(calls))
		}
		var args struct {
			Reporting *struct {
				URL       string `json:"url"`
				Token     string `json:"token"`
				Frequency string `json:"reporting_frequency"`
				Auth      struct {
					Schemes     []string `json:"schemes"`
					Credentials string   `json:"credentials"`
				} `json:"authentication"`
			} `json:"reporting_webhook"`
		}
		if err := json.Unmarshal(calls[0].Arguments, &args); err != nil {
			t.Fatal(err)
		}
		if !push {
			if args.Reporting != nil {
				t.Fatalf("a seller without push reporting got a reporting_webhook: %s", calls[0].Arguments)
			}
			continue
		}
		rw := args.Reporting
		if rw == nil || rw.URL != stagetest.BaseURL+"/v1/webhooks/adcp/"+op.ID || rw.Frequency != "daily" ||
			len(rw.Auth.Schemes) != 1 || rw.Auth.Schemes[0] != "Bearer" || rw.Auth.Credentials != rw.Token ||
			record.HashToken(rw.Token) != e.Op(op.ID).WebhookTokenHash {
			t.Fatalf("reporting_webhook: %s", calls[0].Arguments)
		}
	}
}
