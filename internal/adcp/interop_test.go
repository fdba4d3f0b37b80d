package adcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp/interop"
	"github.com/buyflow/buyflow/internal/clocktest"
)

// startInteropSeller runs interop/seller.mjs (a seller on @adcp/sdk 6.11.0's
// own server framework) and returns its MCP URL.
func startInteropSeller(t *testing.T, token string) string {
	t.Helper()
	return interop.StartForTest(t, interop.Options{Token: token, Delay: 300 * time.Millisecond}).MCPURL()
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

// TestInteropOAuthSDKSeller: a seller whose @adcp/sdk serve() requires OAuth (verifyBearer,
// RFC 9728 metadata named in its 401) and whose authorization server mints 60 s tokens for the
// client it knows. The client discovers the token endpoint from the 401, and a token the seller
// refuses as expired at the create is replaced once, the create resent with its key and run once.
func TestInteropOAuthSDKSeller(t *testing.T) {
	s := interop.StartForTest(t, interop.Options{OAuth: &interop.OAuthClient{ID: oauthClientID, Secret: oauthClientSecret}})
	c := newOAuthClient(t, clocktest.At(time.Now()), s.MCPURL(), AuthConfig{})
	c.opts.CallTimeout, c.opts.TokenTimeout = 45*time.Second, 10*time.Second // the SDK compiles its schemas lazily
	ctx := context.Background()
	if _, err := c.Capabilities(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	in := mustIntent(t, ToolCreateMediaBuy, CreateMediaBuyRequest{
		Account: AccountRef{AccountID: "acc_interop"}, Brand: BrandRef{Domain: "acme.example"},
		StartTime: "asap", EndTime: "2030-01-31T23:59:59Z",
		Packages: []PackageRequest{{ProductID: "prod_display", PricingOptionID: "cpm_5", Budget: "5000"}},
		Context:  json.RawMessage(`{"path":"token_expires"}`),
	}, time.Now())
	r, err := c.CreateMediaBuy(ctx, "s1", in)
	if err != nil {
		t.Fatal(err)
	}
	if r.MediaBuyID == "" {
		t.Fatalf("result %+v", r)
	}
	var rec struct {
		Creates []struct {
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"creates"`
		Grants []struct {
			Resource string `json:"resource"`
			Scope    string `json:"scope"`
		} `json:"grants"`
		Refusals []struct {
			Why            string `json:"why"`
			Tool           string `json:"tool"`
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"auth_refusals"`
	}
	resp, err := http.Get(s.Base + "/recorded")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // read fully below
	if err := json.NewDecoder(resp.Body).Decode(&rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Grants) != 2 || rec.Grants[0].Resource != s.MCPURL() || rec.Grants[0].Scope != "adcp:buy" {
		t.Errorf("grants %+v, want 2 for resource %s scope adcp:buy (the first, and one refresh)", rec.Grants, s.MCPURL())
	}
	var expired int
	for _, x := range rec.Refusals {
		if x.Why == "expired" {
			expired++
			if x.Tool != ToolCreateMediaBuy || x.IdempotencyKey != in.Key {
				t.Errorf("refused %+v, want the create with key %s", x, in.Key)
			}
		}
	}
	if expired != 1 || len(rec.Creates) != 1 || rec.Creates[0].IdempotencyKey != in.Key {
		t.Errorf("%d expired-token refusals and creates %+v; want 1 refusal and one create with key %s", expired, rec.Creates, in.Key)
	}
}
