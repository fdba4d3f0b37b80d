package reqsign_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/reqsign"
	"github.com/buyflow/buyflow/internal/webhookauth"
)

const vectorDir = "testdata/vectors/request-signing"

type vector struct {
	Name           string `json:"name"`
	ProfileVersion string `json:"signing_profile_version"`
	Request        struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	} `json:"request"`
	Capability    json.RawMessage `json:"verifier_capability"`
	JWKSRef       []string        `json:"jwks_ref"`
	ExpectedBase  string          `json:"expected_signature_base"`
	ExpectedError struct {
		Success   bool   `json:"success"`
		ErrorCode string `json:"error_code"`
	} `json:"expected_outcome"`
}

type testKey struct {
	Kid     string `json:"kid"`
	Crv     string `json:"crv"`
	AdcpUse string `json:"adcp_use"`
	D       string `json:"_private_d_for_test_only"`
}

func loadVector(t *testing.T, path string) vector {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v vector
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func loadKeys(t *testing.T) map[string]crypto.Signer {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(vectorDir, "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []testKey `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		t.Fatal(err)
	}
	out := map[string]crypto.Signer{}
	for _, k := range set.Keys {
		d, err := base64.RawURLEncoding.DecodeString(k.D)
		if err != nil {
			t.Fatalf("key %s: %v", k.Kid, err)
		}
		switch k.Crv {
		case "Ed25519":
			out[k.Kid] = ed25519.NewKeyFromSeed(d)
		case "P-256":
			priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
			if err != nil {
				t.Fatalf("key %s: %v", k.Kid, err)
			}
			out[k.Kid] = priv
		}
	}
	return out
}

// sigInput is the request-signing member of a vector's Signature-Input.
func sigInput(t *testing.T, header string) webhookauth.SignatureInput {
	t.Helper()
	inputs, err := webhookauth.ParseSignatureInput(header)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		if in.Label == "sig1" {
			return in
		}
	}
	t.Fatal("no sig1 member")
	return webhookauth.SignatureInput{}
}

