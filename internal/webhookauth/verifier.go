package webhookauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Mode is how a seller authenticates its webhooks. The zero value is the
// AdCP default, RFC 9421.
type Mode int

const (
	// ModeRFC9421 verifies RFC 9421 HTTP Message Signatures under the AdCP
	// webhook-signing profile. It is selected when the buyer registered no
	// push_notification_config.authentication.
	ModeRFC9421 Mode = iota
	// ModeHMAC verifies the legacy X-ADCP-Signature HMAC-SHA256 scheme.
	ModeHMAC
	// ModeBearer verifies the legacy Authorization: Bearer scheme.
	ModeBearer
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case ModeRFC9421:
		return "rfc9421"
	case ModeHMAC:
		return "hmac-sha256"
	case ModeBearer:
		return "bearer"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// Config configures the Verifier of one seller.
type Config struct {
	// Mode selects the authentication scheme; there is never a fallback
	// to another one.
	Mode Mode

	// JWKSURL is the seller's jwks_uri (RFC 9421 mode). Exactly one of
	// JWKSURL and JWKS is set.
	JWKSURL string
	// JWKS is an inline JWK Set document (RFC 9421 mode).
	JWKS []byte
	// HTTPClient fetches JWKSURL; nil means a client with a 10 s timeout
	// that does not follow redirects. Callers should give it the SSRF
	// protections the spec asks for (no private or metadata addresses).
	HTTPClient *http.Client
	// CacheTTL is how long fetched keys are used; 0 means DefaultCacheTTL.
	// It is clamped to [1 min, 30 min].
	CacheTTL time.Duration
	// RefetchCooldown is the minimum gap between JWKS fetches triggered by
	// an unknown kid; 0 means DefaultRefetchCooldown.
	RefetchCooldown time.Duration
	// Replay records (keyid, nonce); nil means a private MemoryReplayStore,
	// which only protects a single process.
	Replay ReplayStore
	// Revocations, if set, is consulted for every key id.
	Revocations revocationChecker

	// Secrets are the HMAC secrets (ModeHMAC) or bearer credentials
	// (ModeBearer): the current one first, then the previous one during a
	// rotation. Each must be at least 32 bytes.
	Secrets [][]byte

	// AllowHTTP accepts http:// target URIs on any host. Only for local
	// stacks; by default only https and loopback http are accepted.
	AllowHTTP bool

	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Request is an inbound webhook as the Verifier sees it. From an API
// Gateway HTTP API v2 event: Method = RequestContext.HTTP.Method,
// URL = "https://" + RequestContext.DomainName + RawPath (+ "?" +
// RawQueryString when non-empty), Header from Headers (lowercase keys are
// fine), Body the raw body (base64-decoded when IsBase64Encoded).
type Request struct {
	Method string
	URL    string // absolute URL the seller posted to
	Header http.Header
	Body   []byte
}

// Result describes an authenticated webhook.
type Result struct {
	Mode Mode
	// KeyID is the RFC 9421 keyid; empty in the legacy modes, where the
	// sender identity is the seller this Verifier is configured for.
	KeyID string
	// Created and Expires are the RFC 9421 signature window; for HMAC
	// Created is the signed timestamp.
	Created, Expires time.Time
}

// Verifier authenticates webhooks from one seller. It is safe for
// concurrent use.
type Verifier struct {
	mode        Mode
	keys        *keySet
	replay      ReplayStore
	revocations revocationChecker
	secrets     [][]byte
	allowHTTP   bool
	now         func() time.Time
}

// New returns a Verifier for cfg.
func New(cfg Config) (*Verifier, error) {
	v := &Verifier{mode: cfg.Mode, now: cfg.Now, replay: cfg.Replay, revocations: cfg.Revocations, allowHTTP: cfg.AllowHTTP}
	if v.now == nil {
		v.now = time.Now
	}
	switch cfg.Mode {
	case ModeRFC9421:
		if (cfg.JWKSURL == "") == (cfg.JWKS == nil) {
			return nil, fmt.Errorf("%w: set exactly one of JWKSURL and JWKS", ErrConfig)
		}
		if len(cfg.Secrets) > 0 {
			return nil, fmt.Errorf("%w: secrets given for an rfc9421 seller", ErrConfig)
		}
		ks := &keySet{url: cfg.JWKSURL, client: cfg.HTTPClient, ttl: cfg.CacheTTL, cooldown: cfg.RefetchCooldown, now: v.now}
		if cfg.JWKS != nil {
			keys, err := parseJWKS(cfg.JWKS)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrConfig, err)
			}
			ks.keys, ks.static = keys, true
		}
		if ks.client == nil {
			ks.client = &http.Client{
				Timeout: 10 * time.Second,
				CheckRedirect: func(*http.Request, []*http.Request) error {
					return http.ErrUseLastResponse // a redirect is a failed fetch
				},
			}
		}
		switch {
		case ks.ttl == 0:
			ks.ttl = DefaultCacheTTL
		case ks.ttl < time.Minute:
			ks.ttl = time.Minute
		case ks.ttl > 30*time.Minute:
			ks.ttl = 30 * time.Minute
		}
		if ks.cooldown == 0 {
			ks.cooldown = DefaultRefetchCooldown
		}
		v.keys = ks
		if v.replay == nil {
			v.replay = NewMemoryReplayStore(0, v.now)
		}
	case ModeHMAC, ModeBearer:
		if len(cfg.Secrets) == 0 {
			return nil, fmt.Errorf("%w: %s mode needs a secret", ErrConfig, cfg.Mode)
		}
		if cfg.JWKSURL != "" || cfg.JWKS != nil {
			return nil, fmt.Errorf("%w: keys given for a %s seller", ErrConfig, cfg.Mode)
		}
		for _, s := range cfg.Secrets {
			if err := CheckSecret(s); err != nil {
				return nil, err
			}
			v.secrets = append(v.secrets, append([]byte(nil), s...))
		}
	default:
		return nil, fmt.Errorf("%w: unknown mode %d", ErrConfig, int(cfg.Mode))
	}
	return v, nil
}

