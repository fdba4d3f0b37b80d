package signingkey

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// KMSClient calls the two KMS operations buyflow uses over KMS's JSON protocol, SigV4-signed
// with the function's AWS credentials. It is not the SDK's kms client on purpose: that package
// adds about 0.3 MB to every bootstrap that signs, which took them past the 12 MiB budget, for
// two calls whose wire format is a JSON object each way.
type KMSClient struct {
	cfg    aws.Config
	http   *http.Client
	signer *v4.Signer
}

// NewKMS returns the KMS client of cfg: its region and credentials, and its BaseEndpoint when
// set (AWS_ENDPOINT_URL), else the region's public KMS endpoint.
func NewKMS(cfg aws.Config) *KMSClient {
	return &KMSClient{cfg: cfg, http: &http.Client{Timeout: kmsTryTimeout}, signer: v4.NewSigner()}
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

// endpoint is the KMS endpoint of the configuration's region (AWS and AWS China partitions).
func (c *KMSClient) endpoint() string {
	if c.cfg.BaseEndpoint != nil && *c.cfg.BaseEndpoint != "" {
		return strings.TrimSuffix(*c.cfg.BaseEndpoint, "/")
	}
	suffix := "amazonaws.com"
	if strings.HasPrefix(c.cfg.Region, "cn-") {
		suffix = "amazonaws.com.cn"
	}
	return "https://kms." + c.cfg.Region + "." + suffix
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

// call sends one JSON 1.1 request (X-Amz-Target TrentService.<op>) and decodes the answer, or
// returns KMS's error (its __type and message). A throttled, 5xx or unsent request is tried
// again, kmsAttempts in all.
func (c *KMSClient) call(ctx context.Context, op string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	if c.cfg.Credentials == nil {
		return fmt.Errorf("kms %s: no AWS credentials", op)
	}
	ctx, cancel := context.WithTimeout(ctx, signTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		again, err := c.try(ctx, op, body, out)
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

// try sends the request once; again says whether its error is worth another try.
func (c *KMSClient) try(ctx context.Context, op string, body []byte, out any) (again bool, _ error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint()+"/", bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("kms %s: %w", op, err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "TrentService."+op)
	creds, err := c.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return false, fmt.Errorf("kms %s: credentials: %w", op, err)
	}
	sum := sha256.Sum256(body)
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "kms", c.cfg.Region, time.Now()); err != nil {
		return false, fmt.Errorf("kms %s: sign the request: %w", op, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return ctx.Err() == nil, fmt.Errorf("kms %s: %w", op, err)
	}
	defer func() { _ = resp.Body.Close() }() // read below
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return ctx.Err() == nil, fmt.Errorf("kms %s: read the answer: %w", op, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &e) // a body that is not KMS's error shape leaves the status alone
		if i := strings.LastIndexByte(e.Type, '#'); i >= 0 {
			e.Type = e.Type[i+1:]
		}
		again := retryable[e.Type] || resp.StatusCode >= 500
		return again, fmt.Errorf("kms %s: HTTP %d %s: %s", op, resp.StatusCode, e.Type, clip(e.Message, 300))
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return false, fmt.Errorf("kms %s: an answer that is not KMS's JSON: %w", op, err)
	}
	return false, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