// signLike signs the vector's request with our signer, pinned to the vector's created, nonce
// and key, under its profile version and content-digest coverage.
func signLike(t *testing.T, v vector, key crypto.Signer, in webhookauth.SignatureInput) (*http.Request, reqsign.Profile) {
	t.Helper()
	req, err := http.NewRequest(v.Request.Method, v.Request.URL, strings.NewReader(v.Request.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", v.Request.Headers["Content-Type"])
	p := reqsign.Profile31
	if v.ProfileVersion == "3.2" {
		p = reqsign.Profile32
	}
	cover := "required"
	if !slices.Contains(in.Components, "content-digest") {
		cover = "forbidden"
	}
	s := &reqsign.Signer{KeyID: in.KeyID, Key: key,
		Now: func() time.Time { return time.Unix(in.Created, 0) }, Nonce: func() string { return in.Nonce }}
	if err := s.Sign(req, []byte(v.Request.Body), p, cover); err != nil {
		t.Fatalf("sign: %v", err)
	}
	return req, p
}

func sigBytes(t *testing.T, header string, p reqsign.Profile) []byte {
	t.Helper()
	raw := strings.TrimSuffix(strings.TrimPrefix(header, "sig1=:"), ":")
	enc := base64.RawURLEncoding
	if p == reqsign.Profile32 {
		enc = base64.StdEncoding
	}
	b, err := enc.Strict().DecodeString(raw)
	if err != nil {
		t.Fatalf("signature %q is not %s's encoding: %v", header, p, err)
	}
	return b
}

func verifies(pub crypto.PublicKey, base, sig []byte) bool {
	switch pub := pub.(type) {
	case ed25519.PublicKey:
		return ed25519.Verify(pub, base, sig)
	case *ecdsa.PublicKey:
		h := sha256.Sum256(base)
		return len(sig) == 64 && ecdsa.Verify(pub, h[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
	}
	return false
}

// TestPositiveVectors signs every positive vector's request as the vector's signer did and
// expects the spec's signature base byte for byte, the same Content-Digest, and a signature
// that verifies (Ed25519 is deterministic: the very same bytes).
func TestPositiveVectors(t *testing.T) {
	keys := loadKeys(t)
	files, _ := filepath.Glob(filepath.Join(vectorDir, "positive", "*.json"))
	more, _ := filepath.Glob(filepath.Join(vectorDir, "profile-3.2", "positive", "*.json"))
	files = append(files, more...)
	if len(files) < 13 {
		t.Fatalf("found %d positive vectors, want the 13 vendored", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(f)))+"/"+filepath.Base(f), func(t *testing.T) {
			v := loadVector(t, f)
			in := sigInput(t, v.Request.Headers["Signature-Input"])
			key := keys[in.KeyID]
			req, p := signLike(t, v, key, in)
			base, err := webhookauth.SignatureBase(req, "sig1")
			if err != nil {
				t.Fatal(err)
			}
			if v.ExpectedBase != "" && string(base) != v.ExpectedBase {
				t.Fatalf("signature base\n got %q\nwant %q", base, v.ExpectedBase)
			}
			if want := v.Request.Headers["Content-Digest"]; want != "" && req.Header.Get("Content-Digest") != want {
				t.Errorf("Content-Digest %q, want %q", req.Header.Get("Content-Digest"), want)
			}
			got := req.Header.Get("Signature")
			if _, ed := key.(ed25519.PrivateKey); ed {
				want := strings.SplitN(v.Request.Headers["Signature"], ", ", 2)[0]
				if got != want {
					t.Errorf("Signature %q, want the vector's %q", got, want)
				}
			}
			if !verifies(key.Public(), base, sigBytes(t, got, p)) {
				t.Error("our signature does not verify over the base")
			}
		})
	}
}

// signerDuty checks what a conformant signer does so that a verifier never reaches the
// negative vector's verdict. sign signs the vector's request with a fresh nonce and now.
type signerDuty func(t *testing.T, v vector, sign func() *http.Request, jwk []byte)

func components(t *testing.T, r *http.Request) webhookauth.SignatureInput {
	return sigInput(t, r.Header.Get("Signature-Input"))
}

// TestNegativeVectors signs each negative vector's request with our signer under the vector's
// capability and checks the signer-side duty the vector guards against. Vectors about a
// verifier's own state (its replay cache, revocation list, rate limits) are listed with why a
// signer cannot violate them; a vector in neither list fails, so new vectors get classified.
func TestNegativeVectors(t *testing.T) {
	keys := loadKeys(t)
	ed := keys["test-ed25519-2026"]
	window := func(t *testing.T, _ vector, sign func() *http.Request, _ []byte) {
		in := components(t, sign())
		if in.Expires <= in.Created || in.Expires-in.Created > 300 || in.Created != time.Now().Unix() && in.Created != time.Now().Unix()-1 {
			t.Errorf("window created=%d expires=%d", in.Created, in.Expires)
		}
	}
	params := func(t *testing.T, _ vector, sign func() *http.Request, _ []byte) {
		h := sign().Header.Get("Signature-Input")
		for _, p := range []string{";created=", ";expires=", `;nonce="`, `;keyid="`, `;alg="`, `;tag="`} {
			if !strings.Contains(h, p) {
				t.Errorf("Signature-Input %q lacks %s (string parameters quoted)", h, p)
			}
		}
	}
	covered := func(t *testing.T, v vector, sign func() *http.Request, _ []byte) {
		capab, err := reqsign.ParseCapability(v.Capability)
		if err != nil {
			t.Fatal(err)
		}
		in := components(t, sign())
		for _, c := range []string{"@method", "@target-uri", "@authority", "content-type"} {
			if !slices.Contains(in.Components, c) {
				t.Errorf("%s not covered", c)
			}
		}
		if digest := slices.Contains(in.Components, "content-digest"); digest != (capab.CoversContentDigest != "forbidden") {
			t.Errorf("content-digest covered=%v under covers_content_digest %q", digest, capab.CoversContentDigest)
		}
	}
	digest := func(t *testing.T, v vector, sign func() *http.Request, _ []byte) {
		r := sign()
		sum := sha256.Sum256([]byte(v.Request.Body))
		if want := "sha-256=:" + base64.RawURLEncoding.EncodeToString(sum[:]) + ":"; r.Header.Get("Content-Digest") != want {
			t.Errorf("Content-Digest %q, want %q over the bytes sent", r.Header.Get("Content-Digest"), want)
		}
		if len(r.Header.Values("Content-Digest")) != 1 || len(r.Header.Values("Content-Type")) != 1 {
			t.Error("Content-Digest and Content-Type must be single-valued")
		}
	}
	purpose := func(t *testing.T, _ vector, sign func() *http.Request, jwk []byte) {
		var k struct {
			Kid, Kty, Crv, Alg, Use, AdcpUse string
			KeyOps                           []string `json:"key_ops"`
		}
		if err := json.Unmarshal(jwk, &k); err != nil {
			t.Fatal(err)
		}
		in := components(t, sign())
		if k.Kid != in.KeyID || k.Use != "sig" || !slices.Equal(k.KeyOps, []string{"verify"}) {
			t.Errorf("published JWK %s does not match keyid %q with use sig, key_ops [verify]", jwk, in.KeyID)
		}
		if !bytes.Contains(jwk, []byte(`"adcp_use":"request-signing"`)) || k.Kty != "OKP" || k.Crv != "Ed25519" || k.Alg != "EdDSA" || in.Alg != "ed25519" {
			t.Errorf("published JWK %s inconsistent with alg %q", jwk, in.Alg)
		}
	}
	duties := map[string]signerDuty{
		"001-no-signature-header.json": func(t *testing.T, _ vector, sign func() *http.Request, _ []byte) {
			r := sign()
			if r.Header.Get("Signature") == "" || r.Header.Get("Signature-Input") == "" {
				t.Error("Signature and Signature-Input must both be sent")
			}
		},
		"002-wrong-tag.json": func(t *testing.T, _ vector, sign func() *http.Request, _ []byte) {
			if in := components(t, sign()); in.Tag != reqsign.Tag {
				t.Errorf("tag %q", in.Tag)
			}
		},
		"003-expired-signature.json": window,
		"004-window-too-long.json":   window,
		"005-alg-not-allowed.json": func(t *testing.T, _ vector, sign func() *http.Request, _ []byte) {
			if in := components(t, sign()); in.Alg != "ed25519" && in.Alg != "ecdsa-p256-sha256" {
				t.Errorf("alg %q", in.Alg)
			}
		},
		"006-missing-covered-component.json": covered,
		"007-missing-content-digest.json":    covered,
		"008-unknown-keyid.json":             purpose,
		"009-key-ops-missing-verify.json":    purpose,
		"010-content-digest-mismatch.json":   digest,
		"011-malformed-header.json": func(t *testing.T, _ vector, sign func() *http.Request, _ []byte) {
			r := sign()
			if _, err := webhookauth.SignatureBase(r, "sig1"); err != nil {
				t.Errorf("our headers do not parse: %v", err)
			}
			if !strings.HasPrefix(r.Header.Get("Signature"), "sig1=:") || !strings.HasSuffix(r.Header.Get("Signature"), ":") {
				t.Errorf("Signature %q is not an sf-binary member", r.Header.Get("Signature"))
			}
		},
		"012-missing-expires-param.json": params,
		"013-expires-le-created.json":    window,
		"014-missing-nonce-param.json":   params,
		"015-signature-invalid.json": func(t *testing.T, _ vector, sign func() *http.Request, _ []byte) {
			r := sign()
			base, err := webhookauth.SignatureBase(r, "sig1")
			if err != nil {
				t.Fatal(err)
			}
			if !verifies(ed.Public(), base, sigBytes(t, r.Header.Get("Signature"), reqsign.Profile31)) {
				t.Error("signature does not verify")
			}
		},
		"016-replayed-nonce.json": func(t *testing.T, _ vector, sign func() *http.Request, _ []byte) {
			if a, b := components(t, sign()), components(t, sign()); a.Nonce == b.Nonce || len(a.Nonce) < 22 {
				t.Errorf("nonces %q and %q: each signature needs a fresh nonce of ≥ 16 bytes", a.Nonce, b.Nonce)
			}
		},
		"018-digest-covered-when-forbidden.json": covered,
		"019-signature-without-signature-input.json": func(t *testing.T, _ vector, sign func() *http.Request, _ []byte) {
			if r := sign(); r.Header.Get("Signature-Input") == "" {
				t.Error("Signature without Signature-Input")
			}
		},
		"021-duplicate-signature-input-label.json": func(t *testing.T, _ vector, sign func() *http.Request, _ []byte) {
			r := sign()
			if len(r.Header.Values("Signature-Input")) != 1 || strings.Count(r.Header.Get("Signature-Input"), "sig1=") != 1 {
				t.Errorf("Signature-Input %q must carry one sig1", r.Header.Values("Signature-Input"))
			}
		},
		"022-multi-valued-content-type.json":   digest,
		"023-multi-valued-content-digest.json": digest,
		"024-unquoted-string-param.json":       params,
		"025-jwk-alg-crv-mismatch.json":        purpose,
		"026-non-ascii-host.json": func(t *testing.T, v vector, sign func() *http.Request, _ []byte) {
			base, err := webhookauth.SignatureBase(sign(), "sig1")
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range string(base) {
				if c > 0x7e {
					t.Fatalf("signature base has non-ascii %q", base)
				}
			}
			if !strings.Contains(string(base), "xn--") {
				t.Errorf("host %s not signed in its A-label form: %q", v.Request.URL, base)
			}
		},
		"028-unsigned-protocol-method-required.json": func(t *testing.T, v vector, _ func() *http.Request, _ []byte) {
			capab, err := reqsign.ParseCapability(v.Capability)
			if err != nil {
				t.Fatal(err)
			}
			if !(reqsign.Policy{Capability: capab}).Covers([]byte(v.Request.Body)) {
				t.Error("a method in protocol_methods_required_for is not signed")
			}
		},
	}
	verifierOnly := map[string]string{
		"017-key-revoked.json": "the verifier's revocation list; buyflow signs only with its current key (docs/ARCHITECTURE.md, rotation)",
		"020-rate-abuse.json":  "the verifier's per-key replay cap; one signature per request sent",
		"027-webhook-registration-authentication-unsigned.json": "legacy push_notification_config.authentication, which buyflow never sends",
	}
	jwk, err := webhookauth.PublicJWKFor("test-ed25519-2026", ed.Public(), reqsign.AdCPUse)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(vectorDir, "negative", "*.json"))
	if len(files) < 28 {
		t.Fatalf("found %d negative vectors, want the 28 vendored", len(files))
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			if why, ok := verifierOnly[name]; ok {
				t.Skip("verifier-side only: " + why)
			}
			duty, ok := duties[name]
			if !ok {
				t.Fatal("unclassified negative vector: add the signer duty it guards")
			}
			v := loadVector(t, f)
			if v.ExpectedError.Success {
				t.Fatal("a negative vector expects success")
			}
			capab, err := reqsign.ParseCapability(v.Capability)
			if err != nil {
				t.Fatal(err)
			}
			sign := func() *http.Request {
				req, err := http.NewRequest(v.Request.Method, v.Request.URL, strings.NewReader(v.Request.Body))
				if err != nil {
					t.Fatal(err)
				}
				s := &reqsign.Signer{KeyID: "test-ed25519-2026", Key: ed}
				if err := s.Sign(req, []byte(v.Request.Body), reqsign.Profile31, capab.CoversContentDigest); err != nil {
					t.Fatalf("sign: %v", err)
				}
				return req
			}
			duty(t, v, sign, jwk)
		})
	}
}

