package httpapi

import (
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

func TestIdentifyDevHeaderOnlyWhenEnabled(t *testing.T) {
	req := iamRequest("GET", "/v1/media-buys")
	req.RequestContext.Authorizer = nil
	req.Headers["x-buyflow-tenant"] = "acme"
	if _, err := Identify(req, ""); !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("dev header honoured while disabled: %v", err)
	}
	c, err := Identify(req, "X-Buyflow-Tenant")
	if err != nil || c.Tenant != "acme" {
		t.Fatalf("Identify = %+v, %v", c, err)
	}
	req.Headers["x-buyflow-tenant"] = "../etc"
	if _, err := Identify(req, "X-Buyflow-Tenant"); err == nil {
		t.Fatal("accepted a bad tenant name")
	}
	// An IAM identity always wins over the header.
	iam := iamRequest("GET", "/v1/media-buys")
	iam.Headers["x-buyflow-tenant"] = "acme"
	if c, _ := Identify(iam, "X-Buyflow-Tenant"); c.Tenant != "111122223333" {
		t.Fatalf("tenant %q", c.Tenant)
	}
}

// iamRequest is a request API Gateway authorized with IAM (SigV4) for an assumed role.
func iamRequest(method, path string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: path, Headers: map[string]string{},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "req-1", Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
					AccountID: "111122223333", UserARN: "arn:aws:sts::111122223333:assumed-role/Buyer/alice",
				},
			},
		},
	}
}
