package devstack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
)

func TestLoadAgentsFileExample(t *testing.T) {
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	a, err := loadAgentsFile(filepath.Join(root, "examples", "agents.example.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(a.registry), "credentials") || strings.Contains(string(a.registry), "bearer-token") {
		t.Errorf("the registry handed to the functions carries credentials: %s", a.registry)
	}
	if len(a.credentials) != 2 {
		t.Errorf("credentials = %d, want 2", len(a.credentials))
	}
}

func TestLoadAgentsFileRefusesMissingCredential(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agents.json")
	doc := `{"agents":[{"id":"s","role":"seller","mcp_url":"https://s.example/mcp","credential_ref":"buyflow/agents/s",
	  "webhook":{"mode":"bearer","bearer_secret_ref":"buyflow/agents/s-hook"}}],"credentials":{}}`
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadAgentsFile(p)
	if err == nil || !strings.Contains(err.Error(), `credentials["buyflow/agents/s"]`) {
		t.Fatalf("err = %v, want it to name the missing credential", err)
	}
}

// The simulated agents validate with the schemas embedded in the functions, wherever the
// stack runs from.
func TestSchemaValidatorFromEmbeddedSchemas(t *testing.T) {
	t.Setenv("BUYFLOW_ADCP_SCHEMAS", "")
	t.Chdir(t.TempDir())
	v, err := schemaValidator()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.ValidateRequest("create_media_buy", []byte(`{"packages":"not a list"}`)); err == nil {
		t.Error("an invalid create_media_buy passed validation")
	}
}

// TestAgentsFileKeepsSimulatedGovernance: a real seller next to the simulated governance agent,
// which the registry and the credentials then name; the simulated seller is not offered.
func TestAgentsFileKeepsSimulatedGovernance(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agents.json")
	doc := `{"agents":[{"id":"acme-sales","role":"seller","mcp_url":"http://127.0.0.1:1/mcp","credential_ref":"buyflow/agents/acme-sales",
	  "webhook":{"mode":"rfc9421","jwks_uri":"http://127.0.0.1:1/jwks.json"}}],
	  "credentials":{"buyflow/agents/acme-sales":"tok"},"simulated":["governance"]}`
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := loadAgentsFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.addSimulated(adcptest.SellerOptions{}, adcptest.GovernanceOptions{}, time.Second); err != nil {
		t.Fatal(err)
	}
	defer a.close()
	reg, err := adcp.ParseRegistry(a.registry)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Agent("acme-sales"); err != nil {
		t.Errorf("the real seller is gone: %v", err)
	}
	gov, err := reg.Agent(GovernanceID)
	if err != nil || gov.Role != adcp.RoleGovernance || gov.MCPURL != a.govURL {
		t.Errorf("simulated governance %+v, %v (served at %s)", gov, err, a.govURL)
	}
	if _, err := reg.Agent(SellerID); err == nil || a.seller != nil {
		t.Error("the simulated seller is offered too")
	}
	if a.credentials[gov.CredentialRef] == "" || a.credentials["buyflow/agents/acme-sales"] != "tok" {
		t.Errorf("credentials %v", a.credentials)
	}
}

func TestAgentsFileRefusesBadSimulated(t *testing.T) {
	for name, sim := range map[string]string{"unknown": `["billing"]`, "twice": `["governance","governance"]`} {
		p := filepath.Join(t.TempDir(), "agents.json")
		doc := `{"agents":[{"id":"s","role":"seller","mcp_url":"https://s.example/mcp","credential_ref":"buyflow/agents/s",
		  "webhook":{"mode":"rfc9421","jwks_uri":"https://s.example/jwks.json"}}],"credentials":{"buyflow/agents/s":"t"},"simulated":` + sim + `}`
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadAgentsFile(p); err == nil || !strings.Contains(err.Error(), "simulated") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	p := filepath.Join(t.TempDir(), "agents.json")
	doc := `{"agents":[{"id":"sim-governance","role":"governance","mcp_url":"https://g.example/mcp","credential_ref":"buyflow/agents/g"}],
	  "credentials":{"buyflow/agents/g":"t"},"simulated":["governance"]}`
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadAgentsFile(p); err == nil || !strings.Contains(err.Error(), "taken") {
		t.Errorf("clash: err = %v", err)
	}
}
