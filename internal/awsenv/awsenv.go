// Package awsenv builds the AWS SDK configuration of a Lambda function from the environment the
// Lambda runtime provides: the region, the execution role's session credentials and, for the
// local stack, an endpoint override. It replaces config.LoadDefaultConfig, which links shared
// config files, SSO, STS and IMDS clients a Lambda never uses: 1.6 MB of every bootstrap,
// enough to break the 12 MB budget.
package awsenv

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
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
	if ep := getenv("AWS_ENDPOINT_URL"); ep != "" {
		if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
			return aws.Config{}, fmt.Errorf("awsenv: AWS_ENDPOINT_URL %q is not an http(s) URL", ep)
		}
		cfg.BaseEndpoint = aws.String(ep)
	}
	return cfg, nil
}

func first(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}
