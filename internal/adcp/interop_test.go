package adcp

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp/interop"
)

// startInteropSeller runs interop/seller.mjs (a seller on @adcp/sdk 6.11.0's
// own server framework) and returns its MCP URL.
func startInteropSeller(t *testing.T, token string) string {
	t.Helper()
	if os.Getenv("BUYFLOW_NODE_TESTS") != "1" {
		t.Skip("interop test needs Node and node_modules/@adcp/sdk; set BUYFLOW_NODE_TESTS=1 (make test does)")
	}
	s, err := interop.Start(interop.Options{Token: token, Delay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seller stderr:\n%s", s.Stderr())
		}
		s.Stop()
	})
	return s.MCPURL()
}

// TestInteropAdCPSDKSeller drives capabilities, a synchronous create, an
// asynchronous create completed by polling tasks/get, a same-key replay and a
// correctable error against @adcp/sdk's seller framework.
func TestInteropAdCPSDKSeller(t *testing.T) {
	const token = "tok-interop-0123456789abcdef"
	url := startInteropSeller(t, token)
	c := newTestClient(t, nil, map[string]string{"sdk": url})
	c.opts.Credentials = CredentialsFunc(func(context.Context, string) (string, error) { return token, nil })
	// The SDK validates requests against its bundled schemas and compiles
	// them lazily: its first create_media_buy takes several seconds.
	c.opts.CallTimeout = 45 * time.Second
	ctx := context.Background()
	account := AccountRef{AccountID: "acc_interop"}
	create := func(path string, budget json.Number) CreateMediaBuyRequest {
		return CreateMediaBuyRequest{
			Account: account, Brand: BrandRef{Domain: "acme.example"},
			StartTime: "asap", EndTime: "2030-01-31T23:59:59Z",
			Packages: []PackageRequest{{ProductID: "prod_display", PricingOptionID: "cpm_5", Budget: budget,
				Context: json.RawMessage(`{"buyer_ref":"li-1"}`)}},
			Context: json.RawMessage(`{"path":"` + path + `"}`),
		}
	}

	t.Run("capabilities", func(t *testing.T) {
		caps, err := c.Capabilities(ctx, "sdk")
		if err != nil {
			t.Fatal(err)
		}
		if w, ok := caps.ReplayWindow(); !ok || w != 24*time.Hour {
			t.Fatalf("replay window %v %v", w, ok)
		}
		t.Logf("supported_versions=%v major_versions=%v", caps.SupportedVersions, caps.MajorVersions)
	})

	t.Run("sync create", func(t *testing.T) {
		in := mustIntent(t, ToolCreateMediaBuy, create("sync", "5000"), time.Now())
		r, err := c.CreateMediaBuy(ctx, "sdk", in)
		if err != nil {
			t.Fatal(err)
		}
		if r.Shape != ShapeSuccess || r.MediaBuyID == "" || r.Status != StatusCompleted || r.MediaBuyStatus != "pending_creatives" {
			t.Fatalf("result %+v\n%s", r, r.Raw)
		}
		if len(r.Packages) != 1 || r.Packages[0].PackageID == "" {
			t.Fatalf("packages %+v", r.Packages)
		}
		t.Logf("sync body: %s", r.Raw)

		// A resend of the same intent replays the cached answer.
		again, err := c.CreateMediaBuy(ctx, "sdk", in.Retry())
		if err != nil {
			t.Fatal(err)
		}
		if again.MediaBuyID != r.MediaBuyID || !again.Replayed {
			t.Fatalf("replay gave %s replayed=%v, want %s replayed", again.MediaBuyID, again.Replayed, r.MediaBuyID)
		}
	})

	t.Run("async create completed by polling", func(t *testing.T) {
		in := mustIntent(t, ToolCreateMediaBuy, create("async", "5000"), time.Now())
		r, err := c.CreateMediaBuy(ctx, "sdk", in)
		if err != nil {
			t.Fatal(err)
		}
		if r.Shape != ShapeSubmitted || r.TaskID == "" {
			t.Fatalf("result %+v\n%s", r, r.Raw)
		}
		tool, err := c.PollTool(ctx, "sdk")
		if err != nil || tool != ToolTasksGet {
			t.Fatalf("poll tool %q %v, want tasks/get", tool, err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			ts, err := c.GetTaskStatus(ctx, "sdk", GetTaskStatusRequest{TaskID: r.TaskID, Account: &account, IncludeResult: true})
			if err != nil {
				t.Fatal(err)
			}
			if ts.Status.Terminal() {
				if f := ts.Failure(); f != nil {
					t.Fatalf("task failed: %v", f)
				}
				done, err := DecodeMediaBuy(ts.Result)
				if err != nil || done.Shape != ShapeSuccess || done.MediaBuyID == "" {
					t.Fatalf("completion %+v %v\n%s", done, err, ts.Raw)
				}
				t.Logf("poll answer: %s", ts.Raw)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s still %s", r.TaskID, ts.Status)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("correctable error", func(t *testing.T) {
		in := mustIntent(t, ToolCreateMediaBuy, create("sync", "10"), time.Now())
		_, err := c.CreateMediaBuy(ctx, "sdk", in)
		var ae *Error
		if !errors.As(err, &ae) || ae.Code != "BUDGET_TOO_LOW" || Decide(err) != DecisionFix {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("wrong credential", func(t *testing.T) {
		bad := newTestClient(t, nil, map[string]string{"sdk": url})
		_, err := bad.Capabilities(ctx, "sdk")
		var ae *Error
		if !errors.As(err, &ae) || ae.HTTPStatus != 401 || Decide(err) != DecisionStop {
			t.Fatalf("got %v", err)
		}
	})
}
