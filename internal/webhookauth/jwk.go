package webhookauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
)

// jwk is the subset of RFC 7517 members the profile uses.
type jwk struct {
	Kty     string   `json:"kty"`
	Crv     string   `json:"crv,omitempty"`
	X       string   `json:"x,omitempty"`
	Y       string   `json:"y,omitempty"`
	Kid     string   `json:"kid"`
	Alg     string   `json:"alg,omitempty"`
	Use     string   `json:"use,omitempty"`
	KeyOps  []string `json:"key_ops,omitempty"`
	AdcpUse string   `json:"adcp_use,omitempty"`
}

// PublicJWK returns the public JWK JSON for a signer key with kid, alg, use/adcp_use set as the profile wants.
//
// The JWK carries use "sig", key_ops ["verify"] and adcp_use
// "webhook-signing" (the value the conformance keys and @adcp/sdk use;
// verifiers also accept "request-signing").
func PublicJWK(kid string, key crypto.Signer) ([]byte, error) {
	if key == nil {
		return nil, fmt.Errorf("%w: nil key", ErrConfig)
	}
	return PublicJWKFor(kid, key.Public(), "webhook-signing")
}

// PublicJWKFor returns the public JWK JSON of pub (ed25519.PublicKey or a
// P-256 *ecdsa.PublicKey) for the purpose adcpUse ("webhook-signing",
// "request-signing"): use "sig", key_ops ["verify"], kty/crv/alg matching
// the key, as the profiles' verifiers check.
func PublicJWKFor(kid string, pub crypto.PublicKey, adcpUse string) ([]byte, error) {
	if kid == "" {
		return nil, fmt.Errorf("%w: empty kid", ErrConfig)
	}
	k := jwk{Kid: kid, Use: "sig", KeyOps: []string{"verify"}, AdcpUse: adcpUse}
	switch pub := pub.(type) {
	case ed25519.PublicKey:
		k.Kty, k.Crv, k.Alg = "OKP", "Ed25519", "EdDSA"
		k.X = base64.RawURLEncoding.EncodeToString(pub)
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%w: ecdsa key is not p-256", ErrConfig)
		}
		raw, err := pub.Bytes() // 0x04 ‖ X ‖ Y
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		k.Kty, k.Crv, k.Alg = "EC", "P-256", "ES256"
		k.X = base64.RawURLEncoding.EncodeToString(raw[1:33])
		k.Y = base64.RawURLEncoding.EncodeToString(raw[33:65])
	default:
		return nil, fmt.Errorf("%w: unsupported key type %T", ErrConfig, pub)
	}
	return json.Marshal(k)
}

// verifyKey is a parsed JWK ready for verification.
type verifyKey struct {
	kid string
	alg string // AlgEd25519 or AlgES256; "" if the JWK is unusable
	ed  ed25519.PublicKey
	ec  *ecdsa.PublicKey
	// purposeErr is non-nil when the JWK fails the profile's purpose
	// checks; it is reported only when the key is selected.
	purposeErr error
}

// parseJWKS parses a JWK Set. Keys without a kid are ignored; keys that
// fail the purpose or shape checks are kept with purposeErr set, so that a
// lookup reports ErrKeyPurpose rather than ErrUnknownKey.
func parseJWKS(data []byte) (map[string]*verifyKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("parse jwks: %w", err)
	}
	out := make(map[string]*verifyKey, len(set.Keys))
	for _, raw := range set.Keys {
		var k jwk
		if err := json.Unmarshal(raw, &k); err != nil || k.Kid == "" {
			continue
		}
		if _, dup := out[k.Kid]; dup {
			// Two keys under one kid are ambiguous: refuse both.
			out[k.Kid] = &verifyKey{kid: k.Kid, purposeErr: fmt.Errorf("%w: duplicate kid in jwks", ErrKeyPurpose)}
			continue
		}
		out[k.Kid] = parseJWK(&k)
	}
	return out, nil
}

func parseJWK(k *jwk) *verifyKey {
	vk := &verifyKey{kid: k.Kid}
	switch {
	case k.AdcpUse != "webhook-signing" && k.AdcpUse != "request-signing":
		vk.purposeErr = fmt.Errorf("%w: adcp_use %q", ErrKeyPurpose, k.AdcpUse)
		return vk
	case k.Use != "" && k.Use != "sig":
		vk.purposeErr = fmt.Errorf("%w: use %q", ErrKeyPurpose, k.Use)
		return vk
	case !slices.Contains(k.KeyOps, "verify"):
		vk.purposeErr = fmt.Errorf("%w: key_ops lacks verify", ErrKeyPurpose)
		return vk
	}
	switch {
	case k.Kty == "OKP" && k.Crv == "Ed25519" && (k.Alg == "" || k.Alg == "EdDSA"):
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			vk.purposeErr = fmt.Errorf("%w: bad ed25519 x", ErrKeyPurpose)
			return vk
		}
		vk.alg, vk.ed = AlgEd25519, ed25519.PublicKey(x)
	case k.Kty == "EC" && k.Crv == "P-256" && (k.Alg == "" || k.Alg == "ES256"):
		x, err1 := base64.RawURLEncoding.DecodeString(k.X)
		y, err2 := base64.RawURLEncoding.DecodeString(k.Y)
		if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
			vk.purposeErr = fmt.Errorf("%w: bad p-256 coordinates", ErrKeyPurpose)
			return vk
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			vk.purposeErr = fmt.Errorf("%w: p-256 point: %w", ErrKeyPurpose, err)
			return vk
		}
		vk.alg, vk.ec = AlgES256, pub
	default:
		vk.purposeErr = fmt.Errorf("%w: unsupported kty/crv/alg %s/%s/%s", ErrKeyPurpose, k.Kty, k.Crv, k.Alg)
	}
	return vk
}

// verify checks sig over base with the key.
func (vk *verifyKey) verify(alg string, base, sig []byte) bool {
	switch alg {
	case AlgEd25519:
		return vk.ed != nil && len(sig) == ed25519.SignatureSize && ed25519.Verify(vk.ed, base, sig)
	case AlgES256:
		if vk.ec == nil || len(sig) != 64 {
			return false
		}
		h := sha256.Sum256(base)
		r := new(big.Int).SetBytes(sig[:32])
		s := new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(vk.ec, h[:], r, s)
	}
	return false
}
