package adcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestValidateRecoveringSurvivesTheLibraryPanic hands the schema library the instance it
// panics on (the bound in ValidateRequest normally keeps it away) and expects an error.
func TestValidateRecoveringSurvivesTheLibraryPanic(t *testing.T) {
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"type":"number","minimum":0}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("n.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("n.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := validateRecovering(s, json.Number("1e10000000")); err == nil || !strings.Contains(err.Error(), "schema validator failed") {
		t.Fatalf("err = %v", err)
	}
	if err := validateRecovering(s, json.Number("5")); err != nil {
		t.Fatalf("a valid number: %v", err)
	}
}
