package motoserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/buyflow/buyflow/internal/apiclient"
)

// CreateSigningKey creates in the KMS of the moto_server at url, in region, a key like the CDK
// stack's RequestSigningKey (ECC_NIST_P256, SIGN_VERIFY: the request-signing profile's
// ecdsa-p256-sha256) and returns its ARN. moto routes the call to KMS by its SigV4 scope, so
// it is signed, with dummy credentials: moto checks none.
func CreateSigningKey(ctx context.Context, url, region string) (string, error) {
	body, err := json.Marshal(map[string]string{"KeySpec": "ECC_NIST_P256", "KeyUsage": "SIGN_VERIFY",
		"Description": "buyflow request signing (local)"})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/", bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("motoserver: kms CreateKey: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "TrentService.CreateKey")
	if err := apiclient.SignV4(credentials.NewStaticCredentialsProvider("moto", "moto", ""), "kms", region)(req, body); err != nil {
		return "", fmt.Errorf("motoserver: kms CreateKey: %w", err)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return "", fmt.Errorf("motoserver: kms CreateKey: %w", err)
	}
	defer func() { _ = resp.Body.Close() }() // read below
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("motoserver: kms CreateKey: %w", err)
	}
	var out struct {
		KeyMetadata struct{ Arn string } `json:"KeyMetadata"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil || out.KeyMetadata.Arn == "" {
		return "", fmt.Errorf("motoserver: kms CreateKey: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
	return out.KeyMetadata.Arn, nil
}
