package httpapi

import (
	"errors"
	"testing"

	"github.com/buyflow/buyflow/internal/apigwtest"
)

func TestIdentifyDevHeaderOnlyWhenEnabled(t *testing.T) {
	req := apigwtest.IAMRequest("GET", "/v1/media-buys")
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
	iam := apigwtest.IAMRequest("GET", "/v1/media-buys")
	iam.Headers["x-buyflow-tenant"] = "acme"
	if c, _ := Identify(iam, "X-Buyflow-Tenant"); c.Tenant != "111122223333" {
		t.Fatalf("tenant %q", c.Tenant)
	}
}