// VerifyHTTP verifies an *http.Request whose body was already read into
// body. The target URI is rebuilt from r.URL, r.Host and r.TLS; behind a
// proxy or API Gateway use Verify with the public URL instead.
func (v *Verifier) VerifyHTTP(ctx context.Context, r *http.Request, body []byte) (Result, error) {
	return v.Verify(ctx, Request{Method: r.Method, URL: requestURL(r), Header: r.Header, Body: body})
}

// Verify authenticates req under the seller's configured mode and then
// checks that a non-empty body is JSON without duplicate object keys; an
// RFC 9421 request's (keyid, nonce) pair is recorded last. Errors wrap the
// package's sentinels; see Code and WWWAuthenticate.
func (v *Verifier) Verify(ctx context.Context, req Request) (Result, error) {
	p, err := v.VerifyDeferred(ctx, req)
	if err != nil {
		return Result{}, err
	}
	if err := p.Commit(ctx); err != nil {
		return Result{}, err
	}
	return p.Result, nil
}

// Verified is a request that passed every check of Verify but the last:
// its RFC 9421 (keyid, nonce) pair is not recorded yet (VerifyDeferred).
type Verified struct {
	Result
	replay ReplayStore
	nonce  string
	until  time.Time
}

// Commit records the request's (keyid, nonce) pair until the signature's
// expiry, the replay check Verify makes last: nil when the pair is new, an
// error matching ErrReplayed when it was recorded before, and a store
// failure (whose Code is "") otherwise. A legacy-mode request carries no
// nonce: nil. The request is authentic only once Commit returned nil.
func (p Verified) Commit(ctx context.Context) error {
	if p.replay == nil {
		return nil
	}
	seen, err := p.replay.Seen(ctx, p.KeyID, p.nonce, p.until)
	if err != nil {
		return fmt.Errorf("webhookauth: replay store: %w", err)
	}
	if seen {
		return fmt.Errorf("%w: key %q", ErrReplayed, p.KeyID)
	}
	return nil
}

