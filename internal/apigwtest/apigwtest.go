// Package apigwtest converts between net/http and the events of an API Gateway HTTP API
// (payload format 2.0), the way API Gateway does, for tests that serve a Lambda handler (or a
// Lambda) over real HTTP: a browser test of the approval page, the workflow tests' API front;
// and builds the event of a request API Gateway authorized with IAM, for the handlers' own
// tests. Only tests import it.
package apigwtest

import (
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/topology"
)

// IAM identity of the caller of [IAMRequest]: an assumed role of account Account.
const (
	account = "111122223333"
	userARN = "arn:aws:sts::111122223333:assumed-role/Buyer/alice"
)

// IAMRequest is the event API Gateway sends for method and path when IAM (SigV4) authorized
// the call for the role UserARN of Account: the route matched in topology.App and its path's
// parameters filled, as API Gateway does before the invocation, and an empty, non-nil header
// map for the test to add to.
func IAMRequest(method, path string) events.APIGatewayV2HTTPRequest {
	route, params, _ := topology.App.Match(method, path)
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: route.Key(), RawPath: path, PathParameters: params,
		Headers: map[string]string{},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "req-1", Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccountID: account, UserARN: userARN},
			},
		},
	}
}

// maxBody is the largest request body Request reads (API Gateway's payload limit is 10 MB).
const maxBody = 10 << 20

// Request converts r into the event API Gateway sends for routeKey ("POST /v1/x/{id}") with
// pathParams: lower-case header names with repeated values joined by commas, cookies moved to
// Cookies, the raw path and query string, query parameters joined by commas, a UTF-8 body as
// is and any other body base64-encoded, and the request context's HTTP description (the
// source IP without its port). The authorizer is left empty: IAM identity is the caller's to
// add.
func Request(r *http.Request, routeKey string, pathParams map[string]string) (events.APIGatewayV2HTTPRequest, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, err
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: routeKey, RawPath: r.URL.EscapedPath(), RawQueryString: r.URL.RawQuery,
		Headers: make(map[string]string, len(r.Header)+1), PathParameters: pathParams,
	}
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			for _, v := range vs {
				for c := range strings.SplitSeq(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						ev.Cookies = append(ev.Cookies, c)
					}
				}
			}
			continue
		}
		ev.Headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	ev.Headers["host"] = r.Host
	if r.URL.RawQuery != "" {
		ev.QueryStringParameters = map[string]string{}
		for k, vs := range r.URL.Query() {
			ev.QueryStringParameters[k] = strings.Join(vs, ",")
		}
	}
	if len(body) > 0 {
		if utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	now := time.Now().UTC()
	ev.RequestContext = events.APIGatewayV2HTTPRequestContext{
		Stage: "$default", DomainName: r.Host,
		Time: now.Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: now.UnixMilli(),
		HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
			Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: ip, UserAgent: r.UserAgent(),
		},
	}
	return ev, nil
}

// WriteResponse writes a payload format 2.0 response to w: headers, multi-value headers,
// cookies as Set-Cookie, the status (200 when the response has none, as API Gateway infers)
// and the body (decoded when base64-encoded).
func WriteResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) error {
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			return err
		}
		body = b
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	status := resp.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, err := w.Write(body)
	return err
}
