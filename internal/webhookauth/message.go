package webhookauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Profile constants of the AdCP webhook-signing profile (RFC 9421).
const (
	// tag is the tag parameter every AdCP webhook signature carries.
	tag = "adcp/webhook-signing/v1"
	// AlgEd25519 is the RFC 9421 alg name for Ed25519 (JWK alg EdDSA).
	AlgEd25519 = "ed25519"
	// AlgES256 is the RFC 9421 alg name for ECDSA P-256 SHA-256 with r‖s
	// signatures (JWK alg ES256).
	AlgES256 = "ecdsa-p256-sha256"
	// MaxWindow is the longest allowed expires − created.
	MaxWindow = 300 * time.Second
	// ClockSkew is the tolerance applied to created and expires.
	ClockSkew = 60 * time.Second
	// minNonceBytes is the minimum decoded nonce length.
	minNonceBytes = 16
	// hmacTolerance is the legacy HMAC timestamp window (±).
	hmacTolerance = 300 * time.Second
	// MaxBodyBytes is the largest webhook body accepted.
	MaxBodyBytes = 1 << 20
)

// coveredComponents are the components every webhook signature must cover,
// in the order the profile's signers emit them.
var coveredComponents = []string{"@method", "@target-uri", "@authority", "content-type", "content-digest"}

// SignatureInput is one parsed member of a Signature-Input header.
type SignatureInput struct {
	Label      string
	Components []string
	Created    int64
	Expires    int64
	Nonce      string
	KeyID      string
	Alg        string
	Tag        string

	hasCreated, hasExpires, hasNonce, hasKeyID, hasAlg, hasTag bool

	params []sfParam // in header order, for @signature-params
}

// ParseSignatureInput parses a Signature-Input header into its members.
// Component identifiers must be plain sf-strings (no component
// parameters); known signature parameters must have their RFC 9421 types.
// Errors wrap ErrMalformedHeader.
func ParseSignatureInput(header string) ([]SignatureInput, error) {
	dict, err := parseDictionary(header)
	if err != nil {
		return nil, fmt.Errorf("%w: signature-input: %w", ErrMalformedHeader, err)
	}
	out := make([]SignatureInput, 0, len(dict))
	for _, m := range dict {
		if !m.isList {
			return nil, fmt.Errorf("%w: signature-input member %q is not an inner list", ErrMalformedHeader, m.key)
		}
		si := SignatureInput{Label: m.key, params: m.params}
		for _, it := range m.list {
			if it.kind != sfString || len(it.params) != 0 {
				return nil, fmt.Errorf("%w: unsupported component identifier", ErrMalformedHeader)
			}
			for _, c := range si.Components {
				if c == it.text {
					return nil, fmt.Errorf("%w: duplicate component %q", ErrMalformedHeader, c)
				}
			}
			si.Components = append(si.Components, it.text)
		}
		for _, p := range m.params {
			want := sfString
			if p.key == "created" || p.key == "expires" {
				want = sfInteger
			}
			switch p.key {
			case "created", "expires", "nonce", "keyid", "alg", "tag":
				if p.val.kind != want {
					return nil, fmt.Errorf("%w: parameter %s has the wrong type", ErrMalformedHeader, p.key)
				}
			}
			switch p.key {
			case "created":
				si.Created, si.hasCreated = p.val.num, true
			case "expires":
				si.Expires, si.hasExpires = p.val.num, true
			case "nonce":
				si.Nonce, si.hasNonce = p.val.text, true
			case "keyid":
				si.KeyID, si.hasKeyID = p.val.text, true
			case "alg":
				si.Alg, si.hasAlg = p.val.text, true
			case "tag":
				si.Tag, si.hasTag = p.val.text, true
			}
		}
		out = append(out, si)
	}
	return out, nil
}

// signatureParams serialises the member value used as @signature-params.
func (si *SignatureInput) signatureParams() string {
	b := make([]byte, 0, 256)
	b = append(b, '(')
	for i, c := range si.Components {
		if i > 0 {
			b = append(b, ' ')
		}
		b = appendSFString(b, c)
	}
	b = append(b, ')')
	for _, p := range si.params {
		b = append(b, ';')
		b = append(b, p.key...)
		switch p.val.kind {
		case sfBool:
			if p.val.num == 0 {
				b = append(b, "=?0"...)
			}
		case sfInteger:
			b = append(b, '=')
			b = strconv.AppendInt(b, p.val.num, 10)
		case sfString:
			b = append(b, '=')
			b = appendSFString(b, p.val.text)
		case sfBytes:
			b = append(b, '=', ':')
			b = append(b, p.val.text...)
			b = append(b, ':')
		default: // token, decimal: kept as written
			b = append(b, '=')
			b = append(b, p.val.text...)
		}
	}
	return string(b)
}

