package apigwtest_test

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/apigwtest"
)

func TestRequest(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "http://api.example/v1/x/a%2Fb?k=1&k=2&e=", strings.NewReader("café"))
	r.Header.Add("X-Multi", "one")
	r.Header.Add("X-Multi", "two")
	r.Header.Set("Cookie", "a=1; b=2")
	r.RemoteAddr = "192.0.2.7:5555"
	ev, err := apigwtest.Request(r, "POST /v1/x/{id}", map[string]string{"id": "a%2Fb"})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Version != "2.0" || ev.RouteKey != "POST /v1/x/{id}" || ev.RawPath != "/v1/x/a%2Fb" || ev.RawQueryString != "k=1&k=2&e=" {
		t.Errorf("route/path/query: %+v", ev)
	}
	if ev.Headers["x-multi"] != "one,two" || ev.Headers["host"] != "api.example" || ev.Headers["cookie"] != "" {
		t.Errorf("headers %v", ev.Headers)
	}
	if len(ev.Cookies) != 2 || ev.Cookies[0] != "a=1" || ev.Cookies[1] != "b=2" {
		t.Errorf("cookies %v", ev.Cookies)
	}
	if ev.QueryStringParameters["k"] != "1,2" || ev.Body != "café" || ev.IsBase64Encoded {
		t.Errorf("query %v, body %q (base64 %v)", ev.QueryStringParameters, ev.Body, ev.IsBase64Encoded)
	}
	if h := ev.RequestContext.HTTP; h.SourceIP != "192.0.2.7" || h.Method != "POST" || ev.RequestContext.DomainName != "api.example" {
		t.Errorf("context %+v", ev.RequestContext)
	}

	bin := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("\xff\xfe"))
	ev, err = apigwtest.Request(bin, "POST /", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.IsBase64Encoded || ev.Body != base64.StdEncoding.EncodeToString([]byte("\xff\xfe")) {
		t.Errorf("binary body: %q base64 %v", ev.Body, ev.IsBase64Encoded)
	}
}

func TestWriteResponse(t *testing.T) {
	rec := httptest.NewRecorder()
	err := apigwtest.WriteResponse(rec, events.APIGatewayV2HTTPResponse{
		StatusCode: 201, Headers: map[string]string{"Content-Type": "text/plain"},
		MultiValueHeaders: map[string][]string{"X-A": {"1", "2"}}, Cookies: []string{"s=1; HttpOnly"},
		Body: base64.StdEncoding.EncodeToString([]byte("ok")), IsBase64Encoded: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Code != 201 || rec.Body.String() != "ok" || rec.Header().Get("Content-Type") != "text/plain" ||
		len(rec.Header()["X-A"]) != 2 || rec.Header().Get("Set-Cookie") != "s=1; HttpOnly" {
		t.Errorf("response %d %q %v", rec.Code, rec.Body.String(), rec.Header())
	}
	rec = httptest.NewRecorder()
	if err := apigwtest.WriteResponse(rec, events.APIGatewayV2HTTPResponse{Body: "x"}); err != nil || rec.Code != http.StatusOK {
		t.Errorf("no status: %d %v, want 200", rec.Code, err)
	}
	if err := apigwtest.WriteResponse(httptest.NewRecorder(), events.APIGatewayV2HTTPResponse{Body: "%%", IsBase64Encoded: true}); err == nil {
		t.Error("a bad base64 body was written")
	}
}
