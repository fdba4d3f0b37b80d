package localstack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
