package adcptest

import "testing"

// TestVersion32Agents: a 3.2 seller and governance agent advertise ["3.2"], refuse a task in
// 3.1 (VERSION_UNSUPPORTED: nothing to downshift to) or in 3.1's shapes (the 3.2.3 schemas),
// and answer a 3.2 request in 3.2, their answers valid against the 3.2.3 response schemas.
func TestVersion32Agents(t *testing.T) {
	v32, err := NewValidator32()
	if err != nil {
		t.Fatal(err)
	}
	_, seller := startSeller(t, SellerOptions{Version: Version32})
	caps := callT(t, seller, "get_adcp_capabilities", map[string]any{"adcp_version": "3.1"})
	if vs, _ := caps.get("adcp.supported_versions").([]any); len(vs) != 1 || vs[0] != "3.2" || caps.str("adcp_version") != "3.2" {
		t.Fatalf("capabilities: %s", caps.Raw)
	}
	if r := callT(t, seller, "create_media_buy", createArgs("sync")); r.code() != "VERSION_UNSUPPORTED" {
		t.Errorf("a 3.1 create at a 3.2-only seller: %s", r.Raw)
	}
	args := createArgs("sync")
	args["adcp_version"] = "3.2"
	r := callT(t, seller, "create_media_buy", args)
	if r.IsError || r.str("status") != "completed" || r.str("media_buy_status") == "" || r.str("adcp_version") != "3.2" {
		t.Fatalf("a 3.2 create: %s", r.Raw)
	}
	if err := v32.Validate("media-buy/create-media-buy-response.json", r.Raw); err != nil {
		t.Errorf("the 3.2 create answer: %v", err)
	}

	_, gov := startGov(t, GovernanceOptions{Version: Version32})
	check := checkArgs("", 1000)
	check["adcp_version"] = "3.2"
	if r := callT(t, gov, "check_governance", check); r.code() != "INVALID_REQUEST" || r.str("adcp_error.field") != "target_agent" {
		t.Errorf("a check without target_agent: %s", r.Raw)
	}
	check["target_agent"] = sellerAgentURL
	for sim, verdict := range map[string]string{"": "approved", "denied": "denied", "conditions": "conditions"} {
		c := checkArgs(sim, 50000)
		c["adcp_version"], c["target_agent"], c["idempotency_key"] = "3.2", sellerAgentURL, key()
		r := callT(t, gov, "check_governance", c)
		if r.str("verdict") != verdict || r.str("check_type") != "intent" {
			t.Errorf("%q: %s", sim, r.Raw)
		}
		if (r.str("governance_context") != "") != (verdict == "approved") {
			t.Errorf("%q: only an approval carries governance_context: %s", sim, r.Raw)
		}
		if err := v32.Validate("governance/check-governance-response.json", r.Raw); err != nil {
			t.Errorf("%q: the 3.2 verdict: %v", sim, err)
		}
	}
}
