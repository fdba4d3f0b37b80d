package sandbox

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// FuzzHandler: any Function URL event (Lambda's, from anyone on the internet) is served or
// refused with 400, never a panic, and the request h sees carries the event's method and path.
func FuzzHandler(f *testing.F) {
	f.Add("POST", "/mcp", "a=1", `{"jsonrpc":"2.0"}`, false, "application/json")
	f.Add("GET", "/.well-known/jwks.json", "", "", false, "")
	f.Add("", "", "", "", false, "")
	f.Add("POST", "/%zz", "x=%", "%%%", true, "\n")
	f.Add("GE T", "//a/../b", "", "e30=", true, "text/plain")
	f.Fuzz(func(t *testing.T, method, path, query, body string, b64 bool, ctype string) {
		var seen *http.Request
		h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = r
			w.WriteHeader(http.StatusNoContent)
		}), nil)
		in := events.LambdaFunctionURLRequest{RawPath: path, RawQueryString: query, Body: body, IsBase64Encoded: b64,
			Headers: map[string]string{"content-type": ctype}}
		in.RequestContext.HTTP.Method = method
		out, err := h(context.Background(), in)
		if err != nil {
			t.Fatalf("handler error %v", err)
		}
		switch out.StatusCode {
		case http.StatusNoContent:
			if seen == nil || seen.Method != method {
				t.Fatalf("served %+v for method %q", seen, method)
			}
		case http.StatusBadRequest:
			if seen != nil {
				t.Fatal("a refused event reached the agent")
			}
		default:
			t.Fatalf("status %d", out.StatusCode)
		}
	})
}
