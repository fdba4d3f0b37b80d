package stagepaths

import (
	"encoding/json"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/apigwtest"
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

func (a *apiFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, params, ok := topology.App.Match(r.Method, r.URL.EscapedPath())
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	account := r.Header.Get(callerAccountHeader)
	r.Header.Del(callerAccountHeader)
	ev, err := apigwtest.Request(r, rt.Key(), params)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "Bad Request"})
		return
	}
	ev.RequestContext.AccountID = "123456789012"
	ev.RequestContext.APIID = a.apiID
	ev.RequestContext.RequestID = newID()
	if rt.Auth == topology.AuthIAM {
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
	_ = apigwtest.WriteResponse(w, resp) // the client went away
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
