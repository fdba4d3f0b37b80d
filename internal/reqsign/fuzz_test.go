package reqsign_test

import (
	"testing"

	"github.com/buyflow/buyflow/internal/reqsign"
)

// FuzzParseCapability: an agent's request_signing block is outside input. Parsing never
// panics, and whatever parses yields a policy that decides any body without panicking.
func FuzzParseCapability(f *testing.F) {
	f.Add([]byte(`{"supported":true,"covers_content_digest":"required","required_for":["create_media_buy"]}`),
		[]byte(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"create_media_buy"},"id":1}`))
	f.Add([]byte(`{"protocol_methods_required_for":["tasks/cancel"]}`), []byte(`{"method":"tasks/cancel"}`))
	f.Add([]byte(`null`), []byte(``))
	f.Add([]byte(`{"covers_content_digest":"sometimes"}`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, capability, body []byte) {
		c, err := reqsign.ParseCapability(capability)
		if err != nil {
			return
		}
		switch c.CoversContentDigest {
		case "", "required", "forbidden", "either":
		default:
			t.Fatalf("accepted covers_content_digest %q", c.CoversContentDigest)
		}
		p := reqsign.Policy{Capability: c}
		if p.Covers(body) && !c.RequiresAny() {
			t.Fatal("covers a body for an agent that requires nothing")
		}
	})
}