// TestProfile32Negative: under 3.2 the signature and the digest are padded standard base64
// (a base64url signature is rejected at step 1), and a host with an empty DNS label is never
// signed.
func TestProfile32Negative(t *testing.T) {
	keys := loadKeys(t)
	ed := keys["test-ed25519-2026"]
	v := loadVector(t, filepath.Join(vectorDir, "profile-3.2", "negative", "001-base64url-sf-binary.json"))
	req, _ := http.NewRequest(v.Request.Method, v.Request.URL, strings.NewReader(v.Request.Body))
	s := &reqsign.Signer{KeyID: "test-ed25519-2026", Key: ed, Now: func() time.Time { return time.Unix(1776520800, 0) },
		Nonce: func() string { return "KXYnfEfJ0PBRZXQyVXfVQA" }}
	if err := s.Sign(req, []byte(v.Request.Body), reqsign.Profile32, "required"); err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get("Signature"); got == v.Request.Headers["Signature"] || strings.ContainsAny(got, "-_") || !strings.HasSuffix(got, "=:") {
		t.Errorf("3.2 Signature %q is not padded standard base64", got)
	}
	if got := req.Header.Get("Content-Digest"); got != v.Request.Headers["Content-Digest"] {
		t.Errorf("3.2 Content-Digest %q, want %q", got, v.Request.Headers["Content-Digest"])
	}
	v = loadVector(t, filepath.Join(vectorDir, "profile-3.2", "negative", "002-multiple-trailing-dots.json"))
	req, _ = http.NewRequest(v.Request.Method, v.Request.URL, strings.NewReader(v.Request.Body))
	if err := s.Sign(req, []byte(v.Request.Body), reqsign.Profile32, "required"); err == nil || req.Header.Get("Signature") != "" {
		t.Errorf("signed a request to %s (err %v)", v.Request.URL, err)
	}
}
