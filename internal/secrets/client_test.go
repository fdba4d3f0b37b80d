package secrets_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/secrets"
)

// The client against two Secrets Managers nobody here wrote, kumo's and moto's, each given its
// secrets by the SDK's own client: a string secret, a binary one and a missing one read as
// Secrets Manager answers them.
func TestClientReadsWhatTheSDKStored(t *testing.T) {
	for name, url := range map[string]func(testing.TB) string{
		"kumo": func(testing.TB) string { return dynamotest.Endpoint() },
		"moto": dynamotest.MotoServer,
	} {
		t.Run(name, func(t *testing.T) {
			cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(url(t)),
				Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
			ctx := context.Background()
			sdk := secretsmanager.NewFromConfig(cfg)
			prefix := fmt.Sprintf("buyflow/test-%d/", time.Now().UnixNano())
			if _, err := sdk.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(prefix + "token"), SecretString: aws.String("s3cr3t")}); err != nil {
				t.Fatal(err)
			}
			if _, err := sdk.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(prefix + "bin"), SecretBinary: []byte{0, 1, 2, 255}}); err != nil {
				t.Fatal(err)
			}
			c := secrets.NewClient(cfg)
			if v, err := c.SecretValue(ctx, prefix+"token"); err != nil || string(v) != "s3cr3t" {
				t.Errorf("string secret = %q, %v", v, err)
			}
			if v, err := c.SecretValue(ctx, prefix+"bin"); err != nil || string(v) != "\x00\x01\x02\xff" {
				t.Errorf("binary secret = %q, %v", v, err)
			}
			_, err := c.SecretValue(ctx, prefix+"missing")
			if !errors.Is(err, secrets.ErrNotFound) {
				t.Errorf("missing secret: %v, want ErrNotFound", err)
			}
		})
	}
}

// A throttled or failing read is tried again, three tries in all; a denied one is returned at
// once, as a smithy.APIError with Secrets Manager's code.
func TestClientRetriesWhatAnotherTryCanChange(t *testing.T) {
	for _, tc := range []struct {
		name            string
		status          int
		body            string
		failures, tries int
		wantCode        string
	}{
		{"throttled twice", 400, `{"__type":"ThrottlingException","message":"Rate exceeded"}`, 2, 3, ""},
		{"internal error once", 500, `{"__type":"InternalServiceError","message":"oops"}`, 1, 2, ""},
		{"throttled throughout", 400, `{"__type":"ThrottlingException","message":"Rate exceeded"}`, 99, 3, "ThrottlingException"},
		{"denied", 400, `{"__type":"AccessDeniedException","message":"not authorized to perform: secretsmanager:GetSecretValue"}`, 99, 1, "AccessDeniedException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tries atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || r.Header.Get("Content-Type") != "application/x-amz-json-1.1" ||
					!strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDTEST/") ||
					!strings.Contains(r.Header.Get("Authorization"), "/us-east-1/secretsmanager/aws4_request") {
					t.Errorf("request: %v", r.Header)
				}
				if int(tries.Add(1)) <= tc.failures {
					w.WriteHeader(tc.status)
					_, _ = w.Write([]byte(tc.body))
					return
				}
				_, _ = w.Write([]byte(`{"Name":"n","SecretString":"v"}`))
			}))
			defer srv.Close()
			c := secrets.NewClient(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
				Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
			v, err := c.SecretValue(context.Background(), "n")
			if got := int(tries.Load()); got != tc.tries {
				t.Errorf("%d tries, want %d", got, tc.tries)
			}
			if tc.wantCode == "" {
				if err != nil || string(v) != "v" {
					t.Fatalf("= %q, %v", v, err)
				}
				return
			}
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != tc.wantCode {
				t.Fatalf("err = %v, want a smithy.APIError coded %s", err, tc.wantCode)
			}
		})
	}
}
