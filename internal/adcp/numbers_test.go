package adcp

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAnswersWithHugeNumbersAreRefused: an agent's answer holding a number the schema library
// panics on is a terminal protocol error, whether it comes as structured content, as JSON text
// or inside an error answer's text (then it is not read as an adcp_error at all).
func TestAnswersWithHugeNumbersAreRefused(t *testing.T) {
	for _, body := range []string{
		`{"status":"completed","media_buy_id":"mb1","packages":[{"package_id":"p1","budget":1e10000000}]}`,
		`{"outcome_id":"o1","outcome_state":"accepted","committed_budget":-1e-10000000}`,
	} {
		if _, err := DecodeMediaBuy(json.RawMessage(body)); err == nil {
			t.Errorf("DecodeMediaBuy accepted %s", body)
		}
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: body}}}
		if _, err := interpret(res); err == nil {
			t.Errorf("interpret accepted text %s", body)
		}
	}
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
		Text: `{"adcp_error":{"code":"RATE_LIMITED","message":"slow down","recovery":"transient","retry_after":2E9999999}}`}}}
	_, err := interpret(res)
	var ae *Error
	if !errors.As(err, &ae) || ae.Kind != KindTool {
		t.Errorf("error answer with a huge retry_after: %v, want a generic tool error", err)
	}
}
