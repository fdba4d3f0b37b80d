package modify

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcp/interop"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/workflow"
)

// TestInteropChangesAtTheSDKSeller plans changes with this package and sends them to a seller
// on the official @adcp/sdk server framework (AdCP 3.0.6, strict request validation against
// its own bundled schemas): a budget increase, a pause, a resume and a cancellation. Each must
// pass the SDK's validation, decode from its 3.0 answer (the media-buy status at the root),
// and show in the seller's own get_media_buys; a resend of the cancellation converges.
func TestInteropChangesAtTheSDKSeller(t *testing.T) {
	const token = "tok-interop-changes-0123456789"
	seller := interop.StartForTest(t, interop.Options{Token: token})
	reg, err := adcp.ParseRegistry([]byte(fmt.Sprintf(`{"agents":[{"id":"sdk","role":"seller","mcp_url":%q,"credential_ref":"sdk","webhook":{"mode":"bearer","bearer_secret_ref":"sdk-webhook"}}]}`, seller.MCPURL())))
	if err != nil {
		t.Fatal(err)
	}
	c, err := adcp.New(adcp.Options{Registry: reg, Validator: validator(t), CallTimeout: 45 * time.Second,
		Credentials: adcp.CredentialsFunc(func(context.Context, string) (string, error) { return token, nil })})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	account := adcp.AccountRef{AccountID: "acc_interop"}
	in, err := adcp.NewIntent(adcp.ToolCreateMediaBuy, adcp.CreateMediaBuyRequest{Account: account, Brand: adcp.BrandRef{Domain: "acme.example"},
		StartTime: "asap", EndTime: "2030-01-31T23:59:59Z",
		Packages: []adcp.PackageRequest{{ProductID: "prod_display", PricingOptionID: "cpm_5", Budget: "5000"}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	created, err := c.CreateMediaBuy(ctx, "sdk", in)
	if err != nil || created.MediaBuyID == "" || len(created.Packages) != 1 {
		t.Fatalf("create: %+v %v", created, err)
	}
	five, _ := money.Parse("5000", "USD")
	buy := Buy{OperationID: "mb-interop", Status: workflow.StatusCompleted, MediaBuyID: created.MediaBuyID, Currency: "USD", Account: account,
		Revision: created.Revision, State: StateActive, Packages: []Package{{ID: created.Packages[0].PackageID, Budget: five}}}

	send := func(body string, cancel bool) (*adcp.MediaBuyResult, adcp.Intent, Planned) {
		t.Helper()
		parse := ParsePatch
		if cancel {
			parse = ParseCancel
		}
		ch, err := parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if err := Admit(buy, ch); err != nil {
			t.Fatal(err)
		}
		p, err := Plan(buy, ch, "chg-interop", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		in, err := adcp.NewIntent(adcp.ToolUpdateMediaBuy, p.Args, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.UpdateMediaBuy(ctx, "sdk", in)
		if err != nil {
			t.Fatalf("update_media_buy %s: %v", in.Body, err)
		}
		if res.Shape != adcp.ShapeSuccess || res.MediaBuyID != buy.MediaBuyID || res.Revision != buy.Revision+1 {
			t.Fatalf("update_media_buy %s answered %+v\n%s", in.Body, res, res.Raw)
		}
		buy.Revision, buy.State, buy.Packages = res.Revision, p.State, p.Packages
		return res, in, p
	}
	seen := func() adcp.MediaBuy {
		t.Helper()
		got, err := c.GetMediaBuys(ctx, "sdk", adcp.GetMediaBuysRequest{Account: &account, MediaBuyIDs: []string{buy.MediaBuyID}})
		if err != nil || len(got.MediaBuys) != 1 {
			t.Fatalf("get_media_buys: %+v %v", got, err)
		}
		return got.MediaBuys[0]
	}

	_, _, p := send(`{"budget":{"total":6250.5}}`, false)
	if mb := seen(); p.After.Decimal() != "6250.50" || len(mb.Packages) != 1 || mb.Packages[0].Budget.String() != "6250.5" {
		t.Fatalf("after the increase the seller holds %+v (planned %s)", mb.Packages, p.After.Decimal())
	}
	if res, _, _ := send(`{"paused":true}`, false); res.MediaBuyStatus != "paused" || seen().Status != "paused" {
		t.Fatalf("pause: the seller answered %q", res.MediaBuyStatus)
	}
	if res, _, _ := send(`{"paused":false}`, false); res.MediaBuyStatus != "active" {
		t.Fatalf("resume: the seller answered %q", res.MediaBuyStatus)
	}
	res, cancel, _ := send(`{"reason":"campaign withdrawn"}`, true)
	if res.MediaBuyStatus != "canceled" || seen().Status != "canceled" {
		t.Fatalf("cancel: the seller answered %q", res.MediaBuyStatus)
	}
	// A resend of the same intent (same key, same bytes) converges: every change is absolute
	// (a budget, a paused flag, canceled), never a delta. Measured here: the SDK seller, as
	// seller.mjs configures it, re-executes the resent update (replayed false, a new
	// revision) rather than replaying it, so a replay is not what this relies on.
	again, err := c.UpdateMediaBuy(ctx, "sdk", cancel.Retry())
	if err != nil || again.MediaBuyStatus != "canceled" || (!again.Replayed && again.Revision <= res.Revision) {
		t.Fatalf("a resend of the cancellation: %+v %v", again, err)
	}
	t.Logf("resent cancellation: replayed=%v revision %d (first answer: revision %d)", again.Replayed, again.Revision, res.Revision)
	var args map[string]json.RawMessage
	_ = json.Unmarshal(cancel.Body, &args)
	if string(args["canceled"]) != "true" || string(args["cancellation_reason"]) != `"campaign withdrawn"` {
		t.Fatalf("the cancellation sent %s", cancel.Body)
	}
	if err := Admit(buy, Change{Kind: KindResume}); err == nil {
		t.Fatal("a canceled buy admitted a resume")
	}
}
