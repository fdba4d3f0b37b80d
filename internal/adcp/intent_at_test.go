package adcp_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
)

// A plan fixed in 3.1 before its agent was asked (a campaign's sync_plans) is refused by a
// 3.2-only governance agent; Intent.At(3.2) gives the same key and arguments in 3.2, which the
// agent validates against the 3.2.3 schemas and accepts.
func TestIntentAtReachesA32OnlyAgent(t *testing.T) {
	g := adcptest.NewGovernance(adcptest.GovernanceOptions{Version: adcptest.Version32})
	url := g.Start()
	t.Cleanup(g.Close)
	reg, err := adcp.NewRegistry(adcp.RegistryConfig{Agents: []adcp.Agent{{ID: "gov", Role: adcp.RoleGovernance, MCPURL: url, CredentialRef: "cred"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := adcp.New(adcp.Options{Registry: reg, Validator: adcpvalidate.NewReleasesValidator(adcpschemas.Open), CallTimeout: 5 * time.Second,
		Credentials: adcp.CredentialsFunc(func(context.Context, string) (string, error) { return adcptest.DefaultGovernanceToken, nil })})
	if err != nil {
		t.Fatal(err)
	}
	in, err := adcp.NewIntent(adcp.ToolSyncPlans, adcp.SyncPlansRequest{Plans: []json.RawMessage{json.RawMessage(
		`{"plan_id":"p1","brand":{"domain":"acme.example"},"objectives":"reach","budget":{"total":10000,"currency":"USD","reallocation_unlimited":true},"flight":{"start":"2030-01-01T00:00:00Z","end":"2030-02-01T00:00:00Z"}}`)}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SyncPlans(context.Background(), "gov", in); adcp.ErrorCode(err) != "VERSION_UNSUPPORTED" {
		t.Fatalf("the 3.1 plan: err = %v, want VERSION_UNSUPPORTED", err)
	}
	at, err := in.At(adcp.Version32)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := in.At(adcp.Version32); at.Key != in.Key || !at.Created.Equal(in.Created) || string(again.Body) != string(at.Body) {
		t.Fatalf("At changed the key or creation, or is not deterministic: %+v", at)
	}
	res, err := c.SyncPlans(context.Background(), "gov", at)
	if err != nil || len(res.Plans) != 1 || res.Plans[0].Status != "active" {
		t.Fatalf("the 3.2 plan: %+v, %v", res, err)
	}
	if calls := g.CallsTo(adcp.ToolSyncPlans); len(calls) != 2 || calls[1].ValidationError != "" {
		t.Errorf("calls %+v", calls)
	}
}
