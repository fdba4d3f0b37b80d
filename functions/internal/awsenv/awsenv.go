// Package awsenv builds the AWS SDK configuration of a Lambda function from the environment the
// Lambda runtime provides: the region, the execution role's session credentials and, for the
// local stack, an endpoint override. It replaces config.LoadDefaultConfig, which links shared
// config files, SSO, STS and IMDS clients a Lambda never uses: 1.6 MB of every bootstrap,
// enough to break the 12 MB budget.
package awsenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Load returns the SDK configuration from getenv: AWS_REGION (or AWS_DEFAULT_REGION),
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (set by the Lambda runtime for
// the execution role), and AWS_ENDPOINT_URL when an emulator stands in for AWS. Every missing
// variable is reported together.
func Load(getenv func(string) string) (aws.Config, error) {
	var missing []string
	region := first(getenv, "AWS_REGION", "AWS_DEFAULT_REGION")
	if region == "" {
		missing = append(missing, "AWS_REGION")
	}
	key, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	if key == "" {
		missing = append(missing, "AWS_ACCESS_KEY_ID")
	}
	if secret == "" {
		missing = append(missing, "AWS_SECRET_ACCESS_KEY")
	}
	if len(missing) > 0 {
		return aws.Config{}, errors.New("awsenv: not set: " + strings.Join(missing, ", "))
	}
	cfg := aws.Config{
		Region:      region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(key, secret, getenv("AWS_SESSION_TOKEN"))),
	}
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.Retryables = append(o.Retryables, retry.IsErrorRetryableFunc(cutResponse))
		})
	}
	if ep := getenv("AWS_ENDPOINT_URL"); ep != "" {
		if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
			return aws.Config{}, fmt.Errorf("awsenv: AWS_ENDPOINT_URL %q is not an http(s) URL", ep)
		}
		cfg.BaseEndpoint = aws.String(ep)
	}
	return cfg, nil
}

// cutResponse makes a response cut off while its body was read retryable: a 200 whose body
// ends early ("unexpected EOF") or whose connection closed under it ("use of closed network
// connection"; aws/aws-sdk-go-v2#1825). The standard retryer leaves both to the caller because
// the request may have been applied. buyflow's writes are safe to send again: every conditional
// write in internal/ledger recognises its own earlier success, Step Functions names executions
// and answers a second SendTask* as a gone token, which every caller already handles.
func cutResponse(err error) aws.Ternary {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "unexpected EOF") || strings.Contains(err.Error(), "use of closed network connection") {
		return aws.TrueTernary
	}
	return aws.UnknownTernary
}

func first(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}
