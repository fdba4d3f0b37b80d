package agents_test

import (
	"errors"
	"testing"

	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/registry"
)

// FuzzParseNewAgent: any body is an agent that passes the registry's validation or a refusal
// with a 4xx; never a panic, never another error.
func FuzzParseNewAgent(f *testing.F) {
	f.Add([]byte(`{"id":"acme","role":"seller","mcp_url":"https://acme.example/mcp","credential_ref":"buyflow/agents/acme","webhook":{"mode":"rfc9421","jwks_uri":"https://acme.example/jwks.json"}}`))
	f.Add([]byte(`{"id":"g","role":"governance","mcp_url":"https://g.example/mcp","credential_ref":"buyflow/agents/g","settings":{"a":1}}`))
	f.Add([]byte(`{"id":"x","webhook":{"mode":"rfc9421","jwks":{"keys":[{}]}}}`))
	f.Add([]byte(`{"id":"o","role":"governance","mcp_url":"https://o.example/mcp","credential_ref":"buyflow/agents/o","auth":{"mode":"oauth2_client_credentials","client_id":"c","scopes":["adcp:buy"],"resource":"https://o.example/mcp"}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := agents.ParseNewAgent(body, "buyflow/agents/")
		var ie *agents.InputError
		switch {
		case err == nil:
			if verr := registry.Validate(r, "buyflow/agents/"); verr != nil {
				t.Fatalf("accepted an invalid agent: %v", verr)
			}
		case !errors.As(err, &ie) || ie.Status < 400 || ie.Status > 499 || ie.Code == "":
			t.Fatalf("refusal is not a coded 4xx: %v", err)
		}
	})
}

// FuzzParsePatch: any body is a change or a coded 4xx; applying the change never panics.
func FuzzParsePatch(f *testing.F) {
	f.Add([]byte(`{"mcp_url":"https://n.example/mcp"}`))
	f.Add([]byte(`{"webhook":null,"settings":{"k":1}}`))
	f.Add([]byte(`{"role":"governance"}`))
	f.Add([]byte(`{"webhook":{"mode":"hmac","hmac_secret_ref":"buyflow/agents/x"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		change, err := agents.ParsePatch(body)
		var ie *agents.InputError
		if err != nil {
			if !errors.As(err, &ie) || ie.Status < 400 || ie.Status > 499 || ie.Code == "" {
				t.Fatalf("refusal is not a coded 4xx: %v", err)
			}
			return
		}
		r := registry.Record{}
		r.ID, r.Role = "acme", "seller"
		_, _, _ = change(&r)
	})
}