// VerifyDeferred is Verify without its last step: the request's RFC 9421
// (keyid, nonce) pair is checked and recorded only by the returned
// Verified's Commit. A receiver can then record the pair at the same time
// as its own first write, as long as it acts on the request only after
// Commit returned nil, and undoes that write otherwise.
func (v *Verifier) VerifyDeferred(ctx context.Context, req Request) (Verified, error) {
	if len(req.Body) > MaxBodyBytes {
		return Verified{}, fmt.Errorf("%w: %d bytes", ErrBodyTooLarge, len(req.Body))
	}
	h := canonicalHeader(req.Header)
	has9421 := len(h.Values("Signature")) > 0 || len(h.Values("Signature-Input")) > 0
	hasHMAC := len(h.Values("X-ADCP-Signature")) > 0 || len(h.Values("X-ADCP-Timestamp")) > 0
	var (
		res Verified
		err error
	)
	switch v.mode {
	case ModeRFC9421:
		switch {
		case hasHMAC:
			return Verified{}, fmt.Errorf("%w: legacy hmac headers sent to an rfc9421 endpoint", ErrModeMismatch)
		case !has9421:
			if h.Get("Authorization") != "" {
				return Verified{}, fmt.Errorf("%w: bearer credentials sent to an rfc9421 endpoint", ErrModeMismatch)
			}
			return Verified{}, fmt.Errorf("%w: no Signature or Signature-Input header", ErrMissingSignature)
		}
		res, err = v.verify9421(ctx, req.Method, req.URL, h, req.Body)
	case ModeHMAC:
		if has9421 {
			return Verified{}, fmt.Errorf("%w: rfc9421 signature sent to an hmac endpoint", ErrModeMismatch)
		}
		res.Result, err = v.verifyHMAC(h, req.Body)
	case ModeBearer:
		if has9421 || hasHMAC {
			return Verified{}, fmt.Errorf("%w: signature headers sent to a bearer endpoint", ErrModeMismatch)
		}
		res.Result, err = v.verifyBearer(h)
	}
	if err != nil {
		return Verified{}, err
	}
	if err := checkDuplicateKeys(req.Body); err != nil {
		return Verified{}, err
	}
	return res, nil
}

// canonicalHeader returns h, or a copy with canonical keys when a caller
// filled the map directly with non-canonical keys (API Gateway v2 events
// carry lowercase header names), so lookups cannot silently miss a header.
func canonicalHeader(h http.Header) http.Header {
	if h == nil {
		return http.Header{}
	}
	for k := range h {
		if http.CanonicalHeaderKey(k) != k {
			c := make(http.Header, len(h))
			for k, vals := range h {
				ck := http.CanonicalHeaderKey(k)
				c[ck] = append(c[ck], vals...)
			}
			return c
		}
	}
	return h
}

