package secrets

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/buyflow/buyflow/internal/awsjson"
	"github.com/buyflow/buyflow/internal/sigv4"
)

// Client reads secrets from Secrets Manager over its JSON protocol (AWS JSON 1.1, X-Amz-Target
// secretsmanager.GetSecretValue; internal/awsjson), signed with the function's credentials: one
// operation, without the SDK's client and its cold-start cost.
type Client struct {
	api awsjson.Service
}

// NewClient returns the Secrets Manager client of cfg: its region and credentials, and its
// BaseEndpoint when set (AWS_ENDPOINT_URL), else the region's public endpoint.
func NewClient(cfg aws.Config) *Client {
	api := awsjson.Service{Name: "secretsmanager", URL: awsjson.Endpoint(aws.ToString(cfg.BaseEndpoint), "secretsmanager", cfg.Region),
		TargetPrefix: "secretsmanager", Version: "1.1", HTTP: &http.Client{Timeout: tryTimeout}}
	if cfg.Credentials != nil {
		api.Sign = sigv4.Signer(cfg.Credentials, "secretsmanager", cfg.Region)
	}
	return &Client{api: api}
}

// Reading a secret changes nothing, so a throttled, failed (5xx) or unanswered read is tried
// again, three tries in all; one try that hangs gets tryTimeout (a read takes milliseconds).
const tryTimeout = 5 * time.Second

var retry = awsjson.Retry{Attempts: 3, Backoff: 100 * time.Millisecond, Again: awsjson.Throttling}

// SecretValue returns the current value of the secret name: its SecretString, or its
// SecretBinary when the secret is binary. A secret that does not exist is an error matching
// ErrNotFound; another refusal is an *awsjson.Error (a smithy.APIError).
func (c *Client) SecretValue(ctx context.Context, name string) ([]byte, error) {
	var out struct {
		SecretString *string `json:"SecretString"`
		SecretBinary []byte  `json:"SecretBinary"`
	}
	err := c.api.CallRetrying(ctx, "GetSecretValue", map[string]string{"SecretId": name}, &out, retry)
	var refused *awsjson.Error
	if errors.As(err, &refused) && refused.Type == "ResourceNotFoundException" {
		return nil, fmt.Errorf("%w (%w)", ErrNotFound, err)
	}
	switch {
	case err != nil:
		return nil, err
	case out.SecretString != nil:
		return []byte(*out.SecretString), nil
	case out.SecretBinary != nil:
		return out.SecretBinary, nil
	}
	return nil, fmt.Errorf("secretsmanager GetSecretValue: %s has no value", name)
}
