package approvalcore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors returned by Verify and ParseKeys. Match them with errors.Is.
var (
	// ErrMalformed means a link parameter is missing, repeated or badly formed.
	ErrMalformed = errors.New("approval link: malformed")
	// ErrUnknownKey means the link names a key id that is not configured.
	ErrUnknownKey = errors.New("approval link: unknown key id")
	// ErrBadSignature means the signature does not match the link's fields.
	ErrBadSignature = errors.New("approval link: bad signature")
	// ErrExpired means an authentic link is past its expiry.
	ErrExpired = errors.New("approval link: expired")
)

// Query parameter names of a signed link; the confirm form posts them back
// as hidden fields with the same names.
const (
	ParamApprover  = "approver"
	ParamExpires   = "exp"
	ParamKeyID     = "kid"
	ParamSignature = "sig"
)

// SignedParams lists the parameters a signed link carries, in link order.
var SignedParams = []string{ParamApprover, ParamExpires, ParamKeyID, ParamSignature}

// Limits on link fields and keys.
const (
	// minKeyBytes is the shortest signing key ParseKeys accepts (256 bits).
	minKeyBytes = 32
	// MaxApprovalIDLen is the longest approval id a link may carry.
	MaxApprovalIDLen = 128
	// maxApproverLen is the longest approver id a link may carry, in bytes.
	maxApproverLen = 256
	// maxKeyIDLen is the longest key id, in bytes.
	maxKeyIDLen = 64
	// MaxLinkLifetime bounds how far ahead Sign accepts an expiry, so a
	// leaked link cannot stay valid for long.
	MaxLinkLifetime = 30 * 24 * time.Hour
)

const (
	canonicalVersion = "buyflow-approval-link/v1"
	macLen           = sha256.Size
)

// KeySet is the set of link-signing keys: the current key signs, every key
// verifies. Build one with ParseKeys or NewKeySet. Its String and LogValue
// forms name the key ids only, never the key bytes.
type KeySet struct {
	current string
	keys    map[string][]byte
}

// NewKeySet builds a KeySet from raw keys. current must be one of the key
// ids; every key must be at least MinKeyBytes long. The key bytes are copied.
func NewKeySet(current string, keys map[string][]byte) (KeySet, error) {
	if len(keys) == 0 {
		return KeySet{}, errors.New("approval keys: no keys")
	}
	ks := KeySet{current: current, keys: make(map[string][]byte, len(keys))}
	for kid, k := range keys {
		if !validKeyID(kid) {
			return KeySet{}, fmt.Errorf("approval keys: key id %q: must be 1-%d characters of A-Z a-z 0-9 . _ -", kid, maxKeyIDLen)
		}
		if len(k) < minKeyBytes {
			return KeySet{}, fmt.Errorf("approval keys: key %q is %d bytes, need at least %d", kid, len(k), minKeyBytes)
		}
		ks.keys[kid] = slices.Clone(k)
	}
	if current == "" {
		return KeySet{}, errors.New("approval keys: no current key id")
	}
	if _, ok := ks.keys[current]; !ok {
		return KeySet{}, fmt.Errorf("approval keys: current key id %q is not among the keys", current)
	}
	return ks, nil
}

// ParseKeys parses the link-signing secret, a JSON object such as
//
//	{"current":"k2","keys":{"k1":"<base64>","k2":"<base64>"}}
//
// Keys are standard or URL-safe base64, padded or not, and decode to at
// least MinKeyBytes bytes. Errors name the offending key id, never its value.
func ParseKeys(secret []byte) (KeySet, error) {
	var raw struct {
		Current string            `json:"current"`
		Keys    map[string]string `json:"keys"`
	}
	dec := json.NewDecoder(strings.NewReader(string(secret)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		// The decoder's message can quote the input; keep it out of the error.
		return KeySet{}, errors.New(`approval keys: secret is not a JSON object of the form {"current":"<kid>","keys":{"<kid>":"<base64>"}}`)
	}
	if dec.More() {
		return KeySet{}, errors.New("approval keys: trailing data after the JSON object")
	}
	keys := make(map[string][]byte, len(raw.Keys))
	for kid, b64 := range raw.Keys {
		k, err := decodeKey(b64)
		if err != nil {
			return KeySet{}, fmt.Errorf("approval keys: key %q is not valid base64", kid)
		}
		keys[kid] = k
	}
	return NewKeySet(raw.Current, keys)
}

func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.Strict().DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("invalid base64")
}

