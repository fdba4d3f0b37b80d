package adcp

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzDecodeMediaBuy: a seller's create/update answer (inline, a poll's result or a webhook's
// result) never panics the decoder, and what it accepts holds together: a success carries a
// media buy in a completed task, a submitted answer a task id, every error a recovery; a
// failure read from a result always names a code. The same bytes as an isError payload always
// give an *Error.
func FuzzDecodeMediaBuy(f *testing.F) {
	for _, s := range []string{
		`{"status":"completed","media_buy_id":"mb1","media_buy_status":"active","revision":1,"packages":[{"package_id":"p1"}]}`,
		`{"media_buy_id":"mb1","status":"canceled","revision":2}`,
		`{"media_buy_id":"mb1","media_buy_status":"pending_start"}`,
		`{"status":"submitted","task_id":"task_9"}`,
		`{"errors":[{"code":"BUDGET_TOO_LOW","message":"low","recovery":"correctable","retry_after":30}]}`,
		`{"status":"failed","adcp_error":{"code":"PRODUCT_NOT_FOUND","message":"gone","retry_after":"soon"}}`,
		`{"status":"rejected","media_buy_id":"mb1","errors":[{"code":"W","severity":"warning"}]}`,
		`{"status":7,"errors":{"code":"X"}}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		r, err := DecodeMediaBuy(body)
		var ae *Error
		switch {
		case err != nil && !errors.As(err, &ae):
			t.Fatalf("error of another type: %v", err)
		case ae != nil && ae.Recovery == "":
			t.Fatalf("error without recovery: %+v", ae)
		case err == nil && r.Shape == ShapeSuccess && (r.MediaBuyID == "" || r.Status != StatusCompleted):
			t.Fatalf("success without a media buy in a completed task: %+v", r)
		case err == nil && r.Shape == ShapeSubmitted && r.TaskID == "":
			t.Fatalf("submitted without a task: %+v", r)
		}
		if e := ResultFailure(body); e != nil && (e.Code == "" || e.Recovery == "") {
			t.Fatalf("result failure without code or recovery: %+v", e)
		}
		var obj map[string]any
		if json.Unmarshal(body, &obj) == nil {
			res := &mcp.CallToolResult{IsError: true, StructuredContent: obj, Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}}
			if _, err := interpret(res); err == nil || !errors.As(err, &ae) {
				t.Fatalf("an isError payload gave %v", err)
			}
		}
	})
}
