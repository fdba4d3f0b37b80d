package adcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
)

// Example shows the calling pattern of a stage Lambda: fix the intent once
// (and store it write-ahead), send it, and let Decide say what to do on
// failure. It is compiled, not run: it needs a live agent.
func Example() {
	ctx := context.Background()
	reg, err := adcp.ParseRegistry([]byte(`{"agents":[{"id":"seller-a","role":"seller",
		"mcp_url":"https://seller.example/mcp","credential_ref":"buyflow/seller-a",
		"webhook":{"mode":"rfc9421","jwks_uri":"https://seller.example/.well-known/jwks.json"}}]}`))
	if err != nil {
		panic(err)
	}
	schemas, err := adcpschemas.FS() // the AdCP schemas embedded in every function
	if err != nil {
		panic(err)
	}
	v, err := adcpvalidate.NewValidator(schemas)
	if err != nil {
		panic(err)
	}
	client, err := adcp.New(adcp.Options{
		Registry:    reg,
		Validator:   v,
		Credentials: adcp.CredentialsFunc(func(ctx context.Context, ref string) (string, error) { return "from-secrets-manager", nil }),
	})
	if err != nil {
		panic(err)
	}

	in, err := adcp.NewIntent(adcp.ToolCreateMediaBuy, adcp.CreateMediaBuyRequest{
		Account:   adcp.AccountRef{AccountID: "acc_1"},
		Brand:     adcp.BrandRef{Domain: "acme.example"},
		StartTime: "asap",
		EndTime:   "2030-01-31T23:59:59Z",
		Packages: []adcp.PackageRequest{{ProductID: "prod_1", PricingOptionID: "cpm_1", Budget: "5000",
			Context: json.RawMessage(`{"buyer_ref":"li-1"}`)}},
		PlanID:            "plan_1",
		GovernanceContext: "eyJhbGciOi...",
	}, time.Now())
	if err != nil {
		panic(err)
	}
	// ledger.Put(in) goes here, before the first send.
	for {
		r, err := client.CreateMediaBuy(ctx, "seller-a", in)
		switch adcp.Decide(err) {
		case adcp.DecisionNone:
			fmt.Println(r.Shape, r.MediaBuyID, r.TaskID)
			return
		case adcp.DecisionRetry:
			time.Sleep(adcp.RetryAfter(err)) // or backoff; bound the attempts
			in = in.Retry()                  // same key, same bytes
		default: // DecisionFix, DecisionStop
			fmt.Println("give up:", err)
			return
		}
	}
}
