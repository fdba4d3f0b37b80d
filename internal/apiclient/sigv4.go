package apiclient

import (
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/buyflow/buyflow/internal/sigv4"
)

// SignV4 returns a signer of requests to service in region (AWS Signature Version 4,
// internal/sigv4) with the credentials creds gives: API Gateway's IAM-authorized routes
// (service execute-api) for the CLI and the e2e suites, the emulated AWS APIs for the local
// stack.
func SignV4(creds aws.CredentialsProvider, service, region string) func(*http.Request, []byte) error {
	return sigv4.Signer(creds, service, region)
}
