package adcptest

import (
	"testing"
)

// withCorrelation sets createArgs' context.correlation_id.
func withCorrelation(args map[string]any, id string) map[string]any {
	args["context"].(map[string]any)["correlation_id"] = id
	return args
}

func TestScenarioErrorAnswersOncePerKeyAndIsNotCached(t *testing.T) {
	s, cs := startSeller(t, SellerOptions{Scenarios: []Scenario{
		{Match: "rate_limited", Error: &AdcpError{Code: "RATE_LIMITED", RetryAfter: 10}},
		{Match: "conflict", Error: &AdcpError{Code: "IDEMPOTENCY_CONFLICT"}},
	}})
	args := withCorrelation(createArgs(""), "buyer_recovery--rate_limited")
	first := callT(t, cs, "create_media_buy", args)
	if !first.IsError || first.code() != "RATE_LIMITED" || first.get("adcp_error.retry_after") != float64(10) || first.str("adcp_error.recovery") != "transient" {
		t.Fatalf("first call: %s", first.Raw)
	}
	retry := callT(t, cs, "create_media_buy", args)
	if retry.IsError || retry.str("media_buy_id") == "" || retry.get("replayed") == true {
		t.Fatalf("retry with the same key: %s (want the buy, run once: the error was not cached)", retry.Raw)
	}
	other := callT(t, cs, "create_media_buy", withCorrelation(createArgs(""), "buyer_recovery--rate_limited"))
	if other.code() != "RATE_LIMITED" {
		t.Errorf("another key: %s, want RATE_LIMITED again", other.Raw)
	}
	conflict := callT(t, cs, "create_media_buy", withCorrelation(createArgs(""), "buyer_recovery--conflict_on_reuse"))
	if conflict.code() != "IDEMPOTENCY_CONFLICT" || conflict.str("adcp_error.recovery") != "correctable" {
		t.Errorf("conflict scenario: %s", conflict.Raw)
	}
	if plain := callT(t, cs, "create_media_buy", createArgs("")); plain.IsError {
		t.Errorf("a call without a correlation id: %s", plain.Raw)
	}
	var faults []string
	for _, c := range s.CallsTo("create_media_buy") {
		faults = append(faults, c.Fault)
	}
	if want := []string{"scenario", "", "scenario", "scenario", ""}; len(faults) != len(want) || faults[0] != want[0] || faults[1] != want[1] || faults[3] != want[3] || faults[4] != want[4] {
		t.Errorf("recorded faults = %q, want %q", faults, want)
	}
}

func TestScenarioHTTPStatusAnswersBeforeMCP(t *testing.T) {
	s, cs := startSeller(t, SellerOptions{Scenarios: []Scenario{
		{Match: "auth_expired", HTTPStatus: 401, Challenge: `Bearer realm="adcp", error="invalid_token"`},
		{Match: "unavailable", HTTPStatus: 503},
	}})
	args := withCorrelation(createArgs(""), "buyer_recovery--auth_expired")
	if _, err := callErr(cs, "create_media_buy", args); err == nil {
		t.Fatal("401 scenario: the call succeeded")
	}
	if ok := callT(t, cs, "create_media_buy", args); ok.IsError {
		t.Fatalf("second attempt with the same key: %s", ok.Raw)
	}
	if _, err := callErr(cs, "create_media_buy", withCorrelation(createArgs(""), "buyer_recovery--seller_unavailable")); err == nil {
		t.Fatal("503 scenario: the call succeeded")
	}
	calls := s.CallsTo("create_media_buy")
	if len(calls) != 3 || calls[0].Fault != "http_401" || calls[0].ErrorCode != "AUTH_INVALID" || calls[1].Fault != "" || calls[2].Fault != "http_503" || calls[2].ErrorCode != "SERVICE_UNAVAILABLE" {
		t.Errorf("calls = %+v", calls)
	}
}

func TestScenarioTokensAndDeclaredCapabilities(t *testing.T) {
	_, cs := startSeller(t, SellerOptions{
		Scenarios:         []Scenario{{Match: "async", Tokens: "async_complete"}},
		SupportedVersions: []string{"3.1"}, LifecycleTools: []string{"list_products"},
	})
	caps := callT(t, cs, "get_adcp_capabilities", map[string]any{})
	if vs, _ := caps.get("adcp.supported_versions").([]any); len(vs) != 1 || vs[0] != "3.1" {
		t.Errorf("supported_versions = %v", caps.get("adcp.supported_versions"))
	}
	if lt, _ := caps.get("media_buy.lifecycle_tools").([]any); len(lt) != 1 || lt[0] != "list_products" {
		t.Errorf("lifecycle_tools = %v", caps.get("media_buy.lifecycle_tools"))
	}
	r := callT(t, cs, "create_media_buy", withCorrelation(createArgs(""), "buyer_activation--create_async_buy"))
	if r.str("status") != "submitted" || r.str("task_id") == "" {
		t.Errorf("async scenario: %s", r.Raw)
	}
}
