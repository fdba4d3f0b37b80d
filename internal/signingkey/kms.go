package signingkey

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/buyflow/buyflow/internal/awsjson"
	"github.com/buyflow/buyflow/internal/sigv4"
)

// KMSClient calls the two KMS operations buyflow uses over KMS's JSON protocol
// (internal/awsjson), SigV4-signed with the function's AWS credentials. It is not the SDK's
// kms client on purpose: that package adds about 0.3 MB to every bootstrap that signs, which
// took them past the 12 MiB budget, for two calls whose wire format is a JSON object each way.
type KMSClient struct {
	cfg aws.Config
	api awsjson.Service
}

// NewKMS returns the KMS client of cfg: its region and credentials, and its BaseEndpoint when
// set (AWS_ENDPOINT_URL), else the region's public KMS endpoint.
func NewKMS(cfg aws.Config) *KMSClient {
	api := awsjson.Service{Name: "kms", URL: awsjson.Endpoint(aws.ToString(cfg.BaseEndpoint), "kms", cfg.Region), TargetPrefix: "TrentService", Version: "1.1",
		HTTP: &http.Client{Timeout: kmsTryTimeout}}
	if cfg.Credentials != nil {
		api.Sign = sigv4.Signer(cfg.Credentials, "kms", cfg.Region)
	}
	return &KMSClient{cfg: cfg, api: api}
}

// GetPublicKey implements KMS.
func (c *KMSClient) GetPublicKey(ctx context.Context, keyID string) (*PublicKey, error) {
	var out PublicKey
	if err := c.call(ctx, "GetPublicKey", map[string]any{"KeyId": keyID}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Sign implements KMS.
func (c *KMSClient) Sign(ctx context.Context, keyID string, digest []byte) ([]byte, error) {
	var out struct {
		Signature []byte `json:"Signature"`
	}
	in := map[string]any{"KeyId": keyID, "Message": digest, "MessageType": "DIGEST", "SigningAlgorithm": "ECDSA_SHA_256"}
	if err := c.call(ctx, "Sign", in, &out); err != nil {
		return nil, err
	}
	if len(out.Signature) == 0 {
		return nil, fmt.Errorf("kms Sign: an answer without a signature")
	}
	return out.Signature, nil
}

// KMS's answers that are worth another try: throttling (KMS's request quotas are per second,
// shared by every function of the account and region) and its own transient failures. Any
// other error (a key that does not exist, a denied call, a bad request) is the same on every
// try.
var kmsRetry = awsjson.Retry{Attempts: kmsAttempts, Backoff: kmsBackoff, Again: func(e *awsjson.Error) bool {
	switch e.Type {
	case "ThrottlingException", "KMSInternalException", "DependencyTimeoutException":
		return true
	}
	return false
}}

// Retries of one call: at most kmsAttempts tries (awsjson.Retry). Both operations only read
// (GetPublicKey) or compute (Sign), so a retry changes nothing.
// The tries together take at most signTimeout, whatever the caller's context allows (a cold
// start's GetPublicKey has no deadline of its own).
// One try that hangs gets kmsTryTimeout (KMS answers a Sign in tens of milliseconds), so that
// another try still fits.
const (
	kmsAttempts   = 3
	kmsBackoff    = 50 * time.Millisecond
	kmsTryTimeout = 2 * time.Second
)

// call sends one request (X-Amz-Target TrentService.<op>) and decodes the answer, or returns
// KMS's error. A throttled, 5xx or unanswered request is tried again, kmsAttempts in all.
func (c *KMSClient) call(ctx context.Context, op string, in, out any) error {
	if c.cfg.Credentials == nil {
		return fmt.Errorf("kms %s: no AWS credentials", op)
	}
	ctx, cancel := context.WithTimeout(ctx, signTimeout)
	defer cancel()
	return c.api.CallRetrying(ctx, op, in, out, kmsRetry)
}
