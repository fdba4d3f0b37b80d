package agentclient

import (
	"context"
	"errors"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
)

// oneAgent serves a single agent at an address nothing listens on.
type oneAgent struct{}

func (oneAgent) Agent(context.Context, string) (adcp.Agent, error) {
	return adcp.Agent{ID: "s", Role: adcp.RoleSeller, MCPURL: "http://127.0.0.1:1/mcp", CredentialRef: "buyflow/agents/s"}, nil
}

// TestClientValidatesBeforeSending: the client a function builds checks every request against
// the embedded AdCP schemas before sending it; a request that breaks them is a
// *adcp.ValidationError at its field, not a failed connection.
func TestClientValidatesBeforeSending(t *testing.T) {
	c, err := Client(oneAgent{}, adcp.CredentialsFunc(func(context.Context, string) (string, error) { return "token", nil }), nil, nil)
	if err != nil {
		t.Fatalf("Client = %v", err)
	}
	_, err = c.Call(context.Background(), "s", adcp.ToolGetAdCPCapabilities, map[string]any{"protocols": []string{"telepathy"}})
	var ve *adcp.ValidationError
	if !errors.As(err, &ve) || ve.Pointer != "/protocols/0" {
		t.Fatalf("got %v, want a validation error at /protocols/0", err)
	}
}