// signatureBase builds the RFC 9421 signature base for si over the request.
func signatureBase(si *SignatureInput, method, targetURI, authority string, h http.Header) ([]byte, error) {
	b := make([]byte, 0, 512)
	for _, c := range si.Components {
		var v string
		switch c {
		case "@method":
			v = method
		case "@target-uri":
			v = targetURI
		case "@authority":
			v = authority
		case "@scheme":
			v, _, _ = strings.Cut(targetURI, ":")
		case "@path", "@query":
			rest := targetURI[strings.Index(targetURI, "://")+3:]
			pq := rest[strings.IndexByte(rest, '/'):]
			path, query, hasQ := strings.Cut(pq, "?")
			v = path
			if c == "@query" {
				v = "?"
				if hasQ {
					v += query
				}
			}
		default:
			if strings.HasPrefix(c, "@") || c == "" || strings.ToLower(c) != c {
				return nil, fmt.Errorf("%w: unsupported component %q", ErrMalformedHeader, c)
			}
			vals := h.Values(c)
			if len(vals) == 0 {
				if c == "content-digest" {
					return nil, fmt.Errorf("%w: content-digest header absent", ErrBadDigest)
				}
				return nil, fmt.Errorf("%w: covered header %q absent", ErrMalformedHeader, c)
			}
			if len(vals) > 1 && (c == "content-type" || c == "content-digest") {
				return nil, fmt.Errorf("%w: multiple %s headers", ErrMalformedHeader, c)
			}
			// h.Values aliases the header map: never write into it.
			if len(vals) == 1 {
				v = strings.TrimSpace(vals[0])
			} else {
				parts := make([]string, len(vals))
				for i, s := range vals {
					parts[i] = strings.TrimSpace(s)
				}
				v = strings.Join(parts, ", ")
			}
		}
		if !isPrintableASCII(v) {
			return nil, fmt.Errorf("%w: component %q has non-ascii value", ErrMalformedHeader, c)
		}
		b = append(b, '"')
		b = append(b, c...)
		b = append(b, '"', ':', ' ')
		b = append(b, v...)
		b = append(b, '\n')
	}
	b = append(b, `"@signature-params": `...)
	b = append(b, si.signatureParams()...)
	return b, nil
}

var errBase64 = errors.New("bad base64")

// decodeBinary decodes an sf-binary payload under the AdCP profile:
// base64url without padding, or legacy standard base64 (padded or not).
// A token mixing the two alphabets is rejected. strict also rejects
// non-canonical trailing bits.
func decodeBinary(s string, strict bool) ([]byte, error) {
	url := strings.ContainsAny(s, "-_")
	std := strings.ContainsAny(s, "+/")
	if url && std {
		return nil, fmt.Errorf("%w: mixed base64 alphabets", errBase64)
	}
	padded := strings.HasSuffix(s, "=")
	if padded && url {
		return nil, fmt.Errorf("%w: padded base64url", errBase64)
	}
	var enc *base64.Encoding
	switch {
	case padded:
		enc = base64.StdEncoding
	case std:
		enc = base64.RawStdEncoding
	default:
		enc = base64.RawURLEncoding
	}
	if strict {
		enc = enc.Strict()
	}
	out, err := enc.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBase64, err)
	}
	return out, nil
}

// checkContentDigest checks the sha-256 member of a Content-Digest header
// against the raw body, comparing decoded bytes in constant time.
func checkContentDigest(h http.Header, body []byte) error {
	vals := h.Values("Content-Digest")
	if len(vals) == 0 {
		return fmt.Errorf("%w: content-digest header absent", ErrBadDigest)
	}
	if len(vals) > 1 {
		return fmt.Errorf("%w: multiple content-digest headers", ErrMalformedHeader)
	}
	dict, err := parseDictionary(strings.TrimSpace(vals[0]))
	if err != nil {
		return fmt.Errorf("%w: content-digest: %w", ErrBadDigest, err)
	}
	for _, m := range dict {
		if m.key != "sha-256" {
			continue
		}
		if m.isList || m.item.kind != sfBytes {
			return fmt.Errorf("%w: sha-256 member is not binary", ErrBadDigest)
		}
		got, err := decodeBinary(m.item.text, false)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadDigest, err)
		}
		want := sha256.Sum256(body)
		if subtle.ConstantTimeCompare(got, want[:]) != 1 {
			return fmt.Errorf("%w: sha-256 does not match body", ErrBadDigest)
		}
		return nil
	}
	return fmt.Errorf("%w: no sha-256 member", ErrBadDigest)
}
