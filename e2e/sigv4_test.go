package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
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
	signer := v4.NewSigner()
	return func(r *http.Request, body []byte) error {
		creds, err := cfg.Credentials.Retrieve(r.Context())
		if err != nil {
			return fmt.Errorf("aws credentials: %w", err)
		}
		sum := sha256.Sum256(body)
		return signer.SignHTTP(r.Context(), creds, r, hex.EncodeToString(sum[:]), "execute-api", cfg.Region, time.Now())
	}, nil
}
