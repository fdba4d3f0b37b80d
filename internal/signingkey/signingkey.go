// Package signingkey (internal/signingkey) holds buyflow's request-signing keys: it loads a key
// by reference (an AWS KMS asymmetric key, or a PEM file on the local stack), names it by its
// RFC 7638 thumbprint, and serves the public keys as the JWKS sellers verify buyflow's
// signatures with (GET JWKSPath, public, cacheable).
//
// The private key of a KMS key never leaves KMS: Sign sends the SHA-256 digest of the
// signature base and gets the signature back (ECDSA_SHA_256 on an ECC_NIST_P256 key: the
// profile's ecdsa-p256-sha256).
package signingkey

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/reqsign"
	"github.com/buyflow/buyflow/internal/webhookauth"
)

// JWKSPath is the public route of the HTTP API that serves the JWKS.
const JWKSPath = "/v1/jwks.json"

// CacheSeconds is the JWKS answer's max-age. A key must be published at least this long
// before it signs (docs/ARCHITECTURE.md, Request signing: rotation), so that no verifier
// holds a cached JWKS without it when its first signature arrives; verifiers also refetch on
// an unknown kid.
const CacheSeconds = 300

// KMS is the part of the KMS API buyflow uses (NewKMS: its JSON protocol over HTTP).
type KMS interface {
	// GetPublicKey returns the key's public half (DER SubjectPublicKeyInfo), spec and usage.
	GetPublicKey(ctx context.Context, keyID string) (*PublicKey, error)
	// Sign signs a SHA-256 digest with ECDSA_SHA_256 and returns the DER signature.
	Sign(ctx context.Context, keyID string, digest []byte) ([]byte, error)
}

// PublicKey is KMS's GetPublicKey answer, as buyflow reads it.
type PublicKey struct {
	DER      []byte `json:"PublicKey"`
	KeySpec  string `json:"KeySpec"`
	KeyUsage string `json:"KeyUsage"`
}

// The key spec and usage the request-signing profile's ecdsa-p256-sha256 needs.
const (
	keySpecP256    = "ECC_NIST_P256"
	keyUsageSignIt = "SIGN_VERIFY"
)

// Key is one request-signing key.
type Key struct {
	// Ref is how the deployment names it: "kms:<key ARN or alias ARN>" or "file:<PEM path>".
	Ref string
	// KeyID is the JWK kid and the signature's keyid: the key's RFC 7638 thumbprint, so a
	// rotation can never reuse a kid for another key.
	KeyID  string
	Public crypto.PublicKey
	// Signer signs with the private key (in KMS for a kms: key).
	Signer crypto.Signer
}

// ErrRef reports a key reference that is neither kms: nor file:.
var ErrRef = errors.New("signingkey: a key reference is kms:<key arn> or file:<pem path>")

// signTimeout bounds one KMS Sign: crypto.Signer carries no context.
const signTimeout = 5 * time.Second

// Load loads the key ref names. kmsAPI is used for kms: keys (nil: they are refused).
func Load(ctx context.Context, ref string, kmsAPI KMS) (*Key, error) {
	kind, rest, _ := strings.Cut(ref, ":")
	var signer crypto.Signer
	switch {
	case kind == "kms" && rest != "" && kmsAPI != nil:
		out, err := kmsAPI.GetPublicKey(ctx, rest)
		if err != nil {
			return nil, fmt.Errorf("signingkey: public key of %s: %w", rest, err)
		}
		if out.KeySpec != keySpecP256 || out.KeyUsage != keyUsageSignIt {
			return nil, fmt.Errorf("signingkey: %s is %s/%s; the request-signing profile needs an ECC_NIST_P256 SIGN_VERIFY key", rest, out.KeySpec, out.KeyUsage)
		}
		pub, err := x509.ParsePKIXPublicKey(out.DER)
		if err != nil {
			return nil, fmt.Errorf("signingkey: public key of %s: %w", rest, err)
		}
		ec, ok := pub.(*ecdsa.PublicKey)
		if !ok || ec.Curve != elliptic.P256() {
			return nil, fmt.Errorf("signingkey: %s is not a P-256 key", rest)
		}
		signer = &kmsSigner{api: kmsAPI, keyID: rest, pub: ec}
	case kind == "file" && rest != "":
		data, err := os.ReadFile(rest)
		if err != nil {
			return nil, fmt.Errorf("signingkey: %w", err)
		}
		if signer, err = ParsePEM(data); err != nil {
			return nil, fmt.Errorf("signingkey: %s: %w", rest, err)
		}
	default:
		return nil, fmt.Errorf("%w (got %q)", ErrRef, ref)
	}
	kid, err := Thumbprint(signer.Public())
	if err != nil {
		return nil, err
	}
	return &Key{Ref: ref, KeyID: kid, Public: signer.Public(), Signer: signer}, nil
}

