// Package httpapi adapts API Gateway HTTP API (payload 2.0) events to buyflow's use cases:
// decode, identify the caller, call, encode. It owns the one mapping from errors to HTTP
// statuses; a client fault is always an answer with a machine-readable code and a message a
// person understands, never a Lambda error (which API Gateway would turn into a bare 500).
package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/campaign"
	"github.com/buyflow/buyflow/internal/mediabuy"
)

// Problem is the error body of every refused request.
type Problem struct {
	Error ProblemDetail `json:"error"`
}

// ProblemDetail says what went wrong, where and what to do.
type ProblemDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// JSON encodes v with status.
func JSON(status int, v any) events.APIGatewayV2HTTPResponse {
	body, err := json.Marshal(v)
	if err != nil {
		return Error(500, "internal", "the response could not be encoded", "")
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"},
		Body:       string(body),
	}
}

// Error answers a refused request.
func Error(status int, code, message, field string) events.APIGatewayV2HTTPResponse {
	return JSON(status, Problem{Error: ProblemDetail{Code: code, Message: message, Field: field}})
}

// FromError maps an error to its response: the use cases' typed errors become 4xx with their
// code; anything else is logged (with the request id, never the error's text in the body)
// and answered 500.
func FromError(log *slog.Logger, requestID string, err error) events.APIGatewayV2HTTPResponse {
	var re *mediabuy.RequestError
	switch {
	case errors.As(err, &re):
		return Error(re.Status, re.Code, re.Message, re.Field)
	case errors.Is(err, mediabuy.ErrNotFound):
		return Error(404, "not_found", "no media buy with that id", "")
	case errors.Is(err, campaign.ErrNotFound):
		return Error(404, "not_found", "no campaign with that id", "")
	}
	log.Error("request failed", "requestId", requestID, "err", err)
	return Error(500, "internal", "buyflow could not complete the request; it is safe to retry with the same Idempotency-Key (request "+requestID+")", "")
}

// Body returns the raw request body, decoding API Gateway's base64 form.
func Body(req events.APIGatewayV2HTTPRequest) ([]byte, error) {
	if req.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return nil, fmt.Errorf("decode base64 body: %w", err)
		}
		return b, nil
	}
	return []byte(req.Body), nil
}

// Header returns a request header by case-insensitive name (API Gateway lower-cases them,
// emulators may not).
func Header(req events.APIGatewayV2HTTPRequest, name string) string {
	if v, ok := req.Headers[strings.ToLower(name)]; ok {
		return v
	}
	for k, v := range req.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

var devTenantRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ErrNoIdentity reports a request that carries no caller identity.
var ErrNoIdentity = errors.New("no caller identity")

// Identify returns the caller. With IAM authorization the tenant is the caller's AWS account
// and the principal its user or role ARN. devHeader, when non-empty, names a header from which
// a local, dev-only deployment takes the tenant instead (the CDK stack never sets it; the
// local stack's emulator carries no IAM identity).
func Identify(req events.APIGatewayV2HTTPRequest, devHeader string) (mediabuy.Caller, error) {
	if iam := req.RequestContext.Authorizer; iam != nil && iam.IAM != nil && iam.IAM.AccountID != "" {
		principal := iam.IAM.UserARN
		if principal == "" {
			principal = iam.IAM.CallerID
		}
		return mediabuy.Caller{Tenant: iam.IAM.AccountID, Principal: principal}, nil
	}
	if devHeader != "" {
		tenant := Header(req, devHeader)
		if devTenantRE.MatchString(tenant) {
			principal := Header(req, "X-Buyflow-Principal")
			if principal == "" {
				principal = "dev:" + tenant
			}
			return mediabuy.Caller{Tenant: tenant, Principal: principal}, nil
		}
	}
	return mediabuy.Caller{}, ErrNoIdentity
}
