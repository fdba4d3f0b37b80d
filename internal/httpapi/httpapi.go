// Package httpapi is the API Gateway HTTP API (payload 2.0) plumbing the HTTP Lambdas' use
// cases share: the error body every refused request gets (a machine-readable code and a
// message a person understands, never a Lambda error, which API Gateway would turn into a bare
// 500), JSON answers, the body, headers, the caller's identity, the panic boundary, and the
// routes of a collection that is submitted to, listed, read and followed (Resource: media buys
// and campaigns). It knows no use case.
package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/charclass"
)

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

// Error answers a refused request with the API's error body (api.Problem).
func Error(status int, code, message, field string) events.APIGatewayV2HTTPResponse {
	return JSON(status, api.Problem{Error: api.ProblemDetail{Code: code, Message: message, Field: field}})
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

// devTenantChars is the class of a dev tenant header's value (1–64 of them).
var devTenantChars = charclass.Of("A-Za-z0-9._-")

// Caller is who sent a request: the tenant (an AWS account) and the principal in it.
type Caller struct {
	Tenant    string
	Principal string
}

// ErrNoIdentity reports a request that carries no caller identity.
var ErrNoIdentity = errors.New("no caller identity")

// Identify returns the caller. With IAM authorization the tenant is the caller's AWS account
// and the principal its user or role ARN. devHeader, when non-empty, names a header from which
// a local, dev-only deployment takes the tenant instead (the CDK stack never sets it; the
// local stack's emulator carries no IAM identity).
func Identify(req events.APIGatewayV2HTTPRequest, devHeader string) (Caller, error) {
	if iam := req.RequestContext.Authorizer; iam != nil && iam.IAM != nil && iam.IAM.AccountID != "" {
		principal := iam.IAM.UserARN
		if principal == "" {
			principal = iam.IAM.CallerID
		}
		return Caller{Tenant: iam.IAM.AccountID, Principal: principal}, nil
	}
	if devHeader != "" {
		tenant := Header(req, devHeader)
		if devTenantChars.Span(tenant, 1, 64) {
			principal := Header(req, "X-Buyflow-Principal")
			if principal == "" {
				principal = "dev:" + tenant
			}
			return Caller{Tenant: tenant, Principal: principal}, nil
		}
	}
	return Caller{}, ErrNoIdentity
}
