// Package sigv4 signs HTTP requests with AWS Signature Version 4 for the callers that speak an
// AWS API without its SDK client: the CLI's and the e2e suites' IAM-authorized API routes, the
// local stack's emulated APIs, and SQS (internal/sqsjson), whose SDK client would push the
// reconcile function's bootstrap over its size budget.
package sigv4

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Signer returns a signer of requests to service in region (the body's SHA-256 as the payload
// hash) with the credentials creds gives.
func Signer(creds aws.CredentialsProvider, service, region string) func(*http.Request, []byte) error {
	signer := v4.NewSigner()
	return func(r *http.Request, body []byte) error {
		c, err := creds.Retrieve(r.Context())
		if err != nil {
			return fmt.Errorf("aws credentials: %w", err)
		}
		sum := sha256.Sum256(body)
		return signer.SignHTTP(r.Context(), c, r, hex.EncodeToString(sum[:]), service, region, time.Now())
	}
}
