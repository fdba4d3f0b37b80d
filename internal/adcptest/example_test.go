package adcptest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buyflow/buyflow/internal/adcptest"
)

type bearerRT string

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// A seller scripted per request: context.sim "async_complete" makes
// create_media_buy answer submitted; the test then advances the task.
func ExampleNewSeller() {
	seller := adcptest.NewSeller(adcptest.SellerOptions{})
	url := seller.Start()
	defer seller.Close()

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "buyer", Version: "0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearerRT(adcptest.DefaultSellerToken)},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = cs.Close() }()

	call := func(tool string, args map[string]any) map[string]any {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			panic(err)
		}
		var out map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
		return out
	}
	created := call("create_media_buy", map[string]any{
		"idempotency_key": "example-key-0000000001",
		"account":         map[string]any{"account_id": "acc_1"},
		"brand":           map[string]any{"domain": "acmeoutdoor.example"},
		"start_time":      "asap",
		"end_time":        "2099-09-30T23:59:59Z",
		"packages":        []any{map[string]any{"product_id": "p1", "pricing_option_id": "cpm", "budget": 5000}},
		"context":         map[string]any{"sim": "async_complete"},
	})
	taskID := created["task_id"].(string)
	fmt.Println("create:", created["status"])

	_, _ = seller.Advance(taskID) // → working
	_, _ = seller.Advance(taskID) // → completed
	polled := call("get_task_status", map[string]any{"task_id": taskID, "include_result": true})
	result := polled["result"].(map[string]any)
	fmt.Println("poll:", polled["status"], result["media_buy_status"])
	fmt.Println("calls:", len(seller.CallsTo("create_media_buy")), len(seller.CallsTo("get_task_status")))
	// Output:
	// create: submitted
	// poll: completed pending_creatives
	// calls: 1 1
}
