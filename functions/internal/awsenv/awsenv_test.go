package awsenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoad(t *testing.T) {
	cfg, err := Load(env(map[string]string{
		"AWS_DEFAULT_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "t",
		"AWS_ENDPOINT_URL": "http://127.0.0.1:4566",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-west-1" || aws.ToString(cfg.BaseEndpoint) != "http://127.0.0.1:4566" {
		t.Fatalf("cfg = %+v", cfg)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != "AKIA" || creds.SessionToken != "t" {
		t.Fatalf("creds = %+v, %v", creds, err)
	}
}

func TestLoadReportsEverythingMissing(t *testing.T) {
	_, err := Load(env(nil))
	if err == nil {
		t.Fatal("no error")
	}
	for _, v := range []string{"AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("%s missing from %q", v, err)
		}
	}
	if _, err := Load(env(map[string]string{"AWS_REGION": "r", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL": "localhost"})); err == nil {
		t.Fatal("accepted an endpoint without a scheme")
	}
}

// A response cut off while its body was read is retried (every buyflow write is safe to send
// again); an ordinary error is left to the standard rules.
func TestCutResponsesAreRetryable(t *testing.T) {
	cfg, err := Load(env(map[string]string{"AWS_REGION": "r", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s"}))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Retryer()
	for _, e := range []error{
		fmt.Errorf("deserialization failed: %w", io.ErrUnexpectedEOF),
		errors.New("https response error StatusCode: 200, deserialization failed, read tcp 127.0.0.1:1->127.0.0.1:2: use of closed network connection"),
	} {
		if !r.IsErrorRetryable(e) {
			t.Errorf("%v: not retryable", e)
		}
	}
	if r.IsErrorRetryable(errors.New("ConditionalCheckFailedException: the conditional request failed")) {
		t.Error("an ordinary error became retryable")
	}
}
