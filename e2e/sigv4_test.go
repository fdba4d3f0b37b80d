package e2e

import (
	"context"
	"fmt"
	"net/http"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/buyflow/buyflow/internal/apiclient"
)

// sigV4Signer signs requests for API Gateway's IAM-authorized routes (service execute-api)
// with the default AWS credentials and region.
func sigV4Signer(ctx context.Context) (func(*http.Request, []byte) error, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load aws config for signing: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("no AWS region configured: set AWS_REGION to the stack's region")
	}
	return apiclient.SignV4(cfg.Credentials, "execute-api", cfg.Region), nil
}
