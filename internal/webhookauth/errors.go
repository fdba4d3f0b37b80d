package webhookauth

import (
	"errors"
	"strconv"
)

// Sentinel errors returned (wrapped) by the Verifier. Test with errors.Is;
// map to the AdCP wire code with Code.
var (
	// ErrMissingSignature: the request carries none of the headers of the
	// seller's configured mode.
	ErrMissingSignature = errors.New("webhookauth: missing signature")
	// ErrMalformedHeader: Signature / Signature-Input (or the legacy
	// X-ADCP-Signature / X-ADCP-Timestamp) cannot be parsed, are not paired,
	// or use a disallowed encoding.
	ErrMalformedHeader = errors.New("webhookauth: malformed signature header")
	// errParamsIncomplete: a required signature parameter (created, expires,
	// nonce, keyid, alg, tag) is missing.
	errParamsIncomplete = errors.New("webhookauth: signature parameters incomplete")
	// errBadTag: the tag parameter is not adcp/webhook-signing/v1.
	errBadTag = errors.New("webhookauth: signature tag invalid")
	// errAlgNotAllowed: alg is not ed25519 or ecdsa-p256-sha256.
	errAlgNotAllowed = errors.New("webhookauth: signature alg not allowed")
	// ErrExpired: the signature (or legacy timestamp) is outside its
	// validity window, including a window that is too long or inverted.
	ErrExpired = errors.New("webhookauth: signature window invalid")
	// errComponentsIncomplete: a mandatory covered component is missing.
	errComponentsIncomplete = errors.New("webhookauth: covered components incomplete")
	// ErrTargetURIMalformed: the request URL cannot be canonicalised.
	ErrTargetURIMalformed = errors.New("webhookauth: target uri malformed")
	// ErrUnknownKey: no key with the signature's keyid, even after a refetch.
	ErrUnknownKey = errors.New("webhookauth: unknown key")
	// ErrKeyPurpose: the JWK is not usable for webhook verification
	// (adcp_use, use, key_ops, or kty/crv/alg mismatch).
	ErrKeyPurpose = errors.New("webhookauth: key purpose invalid")
	// ErrKeyRevoked: the key id is on the revocation list.
	ErrKeyRevoked = errors.New("webhookauth: key revoked")
	// ErrRevocationStale: the revocation list is older than its grace.
	ErrRevocationStale = errors.New("webhookauth: revocation list stale")
	// ErrRateAbuse: the replay cache for this key id is at its cap.
	ErrRateAbuse = errors.New("webhookauth: per-key replay cap exceeded")
	// ErrReplayed: (keyid, nonce) was already seen in its validity window.
	ErrReplayed = errors.New("webhookauth: signature replayed")
	// ErrBadSignature: the signature, MAC or bearer token does not verify.
	ErrBadSignature = errors.New("webhookauth: signature invalid")
	// ErrBadDigest: Content-Digest is absent, has no sha-256 member, or
	// does not match the raw body.
	ErrBadDigest = errors.New("webhookauth: content digest mismatch")
	// ErrModeMismatch: the request is authenticated with a different mode
	// than the one configured for the seller (for example RFC 9421 headers
	// for a seller registered with HMAC credentials).
	ErrModeMismatch = errors.New("webhookauth: authentication mode mismatch")
	// ErrBodyMalformed: the body is not valid JSON or has duplicate object
	// keys. Reported only after authentication succeeded.
	ErrBodyMalformed = errors.New("webhookauth: body malformed")
	// ErrBodyTooLarge: the body exceeds MaxBodyBytes. Answer 413.
	ErrBodyTooLarge = errors.New("webhookauth: body too large")
	// ErrKeysUnavailable: the seller's JWKS could not be fetched and no
	// cached copy exists. This is not a verdict on the request: answer 5xx
	// so the seller retries. Code returns "" for it.
	ErrKeysUnavailable = errors.New("webhookauth: keys unavailable")
	// ErrConfig: the Verifier or signer configuration is invalid.
	ErrConfig = errors.New("webhookauth: invalid configuration")
)

// codes maps sentinels to the AdCP webhook error codes
// (security.mdx "verifier checklist for webhooks" and the conformance
// vectors' expected_outcome.error_code).
var codes = []struct {
	err  error
	code string
}{
	{ErrModeMismatch, "webhook_mode_mismatch"},
	{ErrMissingSignature, "webhook_signature_header_malformed"},
	{ErrMalformedHeader, "webhook_signature_header_malformed"},
	{errParamsIncomplete, "webhook_signature_params_incomplete"},
	{errBadTag, "webhook_signature_tag_invalid"},
	{errAlgNotAllowed, "webhook_signature_alg_not_allowed"},
	{ErrExpired, "webhook_signature_window_invalid"},
	{errComponentsIncomplete, "webhook_signature_components_incomplete"},
	{ErrTargetURIMalformed, "webhook_target_uri_malformed"},
	{ErrUnknownKey, "webhook_signature_key_unknown"},
	{ErrKeyPurpose, "webhook_signature_key_purpose_invalid"},
	{ErrKeyRevoked, "webhook_signature_key_revoked"},
	{ErrRevocationStale, "webhook_signature_revocation_stale"},
	{ErrRateAbuse, "webhook_signature_rate_abuse"},
	{ErrReplayed, "webhook_signature_replayed"},
	{ErrBadSignature, "webhook_signature_invalid"},
	{ErrBadDigest, "webhook_signature_digest_mismatch"},
	{ErrBodyTooLarge, "webhook_body_malformed"},
	{ErrBodyMalformed, "webhook_body_malformed"},
}

// Code returns the AdCP webhook error code for err (for example
// "webhook_signature_replayed"), or "" when err is nil or is not an
// authentication verdict (ErrKeysUnavailable, replay-store and context
// errors): those deserve a 5xx, not a 401.
func Code(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// WWWAuthenticate returns the value of the WWW-Authenticate header for a
// 401 answer to err: `Signature error="webhook_signature_invalid"`. It
// returns "" when Code(err) is "".
func WWWAuthenticate(err error) string {
	c := Code(err)
	if c == "" {
		return ""
	}
	return "Signature error=" + strconv.Quote(c)
}