// ParsePEM reads a PKCS #8 PEM private key: Ed25519 or ECDSA P-256, the profile's algorithms.
func ParsePEM(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PKCS #8 PEM private key")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	switch k := k.(type) {
	case ed25519.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		if k.Curve == elliptic.P256() {
			return k, nil
		}
	}
	return nil, fmt.Errorf("a %T key; the request-signing profile allows Ed25519 and ECDSA P-256", k)
}

// Thumbprint is the RFC 7638 JWK thumbprint (SHA-256, base64url) of pub.
func Thumbprint(pub crypto.PublicKey) (string, error) {
	raw, err := webhookauth.PublicJWKFor("x", pub, reqsign.AdCPUse)
	if err != nil {
		return "", err
	}
	var k struct{ Crv, Kty, X, Y string }
	if err := json.Unmarshal(raw, &k); err != nil {
		return "", err
	}
	// The required members in lexicographic order, no whitespace (RFC 7638 §3.2).
	canon := `{"crv":` + strconv.Quote(k.Crv) + `,"kty":` + strconv.Quote(k.Kty) + `,"x":` + strconv.Quote(k.X)
	if k.Kty == "EC" {
		canon += `,"y":` + strconv.Quote(k.Y)
	}
	sum := sha256.Sum256([]byte(canon + "}"))
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// JWKS is the JWK Set of keys: each with its kid, use sig, key_ops [verify] and adcp_use
// request-signing, as the profile's verifiers check.
func JWKS(keys []*Key) ([]byte, error) {
	set := struct {
		Keys []json.RawMessage `json:"keys"`
	}{Keys: []json.RawMessage{}}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.KeyID] {
			continue
		}
		seen[k.KeyID] = true
		j, err := webhookauth.PublicJWKFor(k.KeyID, k.Public, reqsign.AdCPUse)
		if err != nil {
			return nil, err
		}
		set.Keys = append(set.Keys, j)
	}
	return json.Marshal(set)
}

// Serve answers GET (and HEAD) JWKSPath with jwks, publicly cacheable for CacheSeconds, and
// hands every other request to next.
func Serve(jwks []byte, next func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if req.RawPath != JWKSPath {
			return next(ctx, req)
		}
		h := map[string]string{"Content-Type": "application/jwk-set+json",
			"Cache-Control": "public, max-age=" + strconv.Itoa(CacheSeconds)}
		switch req.RequestContext.HTTP.Method {
		case "GET":
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: h, Body: string(jwks)}, nil
		case "HEAD":
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: h}, nil
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 405, Headers: map[string]string{"Allow": "GET, HEAD", "Content-Type": "application/json"},
			Body: `{"error":{"code":"method_not_allowed","message":"the JWKS is read with GET"}}`}, nil
	}
}

// kmsSigner is a crypto.Signer over a KMS ECC_NIST_P256 key: it signs SHA-256 digests.
type kmsSigner struct {
	api   KMS
	keyID string
	pub   *ecdsa.PublicKey
}

func (s *kmsSigner) Public() crypto.PublicKey { return s.pub }

// Sign returns KMS's ASN.1 DER ECDSA signature of digest (internal/webhookauth converts it to
// the r‖s the profile sends).
func (s *kmsSigner) Sign(_ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if opts.HashFunc() != crypto.SHA256 || len(digest) != sha256.Size {
		return nil, errors.New("signingkey: a KMS P-256 key signs SHA-256 digests only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), signTimeout)
	defer cancel()
	sig, err := s.api.Sign(ctx, s.keyID, digest)
	if err != nil {
		return nil, fmt.Errorf("signingkey: kms sign with %s: %w", s.keyID, err)
	}
	return sig, nil
}
