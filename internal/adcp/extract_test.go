package adcp

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func loadVectors(t *testing.T, name string) []map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []map[string]json.RawMessage `json:"vectors"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) == 0 {
		t.Fatalf("%s: no vectors", name)
	}
	return f.Vectors
}

func str(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("unmarshal %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// TestMCPResponseExtractionVectors runs the spec's mcp-response-extraction vectors.
func TestMCPResponseExtractionVectors(t *testing.T) {
	for _, v := range loadVectors(t, "mcp-response-extraction.json") {
		t.Run(str(t, v["id"]), func(t *testing.T) {
			var res mcp.CallToolResult
			if err := json.Unmarshal(v["response"], &res); err != nil {
				t.Fatalf("decode response: %v", err)
			}
			got := extractSuccess(&res)
			want := v["expected_data"]
			if string(want) == "null" {
				if got != nil {
					t.Fatalf("extracted %s, want nothing", got)
				}
				return
			}
			if got == nil || !jsonEqual(t, got, want) {
				t.Fatalf("extracted %s, want %s", got, want)
			}
		})
	}
}

// TestTransportErrorMappingVectors runs the MCP vectors of the spec's
// transport-error-mapping file through the same code the client uses.
func TestTransportErrorMappingVectors(t *testing.T) {
	actions := map[string]Decision{"retry": DecisionRetry, "surface_to_caller": DecisionFix, "escalate_to_human": DecisionStop}
	for _, v := range loadVectors(t, "transport-error-mapping.json") {
		id := str(t, v["id"])
		if str(t, v["transport"]) != "mcp" {
			continue // buyflow speaks MCP only
		}
		t.Run(id, func(t *testing.T) {
			var err error
			switch str(t, v["path"]) {
			case "jsonrpc_error":
				var msg struct {
					Error jsonrpc.Error `json:"error"`
				}
				if e := json.Unmarshal(v["response"], &msg); e != nil {
					t.Fatal(e)
				}
				err = (&Client{}).classify(context.Background(), &msg.Error, &authTransport{}, nil, "a", "t")
			default:
				var res mcp.CallToolResult
				if e := json.Unmarshal(v["response"], &res); e != nil {
					t.Fatal(e)
				}
				_, err = interpret(&res)
			}
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("got %v, want *Error", err)
			}
			want := v["expected_error"]
			if string(want) == "null" {
				if ae.Kind == KindAdCP {
					t.Fatalf("extracted AdCP error %+v, want generic", ae)
				}
				return
			}
			if ae.Kind != KindAdCP {
				t.Fatalf("kind %s, want adcp (%v)", ae.Kind, ae)
			}
			var exp ErrorDetail
			if e := json.Unmarshal(want, &exp); e != nil {
				t.Fatal(e)
			}
			if ae.Code != exp.Code || ae.Message != exp.Message || ae.Field != exp.Field || ae.Suggestion != exp.Suggestion {
				t.Errorf("got %+v, want %+v", ae, exp)
			}
			if exp.Recovery != "" && string(ae.Recovery) != exp.Recovery {
				t.Errorf("recovery %q, want %q", ae.Recovery, exp.Recovery)
			}
			if len(exp.Details) > 0 && !jsonEqual(t, ae.Details, exp.Details) {
				t.Errorf("details %s, want %s", ae.Details, exp.Details)
			}
			if exp.RetryAfter != nil {
				if want := clampRetryAfter(*exp.RetryAfter); ae.RetryAfter != want || want > time.Hour {
					t.Errorf("retry_after %v, want %v", ae.RetryAfter, want)
				}
			}
			if got, want := Decide(err), actions[str(t, v["expected_action"])]; got != want {
				t.Errorf("Decide = %v, want %v", got, want)
			}
		})
	}
}

func TestResponseFromBody(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantStatus TaskStatus
		wantLegacy string
	}{
		{"missing status means completed", `{"media_buy_id":"mb"}`, StatusCompleted, ""},
		{"submitted", `{"status":"submitted","task_id":"t1"}`, StatusSubmitted, ""},
		{"3.0 media-buy status at root", `{"status":"pending_creatives","media_buy_id":"mb"}`, StatusCompleted, "pending_creatives"},
		{"3.0 governance status", `{"status":"approved","check_id":"c"}`, StatusCompleted, "approved"},
		{"input-required", `{"status":"input-required","message":"m"}`, StatusInputRequired, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := responseFromBody(json.RawMessage(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tt.wantStatus || r.LegacyStatus != tt.wantLegacy {
				t.Fatalf("status %q legacy %q, want %q %q", r.Status, r.LegacyStatus, tt.wantStatus, tt.wantLegacy)
			}
		})
	}
}

func TestExtractTextLimit(t *testing.T) {
	big := `{"pad":"` + string(make([]byte, 0)) + string(bytesOf('a', maxTextJSON)) + `"}`
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: big}, &mcp.TextContent{Text: `{"status":"completed"}`}}}
	got := extractSuccess(res)
	if string(got) != `{"status":"completed"}` {
		t.Fatalf("got %.60s, want the small item (text over 1 MB skipped)", got)
	}
}

func bytesOf(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

func TestDecodeMediaBuy(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantShape  ResponseShape
		wantStatus string
		wantErr    string // error code, "" for none
		wantTask   string
	}{
		{"3.1 success", `{"status":"completed","media_buy_id":"mb1","media_buy_status":"active","confirmed_at":"2030-01-01T00:00:00Z","revision":1,"packages":[{"package_id":"p1","product_id":"x"}]}`, ShapeSuccess, "active", "", ""},
		{"3.0 sync, status pending_creatives, no envelope", `{"media_buy_id":"mb1","status":"pending_creatives","confirmed_at":"2030-01-01T00:00:00Z","packages":[]}`, ShapeSuccess, "pending_creatives", "", ""},
		{"provisional confirmed_at null", `{"media_buy_id":"mb1","confirmed_at":null,"revision":1,"packages":[]}`, ShapeSuccess, "", "", ""},
		{"submitted", `{"status":"submitted","task_id":"task_9","message":"IO review"}`, ShapeSubmitted, "", "", "task_9"},
		{"submitted with advisory errors", `{"status":"submitted","task_id":"task_9","errors":[{"code":"X","message":"m","severity":"warning"}]}`, ShapeSubmitted, "", "", "task_9"},
		{"error arm", `{"errors":[{"code":"BUDGET_TOO_LOW","message":"low"}]}`, ShapeError, "", "BUDGET_TOO_LOW", ""},
		{"failed with adcp_error", `{"status":"failed","adcp_error":{"code":"PRODUCT_NOT_FOUND","message":"gone"},"errors":[{"code":"PRODUCT_NOT_FOUND","message":"gone"}]}`, ShapeError, "", "PRODUCT_NOT_FOUND", ""},
		{"working interim", `{"status":"working","percentage":40}`, ShapeInterim, "", "", ""},
		{"success with warning", `{"media_buy_id":"mb1","confirmed_at":null,"revision":1,"packages":[],"errors":[{"code":"W","message":"w","severity":"warning"}]}`, ShapeSuccess, "", "", ""},
		// The media-buy statuses that are task statuses too, in a 3.0 answer: the buy's, not the task's.
		{"3.0 cancel answered canceled", `{"media_buy_id":"mb1","status":"canceled","revision":2}`, ShapeSuccess, "canceled", "", ""},
		{"3.0 media buy completed", `{"media_buy_id":"mb1","status":"completed","revision":2}`, ShapeSuccess, "completed", "", ""},
		{"3.0 media buy rejected", `{"media_buy_id":"mb1","status":"rejected","revision":2}`, ShapeSuccess, "rejected", "", ""},
		{"3.1 canceled buy in a completed task", `{"status":"completed","media_buy_id":"mb1","media_buy_status":"canceled"}`, ShapeSuccess, "canceled", "", ""},
		{"3.2 without root status", `{"media_buy_id":"mb1","media_buy_status":"pending_start","revision":1}`, ShapeSuccess, "pending_start", "", ""},
		{"3.1 task rejected with a buy id and media_buy_status", `{"status":"rejected","media_buy_id":"mb1","media_buy_status":"rejected","errors":[{"code":"POLICY_VIOLATION","message":"no"}]}`, ShapeError, "rejected", "POLICY_VIOLATION", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeMediaBuy(json.RawMessage(tt.body))
			if tt.wantErr == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tt.wantErr != "" {
				var ae *Error
				if !errors.As(err, &ae) || ae.Code != tt.wantErr {
					t.Fatalf("error %v, want code %s", err, tt.wantErr)
				}
			}
			if tt.wantShape == ShapeSuccess && r.Status != StatusCompleted {
				t.Fatalf("success with task status %q", r.Status)
			}
			if r.Shape != tt.wantShape || r.MediaBuyStatus != tt.wantStatus || r.TaskID != tt.wantTask {
				t.Fatalf("got shape %s status %q task %q, want %s %q %q", r.Shape, r.MediaBuyStatus, r.TaskID, tt.wantShape, tt.wantStatus, tt.wantTask)
			}
		})
	}
}

func TestDecodeGovernanceAndOutcome(t *testing.T) {
	t.Run("verdict 3.1", func(t *testing.T) {
		g, err := DecodeGovernance(json.RawMessage(`{"status":"completed","check_id":"c1","verdict":"approved","plan_id":"p","explanation":"ok","expires_at":"2030-01-01T00:00:00Z","governance_context":"jws"}`))
		if err != nil || g.Verdict != VerdictApproved || g.GovernanceContext != "jws" || g.Pending {
			t.Fatalf("got %+v, %v", g, err)
		}
	})
	t.Run("status 3.0", func(t *testing.T) {
		g, err := DecodeGovernance(json.RawMessage(`{"check_id":"c1","status":"denied","plan_id":"p","explanation":"no","findings":[{"category_id":"x","severity":"critical","explanation":"e"}]}`))
		if err != nil || g.Verdict != VerdictDenied || len(g.Findings) != 1 {
			t.Fatalf("got %+v, %v", g, err)
		}
	})
	t.Run("async", func(t *testing.T) {
		g, err := DecodeGovernance(json.RawMessage(`{"status":"submitted","task_id":"gt1"}`))
		if err != nil || !g.Pending || g.TaskID != "gt1" {
			t.Fatalf("got %+v, %v", g, err)
		}
	})
	t.Run("no verdict", func(t *testing.T) {
		if _, err := DecodeGovernance(json.RawMessage(`{"check_id":"c1"}`)); Decide(err) != DecisionStop {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("outcome_state 3.1", func(t *testing.T) {
		o, err := DecodeOutcome(json.RawMessage(`{"outcome_id":"o1","outcome_state":"findings","findings":[{"category_id":"b","severity":"warning","explanation":"e"}]}`))
		if err != nil || o.OutcomeState != "findings" {
			t.Fatalf("got %+v, %v", o, err)
		}
	})
	t.Run("status 3.0", func(t *testing.T) {
		o, err := DecodeOutcome(json.RawMessage(`{"outcome_id":"o1","status":"accepted"}`))
		if err != nil || o.OutcomeState != "accepted" || o.Status != StatusCompleted {
			t.Fatalf("got %+v, %v", o, err)
		}
	})
}

// A seller that already declares AdCP 3.2 (and drops the deprecated major_versions) is read
// like a 3.1 one: buyflow keeps its 3.1 pin, which the seller still lists.
func TestCapabilitiesOfA32Seller(t *testing.T) {
	caps, err := decodeCapabilities(json.RawMessage(`{"adcp":{"supported_versions":["3.1","3.2"],
		"idempotency":{"supported":true,"replay_ttl_seconds":86400}},"supported_protocols":["media_buy"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !caps.SupportsVersion(WireVersion) || !caps.SupportsVersion("3.2") || len(caps.MajorVersions) != 0 {
		t.Fatalf("versions %v %v", caps.SupportedVersions, caps.MajorVersions)
	}
	if w, ok := caps.ReplayWindow(); !ok || w != 24*time.Hour {
		t.Fatalf("replay window %v %v", w, ok)
	}
}