// Current returns the id of the key that signs new links.
func (ks KeySet) Current() string { return ks.current }

// KeyIDs returns the ids of all keys that verify links, sorted.
func (ks KeySet) KeyIDs() []string {
	ids := make([]string, 0, len(ks.keys))
	for kid := range ks.keys {
		ids = append(ids, kid)
	}
	slices.Sort(ids)
	return ids
}

// String names the key ids only.
func (ks KeySet) String() string {
	return fmt.Sprintf("approvalcore.KeySet{current: %s, keys: %s}", ks.current, strings.Join(ks.KeyIDs(), ","))
}

// GoString names the key ids only, so %#v does not print key bytes.
func (ks KeySet) GoString() string { return ks.String() }

// LogValue names the key ids only.
func (ks KeySet) LogValue() slog.Value {
	return slog.GroupValue(slog.String("current", ks.current), slog.Any("keyIds", ks.KeyIDs()))
}

// Claims is what a verified link asserts.
type Claims struct {
	ApprovalID string
	Approver   string
	Expires    time.Time
	KeyID      string
}

// Signer signs and verifies approval links. It is safe for concurrent use.
type Signer struct {
	keys KeySet
	now  func() time.Time
}

// NewSigner returns a Signer over keys, reading the time from now.
func NewSigner(keys KeySet, now func() time.Time) (*Signer, error) {
	if len(keys.keys) == 0 {
		return nil, errors.New("approval signer: no keys")
	}
	if now == nil {
		return nil, errors.New("approval signer: no clock")
	}
	return &Signer{keys: keys, now: now}, nil
}

// Sign returns the signed link for approver to review approvalID, valid until
// expires (truncated to the second). baseURL is the public root of the API,
// e.g. "https://api.example.com" or "https://x.execute-api.eu-west-1.amazonaws.com/prod";
// the link is {baseURL}/v1/approvals/{approvalID}?approver=…&exp=…&kid=…&sig=….
//
// approvalID must be 1-128 characters of A-Z a-z 0-9 _ -; approver must be
// non-empty valid UTF-8 of at most 256 bytes with no control characters or
// spaces; expires must be in the future (after truncation to the second)
// and at most MaxLinkLifetime away.
func (s *Signer) Sign(baseURL, approvalID, approver string, expires time.Time) (string, error) {
	base, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" ||
		base.RawQuery != "" || base.Fragment != "" || base.User != nil {
		return "", errors.New("approval link: base url must be an absolute http(s) url without query, fragment or user info")
	}
	params, err := s.SignParams(approvalID, approver, expires)
	if err != nil {
		return "", err
	}
	u := *base
	u.Path = strings.TrimRight(base.Path, "/") + "/v1/approvals/" + approvalID
	u.RawPath = ""
	u.RawQuery = params.Encode() // sorted: approver, exp, kid, sig
	return u.String(), nil
}

