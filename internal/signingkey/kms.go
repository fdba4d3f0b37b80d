package signingkey

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
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
	api := awsjson.Service{Name: "kms", URL: kmsEndpoint(cfg), TargetPrefix: "TrentService", Version: "1.1",
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

// kmsEndpoint is the KMS endpoint of cfg's region (AWS and AWS China partitions), or its
// BaseEndpoint when set.
func kmsEndpoint(cfg aws.Config) string {
	if cfg.BaseEndpoint != nil && *cfg.BaseEndpoint != "" {
		return *cfg.BaseEndpoint
	}
	suffix := "amazonaws.com"
	if strings.HasPrefix(cfg.Region, "cn-") {
		suffix = "amazonaws.com.cn"
	}
	return "https://kms." + cfg.Region + "." + suffix
}

// KMS's answers that are worth another try: throttling (KMS's request quotas are per second,
// shared by every function of the account and region) and its own transient failures. Any
// other error (a key that does not exist, a denied call, a bad request) is the same on every
// try.
var retryable = map[string]bool{
	"ThrottlingException": true, "KMSInternalException": true, "DependencyTimeoutException": true,
}

// Retries of one call: at most kmsAttempts tries, waiting a random time up to kmsBackoff,
// then twice that (full jitter, as the AWS SDKs do), so a burst of cold starts spreads out.
// Both operations only read (GetPublicKey) or compute (Sign), so a retry changes nothing.
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
	for attempt := 1; ; attempt++ {
		err := c.api.Call(ctx, op, in, out)
		var refused *awsjson.Error
		again := errors.As(err, &refused) && (retryable[refused.Type] || refused.Status >= 500) ||
			errors.Is(err, awsjson.ErrNoAnswer) && ctx.Err() == nil
		if err == nil || !again || attempt == kmsAttempts {
			if err != nil && again {
				err = fmt.Errorf("%w (after %d tries)", err, attempt)
			}
			return err
		}
		wait := time.Duration(rand.Int64N(int64(kmsBackoff) << (attempt - 1)))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (then %w)", err, ctx.Err())
		case <-time.After(wait):
		}
	}
}
