package webhookauth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RFC9421Signer signs outgoing webhook requests per the AdCP webhook-signing profile.
//
// It is meant for test fixtures and simulated sellers. Signatures cover the
// five profile components, use label sig1, a 300 s window and
// tag adcp/webhook-signing/v1; binary values are base64url without padding.
type RFC9421Signer struct {
	KeyID string
	Key   crypto.Signer    // ed25519.PrivateKey or *ecdsa.PrivateKey (P-256)
	Now   func() time.Time // nil means time.Now
	Nonce func() string    // nil means 16 random bytes, base64url
}

// Sign sets Content-Digest, Signature-Input and Signature on req for body
// (and Content-Type, if empty, to application/json). req.URL must be
// absolute or req.Host set; the signed @target-uri is its canonical form.
// A body with duplicate JSON object keys is refused before signing, as the
// profile requires of signers.
func (s *RFC9421Signer) Sign(req *http.Request, body []byte) error {
	if err := checkDuplicateKeys(body); err != nil {
		return fmt.Errorf("sign webhook: %w", err)
	}
	return Sign(req, body, Spec{KeyID: s.KeyID, Key: s.Key, Tag: tag, Components: coveredComponents,
		Binary: base64.RawURLEncoding, Now: s.Now, Nonce: s.Nonce})
}

// Spec is one RFC 9421 signature under an AdCP profile: the webhook-signing
// profile (RFC9421Signer) or the request-signing profile (internal/reqsign),
// which share the canonicalisation, the signature base and the parameters
// and differ in tag, covered components and the encoding of binary values.
type Spec struct {
	KeyID string
	Key   crypto.Signer // ed25519.PrivateKey, *ecdsa.PrivateKey (P-256) or a remote signer of either
	Tag   string
	// Components are the covered components in order; "content-digest"
	// among them makes Sign set Content-Digest over the body.
	Components []string
	// Binary encodes the signature and the digest: base64url without
	// padding (webhooks, request signing 3.1) or padded standard base64
	// (request signing 3.2, RFC 8941 sf-binary).
	Binary *base64.Encoding
	Now    func() time.Time // nil means time.Now
	Nonce  func() string    // nil means 16 random bytes, base64url
}

// Sign signs req for body under spec: Content-Digest (when covered),
// Signature-Input (label sig1, created, expires = created + MaxWindow,
// nonce, keyid, alg, tag, in that order) and Signature, replacing any
// previous values. Content-Type defaults to application/json. The body is
// signed as given: it must be the exact bytes sent.
func Sign(req *http.Request, body []byte, spec Spec) error {
	if spec.KeyID == "" || !isPrintableASCII(spec.KeyID) {
		return fmt.Errorf("%w: signer key id must be non-empty printable ascii", ErrConfig)
	}
	if spec.Tag == "" || spec.Binary == nil || len(spec.Components) == 0 {
		return fmt.Errorf("%w: signature spec needs a tag, components and an encoding", ErrConfig)
	}
	alg, err := algFor(spec.Key)
	if err != nil {
		return err
	}
	target, authority, err := CanonicalTargetURI(requestURL(req))
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	now := time.Now
	if spec.Now != nil {
		now = spec.Now
	}
	nonce := ""
	if spec.Nonce != nil {
		nonce = spec.Nonce()
	} else {
		var n [16]byte
		if _, err := rand.Read(n[:]); err != nil {
			return fmt.Errorf("sign: nonce: %w", err)
		}
		nonce = base64.RawURLEncoding.EncodeToString(n[:])
	}
	if !isPrintableASCII(nonce) {
		return fmt.Errorf("%w: nonce must be printable ascii", ErrConfig)
	}
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if slices.Contains(spec.Components, "content-digest") {
		sum := sha256.Sum256(body)
		req.Header.Set("Content-Digest", "sha-256=:"+spec.Binary.EncodeToString(sum[:])+":")
	}

	created := now().Unix()
	si := SignatureInput{Label: "sig1", Components: spec.Components}
	si.params = []sfParam{
		{"created", sfItem{kind: sfInteger, num: created}},
		{"expires", sfItem{kind: sfInteger, num: created + int64(MaxWindow/time.Second)}},
		{"nonce", sfItem{kind: sfString, text: nonce}},
		{"keyid", sfItem{kind: sfString, text: spec.KeyID}},
		{"alg", sfItem{kind: sfString, text: alg}},
		{"tag", sfItem{kind: sfString, text: spec.Tag}},
	}
	base, err := signatureBase(&si, req.Method, target, authority, req.Header)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	sig, err := signBase(spec.Key, alg, base)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	req.Header.Set("Signature-Input", "sig1="+si.signatureParams())
	req.Header.Set("Signature", "sig1=:"+spec.Binary.EncodeToString(sig)+":")
	return nil
}

