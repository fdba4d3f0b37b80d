package adcp

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestNegotiate(t *testing.T) {
	tests := []struct {
		pin       string
		supported []string
		want      string // "" = error
	}{
		{"", nil, "3.1"},
		{"", []string{"3.0"}, "3.1"}, // the official SDK seller (3.0.6) reads 3.1 requests
		{"", []string{"3.0", "3.1"}, "3.1"},
		{"", []string{"3.1", "3.2"}, "3.2"},
		{"", []string{"3.2"}, "3.2"},
		{"", []string{"3.2", "3.3-rc.0"}, "3.2"}, // a release candidate only when pinned
		{"", []string{"4.0"}, "3.1"},
		{"3.1", []string{"3.1", "3.2"}, "3.1"}, // an operator holds the agent back
		{"3.2", nil, "3.2"},
		{"3.3-rc.0", []string{"3.2", "3.3-rc.0"}, "3.3-rc.0"},
		{"3.3-rc.0", []string{"3.3-rc.0"}, ""}, // no 3.2 to fall back on: refused
		{"3.3-rc.0", []string{"3.2"}, ""},      // the agent does not speak the RC
		{"3.0", []string{"3.0"}, ""},
	}
	for _, tt := range tests {
		got, err := Negotiate(tt.pin, tt.supported)
		if tt.want == "" {
			if err == nil {
				t.Errorf("Negotiate(%q, %q) = %q, want an error", tt.pin, tt.supported, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Negotiate(%q, %q) = %q, %v; want %q", tt.pin, tt.supported, got, err, tt.want)
		}
	}
	for pin, ok := range map[string]bool{"": true, "3.1": true, "3.2": true, "3.3-rc.0": true, "3.2-rc.1": false, "3.0": false, "4.0-rc.0": false, "latest": false} {
		if err := CheckPin(pin); (err == nil) != ok {
			t.Errorf("CheckPin(%q) = %v, want ok %v", pin, err, ok)
		}
	}
}

// versionAgent is a fake agent that lists supported and records what it receives.
func versionAgent(t *testing.T, supported string, tools map[string]toolFunc) *fakeAgent {
	t.Helper()
	tools[ToolGetAdCPCapabilities] = capsTool(`{"adcp":{"supported_versions":` + supported + `,"idempotency":{"supported":true,"replay_ttl_seconds":600}}}`)
	return newFakeAgent(t, tools)
}

func argsOf(t *testing.T, c call) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(c.Args, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRequestsSpeakTheNegotiatedVersion: a check_governance goes out with the envelope and
// shape of the version each agent speaks, validated in that version's schemas.
func TestRequestsSpeakTheNegotiatedVersion(t *testing.T) {
	verdict := capsTool(`{"check_id":"c1","verdict":"approved","plan_id":"p","expires_at":"2030-01-01T00:00:00Z","governance_context":"g"}`)
	a31 := versionAgent(t, `["3.0","3.1"]`, map[string]toolFunc{ToolCheckGovernance: verdict})
	a32 := versionAgent(t, `["3.1","3.2"]`, map[string]toolFunc{ToolCheckGovernance: verdict})
	c := newTestClient(t, nil, map[string]string{"g31": a31.URL(), "g32": a32.URL(), "seller": "http://127.0.0.1:1/mcp"})
	req := CheckGovernanceRequest{PlanID: "p", Caller: "https://buyer.example/", Tool: ToolUpdateMediaBuy,
		Payload: json.RawMessage(`{"media_buy_id":"mb"}`), PurchaseType: "media_buy", Phase: "modification",
		GovernanceContext: "prior", Target: "seller", ProposedCommitment: &Commitment{Amount: "250.00", Currency: "USD"}}
	for _, id := range []string{"g31", "g32"} {
		if _, err := c.CheckGovernance(context.Background(), id, req); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	got31 := argsOf(t, a31.Calls(ToolCheckGovernance)[0])
	if got31["adcp_version"] != "3.1" || got31["governance_context"] != "prior" || got31["target_agent"] != nil || got31["proposed_commitment"] != nil {
		t.Errorf("3.1 check: %v", got31)
	}
	got32 := argsOf(t, a32.Calls(ToolCheckGovernance)[0])
	if got32["adcp_version"] != "3.2" || got32["governance_context"] != nil || got32["target_agent"] != "http://127.0.0.1:1/mcp" || got32["proposed_commitment"] == nil {
		t.Errorf("3.2 check: %v", got32)
	}

	// 3.2 refuses an update check without proposed_commitment: caught here, not sent.
	req.ProposedCommitment = nil
	_, err := c.CheckGovernance(context.Background(), "g32", req)
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Pointer != "/proposed_commitment" {
		t.Fatalf("3.2 check without proposed_commitment: %v", err)
	}
	if n := len(a32.Calls(ToolCheckGovernance)); n != 1 {
		t.Fatalf("agent saw %d checks, want 1", n)
	}
}

// TestIntentsCarryTheirVersion: Client.NewIntent fixes the negotiated version in the body, and
// Send validates the body in the version it carries.
func TestIntentsCarryTheirVersion(t *testing.T) {
	a := versionAgent(t, `["3.2"]`, map[string]toolFunc{ToolReportPlanOutcome: capsTool(`{"outcome_id":"o","outcome_state":"accepted"}`)})
	c := newTestClient(t, nil, map[string]string{"g": a.URL()})
	ctx := context.Background()
	// 3.2 needs check_id for a completed outcome; 3.1.19 did not.
	r := ReportPlanOutcomeRequest{PlanID: "p", Outcome: "completed", GovernanceContext: "g",
		SellerResponse: &SellerResponse{SellerReference: "mb"}}
	if _, err := NewIntent(ToolReportPlanOutcome, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	in, err := c.NewIntent(ctx, "g", ToolReportPlanOutcome, r, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if v := bodyVersion(in.Body); v != "3.2" {
		t.Fatalf("intent version %q", v)
	}
	var ve *ValidationError
	if _, err := c.ReportPlanOutcome(ctx, "g", in); !errors.As(err, &ve) || ve.Pointer != "/check_id" {
		t.Fatalf("3.2 outcome without check_id: %v", err)
	}
	r.CheckID = "c1"
	if in, err = c.NewIntent(ctx, "g", ToolReportPlanOutcome, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReportPlanOutcome(ctx, "g", in); err != nil {
		t.Fatal(err)
	}
}

// TestAnswersReadInTheirVersion: a 3.2 answer's root status is the task's, never the buy's;
// a 3.2 error without recovery falls back to transient, with its retry_after and buyer_reason.
func TestAnswersReadInTheirVersion(t *testing.T) {
	body := `{"status":"completed","media_buy_id":"mb_1","packages":[]}`
	mb31, err := DecodeMediaBuy(json.RawMessage(body))
	if err != nil || mb31.MediaBuyStatus != "completed" {
		t.Fatalf("3.1 reading: %+v %v", mb31, err)
	}
	mb32, err := DecodeMediaBuy(json.RawMessage(`{"adcp_version":"3.2",` + body[1:]))
	if err != nil || mb32.MediaBuyStatus != "" || mb32.Status != StatusCompleted {
		t.Fatalf("3.2 reading: %+v %v", mb32, err)
	}
	canceled := `{"status":"canceled","media_buy_id":"mb_1"}`
	if _, err := decodeMediaBuyAs("3.2", json.RawMessage(canceled)); err == nil {
		t.Fatal("3.2: a canceled task read as a canceled buy")
	}

	failing := func(json.RawMessage) (*mcp.CallToolResult, error) {
		res, err := structured(`{"adcp_error":{"code":"VENDOR_BUSY","message":"busy","retry_after":30,"buyer_reason":"the seller is closing its books"}}`)
		res.IsError = true
		return res, err
	}
	for _, tt := range []struct {
		supported string
		want      Recovery
	}{{`["3.1"]`, RecoveryTerminal}, {`["3.2"]`, RecoveryTransient}} {
		a := versionAgent(t, tt.supported, map[string]toolFunc{ToolGetMediaBuys: failing})
		c := newTestClient(t, nil, map[string]string{"s": a.URL()})
		_, err := c.GetMediaBuys(context.Background(), "s", GetMediaBuysRequest{})
		var ae *Error
		if !errors.As(err, &ae) || ae.Recovery != tt.want || ae.BuyerReason != "the seller is closing its books" {
			t.Fatalf("%s: %+v", tt.supported, err)
		}
		if wantWait := tt.want == RecoveryTransient; (ae.RetryAfter == 30*time.Second) != wantWait {
			t.Fatalf("%s: retry after %v", tt.supported, ae.RetryAfter)
		}
		if !strings.Contains(string(a.Calls(ToolGetMediaBuys)[0].Args), `"adcp_version":"`+strings.Trim(tt.supported, `[]"`)+`"`) {
			t.Fatalf("%s: sent %s", tt.supported, a.Calls(ToolGetMediaBuys)[0].Args)
		}
	}
}

// FuzzNegotiate: whatever an agent lists and an operator pins, the choice is a version buyflow
// speaks (a stable one, or a release candidate the agent lists beside 3.2) or an error; a pin
// CheckPin accepts never panics Negotiate, and the shapes are always a release with schemas.
func FuzzNegotiate(f *testing.F) {
	f.Add("", "3.0,3.1")
	f.Add("3.3-rc.0", "3.2,3.3-rc.0")
	f.Add("3.2", "")
	f.Add("x", "3.2-rc.1,4.0")
	f.Fuzz(func(t *testing.T, pin, listed string) {
		supported := strings.Split(listed, ",")
		v, err := Negotiate(pin, supported)
		if err != nil {
			return
		}
		if CheckPin(pin) != nil {
			t.Fatalf("Negotiate(%q, %q) = %q for a pin CheckPin refuses", pin, supported, v)
		}
		if s := shapesOf(v); s != WireVersion && s != Version32 {
			t.Fatalf("shapes of %q = %q", v, s)
		}
		if v != WireVersion && v != Version32 && (v != pin || !slices.Contains(supported, Version32)) {
			t.Fatalf("Negotiate(%q, %q) = %q", pin, supported, v)
		}
	})
}
