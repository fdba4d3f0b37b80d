package signingkey_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/reqsign"
	"github.com/buyflow/buyflow/internal/signingkey"
	"github.com/buyflow/buyflow/internal/webhookauth"
)

// fakeKMS answers GetPublicKey and Sign as KMS does for an ECC_NIST_P256 key (SPKI DER public
// key, ASN.1 DER signature of a digest), and counts the signatures.
type fakeKMS struct {
	key   *ecdsa.PrivateKey
	spec  string
	signs int
}

func (f *fakeKMS) GetPublicKey(_ context.Context, _ string) (*signingkey.PublicKey, error) {
	der, err := x509.MarshalPKIXPublicKey(&f.key.PublicKey)
	if err != nil {
		return nil, err
	}
	return &signingkey.PublicKey{DER: der, KeySpec: f.spec, KeyUsage: "SIGN_VERIFY"}, nil
}

func (f *fakeKMS) Sign(_ context.Context, _ string, digest []byte) ([]byte, error) {
	f.signs++
	return ecdsa.SignASN1(rand.Reader, f.key, digest)
}

func newFakeKMS(t *testing.T) *fakeKMS {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeKMS{key: k, spec: "ECC_NIST_P256"}
}

// TestKMSKeySignsARequestSellersCanVerify: a KMS key signs through the digest API, the
// signature (converted from DER to r‖s) verifies with the public key the JWKS publishes under
// the keyid the signature names.
func TestKMSKeySignsARequestSellersCanVerify(t *testing.T) {
	fk := newFakeKMS(t)
	key, err := signingkey.Load(context.Background(), "kms:arn:aws:kms:eu-west-1:111122223333:key/k1", fk)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"create_media_buy"},"id":1}`)
	req, _ := http.NewRequest(http.MethodPost, "https://seller.example/mcp", strings.NewReader(string(body)))
	s := &reqsign.Signer{KeyID: key.KeyID, Key: key.Signer}
	if err := s.Sign(req, body, reqsign.Profile31, "required"); err != nil {
		t.Fatal(err)
	}
	if fk.signs != 1 {
		t.Fatalf("%d KMS signs, want 1", fk.signs)
	}
	verifySignedRequest(t, req, key)
}

// verifySignedRequest checks req's RFC 9421 signature as a seller does: the JWKS buyflow serves
// for key publishes its kid for request signing, req's Signature-Input names that kid and
// ecdsa-p256-sha256, and the 64-byte r‖s signature verifies over the signature base with the
// published key.
func verifySignedRequest(t *testing.T, req *http.Request, key *signingkey.Key) {
	t.Helper()
	jwks, err := signingkey.JWKS([]*signingkey.Key{key})
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []struct{ Kid, Kty, Crv, X, Y, Alg, AdcpUse string }
	}
	if err := json.Unmarshal(jwks, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("jwks %s (%v)", jwks, err)
	}
	jk := set.Keys[0]
	if jk.Kid != key.KeyID || jk.Alg != "ES256" || !strings.Contains(string(jwks), `"adcp_use":"request-signing"`) {
		t.Fatalf("jwks %s does not publish kid %s for request signing", jwks, key.KeyID)
	}
	if !strings.Contains(req.Header.Get("Signature-Input"), `keyid="`+key.KeyID+`"`) || !strings.Contains(req.Header.Get("Signature-Input"), `alg="ecdsa-p256-sha256"`) {
		t.Fatalf("Signature-Input %q", req.Header.Get("Signature-Input"))
	}
	x, _ := base64.RawURLEncoding.DecodeString(jk.X)
	y, _ := base64.RawURLEncoding.DecodeString(jk.Y)
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		t.Fatal(err)
	}
	base, err := webhookauth.SignatureBase(req, "sig1")
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(strings.TrimSuffix(strings.TrimPrefix(req.Header.Get("Signature"), "sig1=:"), ":"))
	if err != nil || len(sig) != 64 {
		t.Fatalf("signature %q is not a 64-byte r‖s", req.Header.Get("Signature"))
	}
	h := sha256.Sum256(base)
	if !ecdsa.Verify(pub, h[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		t.Fatal("the KMS signature does not verify with the published key")
	}
}

// TestLoadRefusesKeysTheProfileDoesNotAllow: a KMS key that is not ECC_NIST_P256 (RSA,
// secp256k1) and references of an unknown kind fail at load, not at the first signature.
func TestLoadRefusesKeysTheProfileDoesNotAllow(t *testing.T) {
	fk := newFakeKMS(t)
	fk.spec = "ECC_SECG_P256K1"
	if _, err := signingkey.Load(context.Background(), "kms:k1", fk); err == nil || !strings.Contains(err.Error(), "ECC_NIST_P256") {
		t.Errorf("secp256k1 key: err = %v", err)
	}
	for _, ref := range []string{"", "k1", "secretsmanager:k1", "kms:", "file:"} {
		if _, err := signingkey.Load(context.Background(), ref, newFakeKMS(t)); err == nil {
			t.Errorf("Load(%q) accepted", ref)
		}
	}
}

// TestFileKeyAndJWKSRoute: the local stack's PEM key loads with a thumbprint kid; the route
// serves the JWKS with a public max-age and leaves every other path to the function.
func TestFileKeyAndJWKSRoute(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := signingkey.Load(context.Background(), "file:"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	next, err := signingkey.Load(context.Background(), "kms:k2", newFakeKMS(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(key.KeyID) != 43 || key.KeyID == next.KeyID {
		t.Fatalf("kids %q and %q: want distinct SHA-256 thumbprints", key.KeyID, next.KeyID)
	}
	jwks, err := signingkey.JWKS([]*signingkey.Key{key, next, key})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(jwks), `"kid"`) != 2 {
		t.Fatalf("jwks %s: want the current and the next key once each", jwks)
	}
	passed := false
	h := signingkey.Serve(jwks, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		passed = true
		return events.APIGatewayV2HTTPResponse{StatusCode: 404}, nil
	})
	get := events.APIGatewayV2HTTPRequest{RawPath: signingkey.JWKSPath}
	get.RequestContext.HTTP.Method = "GET"
	resp, _ := h(context.Background(), get)
	if resp.StatusCode != 200 || resp.Body != string(jwks) || resp.Headers["Cache-Control"] != "public, max-age=300" {
		t.Fatalf("GET %s = %d %v %s", signingkey.JWKSPath, resp.StatusCode, resp.Headers, resp.Body)
	}
	post := get
	post.RequestContext.HTTP.Method = "POST"
	if resp, _ := h(context.Background(), post); resp.StatusCode != 405 || passed {
		t.Fatalf("POST = %d (passed on %v)", resp.StatusCode, passed)
	}
	other := get
	other.RawPath = "/v1/webhooks/adcp/op1"
	if _, _ = h(context.Background(), other); !passed {
		t.Fatal("another path did not reach the function")
	}
}
