package webhookauth

import (
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
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
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
	if s.KeyID == "" || !isPrintableASCII(s.KeyID) {
		return fmt.Errorf("%w: signer key id must be non-empty printable ascii", ErrConfig)
	}
	alg, err := algFor(s.Key)
	if err != nil {
		return err
	}
	if err := checkDuplicateKeys(body); err != nil {
		return fmt.Errorf("sign webhook: %w", err)
	}
	target, authority, err := CanonicalTargetURI(requestURL(req))
	if err != nil {
		return fmt.Errorf("sign webhook: %w", err)
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	nonce := ""
	if s.Nonce != nil {
		nonce = s.Nonce()
	} else {
		var n [16]byte
		if _, err := rand.Read(n[:]); err != nil {
			return fmt.Errorf("sign webhook: nonce: %w", err)
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
	req.Header.Set("Content-Digest", contentDigest(body))

	created := now().Unix()
	si := SignatureInput{Label: "sig1", Components: coveredComponents}
	si.params = []sfParam{
		{"created", sfItem{kind: sfInteger, num: created}},
		{"expires", sfItem{kind: sfInteger, num: created + int64(MaxWindow/time.Second)}},
		{"nonce", sfItem{kind: sfString, text: nonce}},
		{"keyid", sfItem{kind: sfString, text: s.KeyID}},
		{"alg", sfItem{kind: sfString, text: alg}},
		{"tag", sfItem{kind: sfString, text: tag}},
	}
	base, err := signatureBase(&si, req.Method, target, authority, req.Header)
	if err != nil {
		return fmt.Errorf("sign webhook: %w", err)
	}
	sig, err := signBase(s.Key, alg, base)
	if err != nil {
		return fmt.Errorf("sign webhook: %w", err)
	}
	req.Header.Set("Signature-Input", "sig1="+si.signatureParams())
	req.Header.Set("Signature", "sig1=:"+base64.RawURLEncoding.EncodeToString(sig)+":")
	return nil
}

// requestURL reconstructs the absolute URL of an outgoing or incoming request.
func requestURL(req *http.Request) string {
	u := *req.URL
	if u.Host == "" {
		u.Host = req.Host
	}
	if u.Scheme == "" {
		u.Scheme = "http"
		if req.TLS != nil {
			u.Scheme = "https"
		}
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
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
	if err := checkSecret(s.Secret); err != nil {
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

// checkSecret enforces the legacy secret rules: at least 32 bytes and not
// a single repeated byte.
func checkSecret(secret []byte) error {
	if len(secret) < 32 {
		return fmt.Errorf("%w: secret shorter than 32 bytes", ErrConfig)
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
