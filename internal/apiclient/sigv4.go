package apiclient

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// SignV4 returns a signer of requests to service in region (AWS Signature Version 4, the
// body's SHA-256 as the payload hash) with the credentials creds gives: API Gateway's
// IAM-authorized routes (service execute-api) for the CLI and the e2e suites, the emulated
// AWS APIs for the local stack.
func SignV4(creds aws.CredentialsProvider, service, region string) func(*http.Request, []byte) error {
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
