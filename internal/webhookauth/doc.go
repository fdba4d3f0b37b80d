// Package webhookauth authenticates inbound AdCP seller webhooks (AdCP 3.1,
// push notifications) and signs test fixtures for simulated sellers.
//
// A Verifier is configured per seller with exactly one Mode:
//
//   - ModeRFC9421 (the default, selected when the buyer registered no
//     push_notification_config.authentication): RFC 9421 HTTP Message
//     Signatures under the AdCP webhook-signing profile.
//   - ModeHMAC: legacy X-ADCP-Signature: sha256=<hex HMAC-SHA256 of
//     "{X-ADCP-Timestamp}.{raw body}">, ±300 s.
//   - ModeBearer: legacy Authorization: Bearer <credential>.
//
// The input is the method, the absolute URL the seller posted to, the
// headers and the raw body bytes (Request, or VerifyHTTP for an
// *http.Request).
//
// # Invariants
//
//   - The mode is a switch, never a fallback: headers of another mode
//     (9421 headers for an HMAC seller, X-ADCP-* for a 9421 seller, …) are
//     refused with ErrModeMismatch (webhook_mode_mismatch).
//   - RFC 9421 checks run in the profile checklist's order: paired and
//     parseable Signature/Signature-Input (a strict decode of the signature:
//     base64url without padding, or legacy standard base64; mixed alphabets
//     are malformed) → required parameters (created, expires, nonce ≥ 16
//     bytes, keyid, alg, tag) → tag "adcp/webhook-signing/v1" → alg ed25519 or
//     ecdsa-p256-sha256 → window (expires > created, expires − created ≤
//     300 s, created ≤ now + 60 s, expires ≥ now − 60 s) → the five covered
//     components → canonical @target-uri (https, loopback http, or any http
//     with Config.AllowHTTP for local stacks) → key by
//     keyid → key purpose (adcp_use webhook-signing or request-signing, use
//     sig if present, key_ops contains verify, kty/crv/alg consistent with
//     the signature's alg) → revocation → per-key replay cap → signature →
//     Content-Digest (sha-256, decoded bytes compared in constant time with
//     SHA-256 of the raw body) → replay commit of (keyid, nonce).
//   - Nothing that fails a check consumes a replay entry: the (keyid, nonce)
//     pair is recorded only after every other check passed, and it is kept
//     until expires + 60 s but at least 360 s. VerifyDeferred leaves that
//     last step to the caller (Verified.Commit), so that a receiver can
//     record the pair while it makes its own first write, acting on the
//     request only once both are in.
//   - The signature base is built from the canonical target URI (lowercase
//     scheme and host, Punycode host, default port and fragment stripped,
//     dot segments removed, %xx uppercased and unreserved octets decoded,
//     query byte for byte) and the re-serialised signature parameters.
//   - Keys come from inline JWKS or from the seller's jwks_uri through the
//     injected http.Client; fetched keys are cached for CacheTTL (1–30 min,
//     default 5), an unknown kid triggers at most one refetch per
//     RefetchCooldown (default 30 s), and a failed refresh keeps serving the
//     cached keys. Without any keys the error is ErrKeysUnavailable, which is
//     not a verdict on the request (Code returns "", answer 5xx).
//   - MACs, digests and bearer credentials are compared in constant time;
//     all configured secrets are tried (current and previous, for rotation)
//     without an early exit. Secrets shorter than 32 bytes or made of one
//     repeated byte are refused at construction.
//   - After authentication, a non-empty body must be JSON without duplicate
//     object keys at any depth (ErrBodyMalformed, webhook_body_malformed);
//     the MAC/signature is over the raw bytes and bodies are never
//     re-serialised. Bodies over MaxBodyBytes (1 MB) are refused first.
//     Receivers should run CheckJSON (a single JSON object, no duplicate
//     keys, ≤ 1 MB) before parsing.
//   - The clock is injected (Config.Now); this package never logs, so it
//     never logs secrets, signatures or bodies.
//
// Errors wrap the exported sentinels; Code maps them to the AdCP codes
// (webhook_signature_*) and WWWAuthenticate builds the
// `Signature error="…"` value of the 401 answer. Signature failures are
// terminal for the sender; ErrKeysUnavailable and store errors are not.
//
// RFC9421Signer, HMACSigner and PublicJWK produce fixtures for tests and
// simulated sellers; like conformant signers they refuse bodies with
// duplicate JSON keys.
package webhookauth
