package signingkey_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/motoserver"
	"github.com/buyflow/buyflow/internal/reqsign"
	"github.com/buyflow/buyflow/internal/signingkey"
)

// motoKMS is the KMS client of a moto_server at url in region us-east-1, and a fresh key there
// like the CDK stack's RequestSigningKey.
func motoKMS(t *testing.T, url string) (*signingkey.KMSClient, string) {
	t.Helper()
	arn, err := motoserver.CreateSigningKey(context.Background(), url, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	return signingkey.NewKMS(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDMOTO", "secret", "")}), arn
}

// The KMS client against moto's KMS (a KMS nobody here wrote; motoserver mends its two gaps,
// pinned below): the key loads by its ARN, a signature made through KMS verifies with the
// public key GetPublicKey gave, and an RFC 9421 request signature made with it verifies
// with the JWKS buyflow serves, under the key's thumbprint kid.
// An unknown key is KMS's own NotFoundException.
func TestKMSClientAgainstMoto(t *testing.T) {
	client, arn := motoKMS(t, dynamotest.MotoServer(t))
	ctx := context.Background()
	key, err := signingkey.Load(ctx, "kms:"+arn, client)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := client.GetPublicKey(ctx, arn)
	if err != nil {
		t.Fatal(err)
	}
	signsAndVerifies(t, key, pub.DER)

	body := []byte(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"create_media_buy"},"id":1}`)
	req, _ := http.NewRequest(http.MethodPost, "https://seller.example/mcp", strings.NewReader(string(body)))
	s := &reqsign.Signer{KeyID: key.KeyID, Key: key.Signer}
	if err := s.Sign(req, body, reqsign.Profile31, "required"); err != nil {
		t.Fatal(err)
	}
	verifySignedRequest(t, req, key)

	missing := strings.TrimSuffix(arn, arn[strings.LastIndexByte(arn, '/')+1:]) + "00000000-0000-0000-0000-000000000000"
	if _, err := signingkey.Load(ctx, "kms:"+missing, client); err == nil || !strings.Contains(err.Error(), "NotFoundException") {
		t.Errorf("an unknown key: err = %v", err)
	}
}

// moto 5.2.1's KMS as shipped, pinned: Sign with MessageType=DIGEST signs the SHA-256 of the
// digest (AWS signs the digest), and GetPublicKey has no KeySpec (AWS sends it). These are
// what motoserver's sitecustomize.py mends; when this test fails, moto has fixed one and the
// mend can go.
func TestStockMotoKMSGaps(t *testing.T) {
	client, arn := motoKMS(t, dynamotest.StockMotoServer(t))
	ctx := context.Background()
	pub, err := client.GetPublicKey(ctx, arn)
	if err != nil {
		t.Fatal(err)
	}
	if pub.KeySpec != "" {
		t.Errorf("stock moto now answers KeySpec %q: drop that mend from internal/motoserver/sitecustomize.py", pub.KeySpec)
	}
	if _, err := signingkey.Load(ctx, "kms:"+arn, client); err == nil || !strings.Contains(err.Error(), "ECC_NIST_P256") {
		t.Errorf("Load of a key without KeySpec: err = %v", err)
	}
	parsed, err := x509.ParsePKIXPublicKey(pub.DER)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("signature base"))
	sig, err := client.Sign(ctx, arn, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	again := sha256.Sum256(digest[:])
	switch k := parsed.(*ecdsa.PublicKey); {
	case ecdsa.VerifyASN1(k, digest[:], sig):
		t.Error("stock moto now signs a DIGEST as given: drop that mend from internal/motoserver/sitecustomize.py")
	case !ecdsa.VerifyASN1(k, again[:], sig):
		t.Error("stock moto's DIGEST signature verifies neither over the digest nor over its SHA-256")
	}
}
