package stagepaths

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/topology"
)

// callerAccountHeader carries the test caller's AWS account into the front, which turns it
// into the IAM authorizer context API Gateway gives an IAM-authorized route (the header itself
// is not forwarded). A request to an IAM route without it is refused with 403, as API Gateway
// refuses an unsigned request.
const callerAccountHeader = "X-Test-Caller-Account"

// apiFront is the HTTP API: it matches topology.App.Routes, builds the API Gateway v2 (payload
// format 2.0) event and invokes the route's function through the Lambda service.
type apiFront struct {
	lambda *lambdaService
	apiID  string
}

type route struct {
	topology.Route
	segments []string
}

func matchRoute(method, path string) (route, map[string]string, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for _, r := range topology.App.Routes {
		if r.Method != method {
			continue
		}
		segs := strings.Split(strings.Trim(r.Path, "/"), "/")
		if len(segs) != len(parts) {
			continue
		}
		params := map[string]string{}
		ok := true
		for i, s := range segs {
			if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
				if parts[i] == "" {
					ok = false
					break
				}
				params[s[1:len(s)-1]] = parts[i]
			} else if s != parts[i] {
				ok = false
				break
			}
		}
		if ok {
			return route{Route: r, segments: segs}, params, true
		}
	}
	return route{}, nil, false
}

func (a *apiFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, params, ok := matchRoute(r.Method, r.URL.EscapedPath())
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Bad Request"})
		return
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       rt.Method + " " + rt.Path,
		RawPath:        r.URL.EscapedPath(),
		RawQueryString: r.URL.RawQuery,
		Headers:        map[string]string{},
		PathParameters: params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			AccountID:  "123456789012",
			APIID:      a.apiID,
			DomainName: r.Host,
			Stage:      "$default",
			RequestID:  newID(),
			Time:       time.Now().UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:  time.Now().UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: sourceIP(r), UserAgent: r.UserAgent(),
			},
		},
	}
	for k, vs := range r.Header {
		if strings.EqualFold(k, callerAccountHeader) {
			continue
		}
		if strings.EqualFold(k, "Cookie") {
			ev.Cookies = append(ev.Cookies, strings.Split(strings.Join(vs, "; "), "; ")...)
			continue
		}
		ev.Headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	ev.Headers["host"] = r.Host
	if q, err := url.ParseQuery(r.URL.RawQuery); err == nil && len(q) > 0 {
		ev.QueryStringParameters = map[string]string{}
		for k, vs := range q {
			ev.QueryStringParameters[k] = strings.Join(vs, ",")
		}
	}
	if len(body) > 0 {
		if textual(r.Header.Get("Content-Type")) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	if rt.Auth == topology.AuthIAM {
		account := r.Header.Get(callerAccountHeader)
		if account == "" {
			writeJSON(w, http.StatusForbidden, map[string]string{"message": "Forbidden"})
			return
		}
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
				AccountID: account, CallerID: "AIDATESTCALLER:" + account,
				UserARN: "arn:aws:iam::" + account + ":user/buyer",
			},
		}
	}
	payload, _ := json.Marshal(ev)
	out, err := a.lambda.Invoke(r.Context(), a.lambda.fn(rt.Function), payload)
	if err != nil || out.errType != "" {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": "Internal Server Error"})
		return
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out.body, &resp); err != nil || resp.StatusCode == 0 {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": "Internal Server Error"})
		return
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
	respBody := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if respBody, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"message": "Internal Server Error"})
			return
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(respBody)
}

func textual(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return contentType == ""
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/x-www-form-urlencoded" || mt == "application/xml"
}

func sourceIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