// verify9421 follows the order of the profile's verifier checklist: cheap
// structural checks, key resolution and purpose, revocation and rate
// abuse, then cryptography and digest. The replay commit, the last step,
// is the returned Verified's Commit, so that a request failing any earlier
// step never consumes a replay-cache entry.
func (v *Verifier) verify9421(ctx context.Context, method, rawURL string, h http.Header, body []byte) (Verified, error) {
	// Step 1: paired, parseable headers.
	inHdr, sigHdr := h.Values("Signature-Input"), h.Values("Signature")
	if len(inHdr) == 0 || len(sigHdr) == 0 {
		return Verified{}, fmt.Errorf("%w: Signature and Signature-Input must both be present", ErrMalformedHeader)
	}
	inputs, err := ParseSignatureInput(strings.Join(inHdr, ", "))
	if err != nil {
		return Verified{}, err
	}
	si := selectInput(inputs)
	sigs, err := parseDictionary(strings.Join(sigHdr, ", "))
	if err != nil {
		return Verified{}, fmt.Errorf("%w: signature: %w", ErrMalformedHeader, err)
	}
	var sigRaw string
	found := false
	for _, m := range sigs {
		if m.key == si.Label {
			if m.isList || m.item.kind != sfBytes {
				return Verified{}, fmt.Errorf("%w: signature %q is not a byte sequence", ErrMalformedHeader, si.Label)
			}
			sigRaw, found = m.item.text, true
		}
	}
	if !found {
		return Verified{}, fmt.Errorf("%w: no signature for label %q", ErrMalformedHeader, si.Label)
	}
	sig, err := decodeBinary(sigRaw, true)
	if err != nil {
		return Verified{}, fmt.Errorf("%w: signature: %w", ErrMalformedHeader, err)
	}

	// Step 2: required parameters.
	var missing []string
	for _, p := range []struct {
		name string
		ok   bool
	}{{"created", si.hasCreated}, {"expires", si.hasExpires}, {"nonce", si.hasNonce}, {"keyid", si.hasKeyID}, {"alg", si.hasAlg}, {"tag", si.hasTag}} {
		if !p.ok {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		return Verified{}, fmt.Errorf("%w: missing %s", errParamsIncomplete, strings.Join(missing, ", "))
	}
	if n, err := decodeBinary(si.Nonce, false); err != nil || len(n) < minNonceBytes {
		return Verified{}, fmt.Errorf("%w: nonce must be base64url of at least %d bytes", ErrMalformedHeader, minNonceBytes)
	}
	// Step 3: tag. Step 4: alg.
	if si.Tag != tag {
		return Verified{}, fmt.Errorf("%w: %q", errBadTag, si.Tag)
	}
	if si.Alg != AlgEd25519 && si.Alg != AlgES256 {
		return Verified{}, fmt.Errorf("%w: %q", errAlgNotAllowed, si.Alg)
	}
	// Step 5: window.
	now := v.now().Unix()
	skew, maxWin := int64(ClockSkew/time.Second), int64(MaxWindow/time.Second)
	switch {
	case si.Expires <= si.Created:
		return Verified{}, fmt.Errorf("%w: expires not after created", ErrExpired)
	case si.Expires-si.Created > maxWin:
		return Verified{}, fmt.Errorf("%w: window longer than %d s", ErrExpired, maxWin)
	case si.Created > now+skew:
		return Verified{}, fmt.Errorf("%w: created in the future", ErrExpired)
	case si.Expires < now-skew:
		return Verified{}, fmt.Errorf("%w: expired", ErrExpired)
	}
	// Step 6: covered components.
	for _, c := range coveredComponents {
		found := false
		for _, d := range si.Components {
			if d == c {
				found = true
				break
			}
		}
		if !found {
			return Verified{}, fmt.Errorf("%w: %q not covered", errComponentsIncomplete, c)
		}
	}
	// Step 6a: target URI.
	target, authority, err := CanonicalTargetURI(rawURL)
	if err != nil {
		return Verified{}, err
	}
	if !strings.HasPrefix(target, "https://") && !isLoopback(authority) && !v.allowHTTP {
		return Verified{}, fmt.Errorf("%w: webhook url must be https", ErrTargetURIMalformed)
	}
	// Step 7: key. Step 8: purpose.
	key, err := v.keys.lookup(ctx, si.KeyID)
	if err != nil {
		return Verified{}, err
	}
	if key.purposeErr != nil {
		return Verified{}, key.purposeErr
	}
	if key.alg != si.Alg {
		return Verified{}, fmt.Errorf("%w: key %q is %s, signature says %s", ErrKeyPurpose, si.KeyID, key.alg, si.Alg)
	}
	// Step 9: revocation. Step 9a: rate abuse.
	if v.revocations != nil {
		revoked, err := v.revocations.Revoked(ctx, si.KeyID)
		if err != nil {
			return Verified{}, err
		}
		if revoked {
			return Verified{}, fmt.Errorf("%w: %q", ErrKeyRevoked, si.KeyID)
		}
	}
	if rc, ok := v.replay.(replayCapacity); ok {
		full, err := rc.AtCapacity(ctx, si.KeyID, v.now())
		if err != nil {
			return Verified{}, fmt.Errorf("webhookauth: replay capacity: %w", err)
		}
		if full {
			return Verified{}, fmt.Errorf("%w: key %q", ErrRateAbuse, si.KeyID)
		}
	}
	// Step 10: signature.
	base, err := signatureBase(si, method, target, authority, h)
	if err != nil {
		return Verified{}, err
	}
	if !key.verify(si.Alg, base, sig) {
		return Verified{}, ErrBadSignature
	}
	// Step 11: content digest against the raw body.
	if err := checkContentDigest(h, body); err != nil {
		return Verified{}, err
	}
	// Step 12/13: replay, committed last (Verified.Commit).
	until := time.Unix(si.Expires+skew, 0)
	if floor := v.now().Add(MaxWindow + ClockSkew); until.Before(floor) {
		until = floor
	}
	return Verified{Result: Result{Mode: ModeRFC9421, KeyID: si.KeyID, Created: time.Unix(si.Created, 0), Expires: time.Unix(si.Expires, 0)},
		replay: v.replay, nonce: si.Nonce, until: until}, nil
}

// selectInput picks the member to verify: the first carrying the webhook
// tag, else sig1, else the first (whose tag check then fails).
func selectInput(inputs []SignatureInput) *SignatureInput {
	for i := range inputs {
		if inputs[i].Tag == tag {
			return &inputs[i]
		}
	}
	for i := range inputs {
		if inputs[i].Label == "sig1" {
			return &inputs[i]
		}
	}
	return &inputs[0]
}

func isLoopback(authority string) bool {
	host := authority
	if strings.HasPrefix(host, "[") {
		host = host[:strings.IndexByte(host, ']')+1]
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	return host == "localhost" || host == "[::1]" || strings.HasPrefix(host, "127.")
}

// verifyHMAC checks, in the spec's order: headers present, numeric
// timestamp, window, then the MAC against every configured secret.
func (v *Verifier) verifyHMAC(h http.Header, body []byte) (Result, error) {
	sigHdr, tsHdr := h.Get("X-ADCP-Signature"), h.Get("X-ADCP-Timestamp")
	if sigHdr == "" || tsHdr == "" {
		if h.Get("Authorization") != "" && sigHdr == "" && tsHdr == "" {
			return Result{}, fmt.Errorf("%w: bearer credentials sent to an hmac endpoint", ErrModeMismatch)
		}
		return Result{}, fmt.Errorf("%w: X-ADCP-Signature and X-ADCP-Timestamp are required", ErrMissingSignature)
	}
	if len(h.Values("X-ADCP-Signature")) > 1 || len(h.Values("X-ADCP-Timestamp")) > 1 {
		return Result{}, fmt.Errorf("%w: repeated legacy signature header", ErrMalformedHeader)
	}
	if len(tsHdr) > 18 || strings.Trim(tsHdr, "0123456789") != "" {
		return Result{}, fmt.Errorf("%w: non-numeric timestamp", ErrMalformedHeader)
	}
	ts, _ := strconv.ParseInt(tsHdr, 10, 64)
	d := v.now().Unix() - ts
	if d > int64(hmacTolerance/time.Second) || -d > int64(hmacTolerance/time.Second) {
		return Result{}, fmt.Errorf("%w: timestamp outside ±%s", ErrExpired, hmacTolerance)
	}
	hexSig, ok := strings.CutPrefix(sigHdr, "sha256=")
	if !ok || len(hexSig) != 2*sha256.Size {
		return Result{}, fmt.Errorf("%w: want sha256=<64 hex>", ErrMalformedHeader)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return Result{}, fmt.Errorf("%w: signature is not hex", ErrMalformedHeader)
	}
	match := 0
	for _, s := range v.secrets {
		if hmac.Equal(got, hmacSHA256(s, tsHdr, body)) {
			match = 1
		}
	}
	if match == 0 {
		return Result{}, ErrBadSignature
	}
	return Result{Mode: ModeHMAC, Created: time.Unix(ts, 0)}, nil
}

// verifyBearer compares the bearer credential with every configured one in
// constant time (over SHA-256 digests, so lengths do not leak either).
func (v *Verifier) verifyBearer(h http.Header) (Result, error) {
	auth := h.Get("Authorization")
	if auth == "" {
		return Result{}, fmt.Errorf("%w: no Authorization header", ErrMissingSignature)
	}
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return Result{}, fmt.Errorf("%w: Authorization is not a bearer credential", ErrMalformedHeader)
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	match := 0
	for _, s := range v.secrets {
		want := sha256.Sum256(s)
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	if match == 0 {
		return Result{}, ErrBadSignature
	}
	return Result{Mode: ModeBearer}, nil
}