// SignatureBase returns the RFC 9421 signature base of req under the one
// Signature-Input member named label, as a verifier rebuilds it (canonical
// @target-uri and @authority, re-serialised @signature-params). It lets
// signers of other profiles check themselves against published vectors.
func SignatureBase(req *http.Request, label string) ([]byte, error) {
	inputs, err := ParseSignatureInput(strings.Join(req.Header.Values("Signature-Input"), ", "))
	if err != nil {
		return nil, err
	}
	target, authority, err := CanonicalTargetURI(requestURL(req))
	if err != nil {
		return nil, err
	}
	for i := range inputs {
		if inputs[i].Label == label {
			return signatureBase(&inputs[i], req.Method, target, authority, canonicalHeader(req.Header))
		}
	}
	return nil, fmt.Errorf("%w: no signature-input member %q", ErrMalformedHeader, label)
}

// requestURL reconstructs the absolute URL of an outgoing or incoming request.
// The host is kept as written: url.URL.String would percent-encode a
// Unicode host, which the canonicalisation must see as its U-label.
func requestURL(req *http.Request) string {
	host := req.URL.Host
	if host == "" {
		host = req.Host
	}
	scheme := req.URL.Scheme
	if scheme == "" {
		scheme = "http"
		if req.TLS != nil {
			scheme = "https"
		}
	}
	out := scheme + "://" + host + req.URL.EscapedPath()
	if req.URL.RawQuery != "" || req.URL.ForceQuery {
		out += "?" + req.URL.RawQuery
	}
	return out
}

func algFor(key crypto.Signer) (string, error) {
	if key == nil {
		return "", fmt.Errorf("%w: nil signer key", ErrConfig)
	}
	switch pub := key.Public().(type) {
	case ed25519.PublicKey:
		return AlgEd25519, nil
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() {
			return "", fmt.Errorf("%w: ecdsa key is not p-256", ErrConfig)
		}
		return AlgES256, nil
	}
	return "", fmt.Errorf("%w: unsupported key type %T", ErrConfig, key.Public())
}

func signBase(key crypto.Signer, alg string, base []byte) ([]byte, error) {
	if alg == AlgEd25519 {
		return key.Sign(rand.Reader, base, crypto.Hash(0))
	}
	digest := sha256.Sum256(base)
	der, err := key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		return nil, err
	}
	var rs struct{ R, S *big.Int }
	if rest, err := asn1.Unmarshal(der, &rs); err != nil || len(rest) != 0 {
		return nil, errors.New("ecdsa signature is not asn.1")
	}
	out := make([]byte, 64)
	rs.R.FillBytes(out[:32])
	rs.S.FillBytes(out[32:])
	return out, nil
}

// HMACSigner signs outgoing webhooks with the legacy AdCP HMAC-SHA256
// scheme: X-ADCP-Signature: sha256=<hex of HMAC(secret, "{ts}.{body}")>.
type HMACSigner struct {
	Secret []byte
	Now    func() time.Time
}

// Sign sets X-ADCP-Signature and X-ADCP-Timestamp on req for body. A
// secret shorter than 32 bytes or a body with duplicate JSON object keys is
// refused.
func (s *HMACSigner) Sign(req *http.Request, body []byte) error {
	if err := CheckSecret(s.Secret); err != nil {
		return err
	}
	if err := checkDuplicateKeys(body); err != nil {
		return fmt.Errorf("sign webhook: %w", err)
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	ts := strconv.FormatInt(now().Unix(), 10)
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	req.Header.Set("X-ADCP-Timestamp", ts)
	req.Header.Set("X-ADCP-Signature", "sha256="+hex.EncodeToString(hmacSHA256(s.Secret, ts, body)))
	return nil
}

func hmacSHA256(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// MinSecretBytes is the shortest HMAC or bearer webhook secret accepted.
const MinSecretBytes = 32

// CheckSecret enforces the legacy secret rules: at least MinSecretBytes and not a single
// repeated byte. The error names the length, never the secret.
func CheckSecret(secret []byte) error {
	if len(secret) < MinSecretBytes {
		return fmt.Errorf("%w: secret has %d bytes, at least %d are needed", ErrConfig, len(secret), MinSecretBytes)
	}
	same := true
	for _, c := range secret[1:] {
		if c != secret[0] {
			same = false
			break
		}
	}
	if same {
		return fmt.Errorf("%w: secret is one repeated byte", ErrConfig)
	}
	return nil
}

// StoredSecrets returns the secrets a stored secret value holds, the current one first: the
// value itself, or {"current": "…", "previous": "…"} during a rotation.
func StoredSecrets(raw []byte) [][]byte {
	raw = bytes.TrimSpace(raw)
	var rot struct {
		Current  string `json:"current"`
		Previous string `json:"previous"`
	}
	if len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &rot) == nil && rot.Current != "" {
		out := [][]byte{[]byte(rot.Current)}
		if rot.Previous != "" {
			out = append(out, []byte(rot.Previous))
		}
		return out
	}
	return [][]byte{raw}
}