// SignParams returns the signed query parameters (approver, exp, kid, sig)
// for approver and approvalID, as Sign puts them in the link. It is exported
// so tests elsewhere can build signed requests, like stripe-go's
// GenerateTestSignedPayload.
func (s *Signer) SignParams(approvalID, approver string, expires time.Time) (url.Values, error) {
	if !validApprovalID(approvalID) {
		return nil, fmt.Errorf("approval link: approval id must be 1-%d characters of A-Z a-z 0-9 _ -", MaxApprovalIDLen)
	}
	if !validApprover(approver) {
		return nil, fmt.Errorf("approval link: approver id must be 1-%d bytes of printable UTF-8 without spaces", maxApproverLen)
	}
	exp := expires.Unix() // links carry whole seconds
	now := s.now()
	if exp <= 0 || !time.Unix(exp, 0).After(now) {
		return nil, errors.New("approval link: expiry must be in the future")
	}
	if time.Unix(exp, 0).Sub(now) > MaxLinkLifetime {
		return nil, fmt.Errorf("approval link: expiry is more than %s away", MaxLinkLifetime)
	}
	kid := s.keys.current
	mac := computeMAC(s.keys.keys[kid], approvalID, approver, exp, kid)
	return url.Values{
		ParamApprover:  {approver},
		ParamExpires:   {strconv.FormatInt(exp, 10)},
		ParamKeyID:     {kid},
		ParamSignature: {base64.RawURLEncoding.EncodeToString(mac)},
	}, nil
}

// Verify checks the signed parameters of a link for approvalID (taken from
// the request path). params may hold other parameters too (a posted form
// carries decision and comment); they are ignored.
//
// Errors: ErrMalformed, ErrUnknownKey, ErrBadSignature, ErrExpired. For
// ErrExpired the returned Claims are filled in (the link is authentic), so the
// caller can say when it expired; for every other error they are zero.
func (s *Signer) Verify(approvalID string, params url.Values) (Claims, error) {
	if !validApprovalID(approvalID) {
		return Claims{}, fmt.Errorf("%w: approval id", ErrMalformed)
	}
	var vals [4]string
	for i, name := range SignedParams {
		v := params[name]
		if len(v) != 1 || v[0] == "" {
			return Claims{}, fmt.Errorf("%w: %s must appear exactly once", ErrMalformed, name)
		}
		vals[i] = v[0]
	}
	approver, expRaw, kid, sigRaw := vals[0], vals[1], vals[2], vals[3]
	if !validApprover(approver) {
		return Claims{}, fmt.Errorf("%w: approver", ErrMalformed)
	}
	exp, err := strconv.ParseInt(expRaw, 10, 64)
	if err != nil || exp <= 0 || strconv.FormatInt(exp, 10) != expRaw {
		return Claims{}, fmt.Errorf("%w: exp", ErrMalformed)
	}
	if !validKeyID(kid) {
		return Claims{}, fmt.Errorf("%w: kid", ErrMalformed)
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(sigRaw)
	if err != nil || len(sig) != macLen {
		return Claims{}, fmt.Errorf("%w: sig", ErrMalformed)
	}
	key, ok := s.keys.keys[kid]
	if !ok {
		return Claims{}, ErrUnknownKey
	}
	if !hmac.Equal(sig, computeMAC(key, approvalID, approver, exp, kid)) {
		return Claims{}, ErrBadSignature
	}
	c := Claims{ApprovalID: approvalID, Approver: approver, Expires: time.Unix(exp, 0).UTC(), KeyID: kid}
	if !s.now().Before(c.Expires) {
		return c, ErrExpired
	}
	return c, nil
}

// canonical is the string a link's MAC covers: a version tag, then each
// field as an 8-byte big-endian length followed by its bytes.
func canonical(approvalID, approver string, exp int64, kid string) []byte {
	fields := []string{canonicalVersion, approvalID, approver, strconv.FormatInt(exp, 10), kid}
	var b []byte
	for _, f := range fields {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

func computeMAC(key []byte, approvalID, approver string, exp int64, kid string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(canonical(approvalID, approver, exp, kid))
	return m.Sum(nil)
}

func validApprovalID(s string) bool {
	if s == "" || len(s) > MaxApprovalIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isIDByte(c) {
			return false
		}
	}
	return true
}

func validKeyID(s string) bool {
	if s == "" || len(s) > maxKeyIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isIDByte(c) && c != '.' {
			return false
		}
	}
	return true
}

// isIDByte reports whether c is an ASCII letter, digit, '_' or '-'.
func isIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func validApprover(s string) bool {
	if s == "" || len(s) > maxApproverLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
