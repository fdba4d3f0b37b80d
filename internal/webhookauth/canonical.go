package webhookauth

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// errTargetURI is wrapped by every canonicalisation failure.
var errTargetURI = errors.New("target uri malformed")

// CanonicalTargetURI returns the RFC 9421 @target-uri and @authority values
// of rawURL under the AdCP canonicalisation rules shared by request and
// webhook signing: lowercase scheme and host, IDN hosts as Punycode
// A-labels, one trailing root dot stripped, userinfo and fragment stripped,
// default ports stripped, dot segments removed (consecutive slashes kept),
// percent-encoding hex uppercased with unreserved octets decoded, and the
// query kept byte for byte. Malformed URLs return an error wrapping
// ErrTargetURIMalformed.
func CanonicalTargetURI(rawURL string) (targetURI, authority string, err error) {
	target, auth, err := canonicalTargetURI(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrTargetURIMalformed, err)
	}
	return target, auth, nil
}

func canonicalTargetURI(raw string) (string, string, error) {
	schemeEnd := strings.Index(raw, "://")
	if schemeEnd <= 0 {
		return "", "", fmt.Errorf("%w: no scheme", errTargetURI)
	}
	scheme := strings.ToLower(raw[:schemeEnd])
	if scheme != "https" && scheme != "http" {
		return "", "", fmt.Errorf("%w: scheme %q", errTargetURI, scheme)
	}
	rest := raw[schemeEnd+3:]
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	authEnd := strings.IndexAny(rest, "/?")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	rawAuth, pathQuery := rest[:authEnd], rest[authEnd:]
	path, query, hasQuery := strings.Cut(pathQuery, "?")

	authority, err := canonicalAuthority(scheme, rawAuth)
	if err != nil {
		return "", "", err
	}
	path, err = normalizePercent(path)
	if err != nil {
		return "", "", err
	}
	path = removeDotSegments(path)
	if path == "" {
		path = "/"
	}
	var b strings.Builder
	b.Grow(len(scheme) + 3 + len(authority) + len(path) + len(query) + 1)
	b.WriteString(scheme)
	b.WriteString("://")
	b.WriteString(authority)
	b.WriteString(path)
	if hasQuery {
		b.WriteByte('?')
		b.WriteString(query)
	}
	return b.String(), authority, nil
}

func canonicalAuthority(scheme, auth string) (string, error) {
	if i := strings.LastIndexByte(auth, '@'); i >= 0 {
		auth = auth[i+1:]
	}
	if auth == "" {
		return "", fmt.Errorf("%w: empty authority", errTargetURI)
	}
	var host, port string
	if strings.HasPrefix(auth, "[") {
		end := strings.IndexByte(auth, ']')
		if end < 0 {
			return "", fmt.Errorf("%w: ipv6 literal missing closing bracket", errTargetURI)
		}
		lit := auth[1:end]
		if strings.ContainsRune(lit, '%') {
			return "", fmt.Errorf("%w: ipv6 zone identifier", errTargetURI)
		}
		addr, err := netip.ParseAddr(lit)
		if err != nil || !addr.Is6() {
			return "", fmt.Errorf("%w: bad ipv6 literal", errTargetURI)
		}
		host = "[" + strings.ToLower(lit) + "]"
		after := auth[end+1:]
		if after != "" {
			if after[0] != ':' {
				return "", fmt.Errorf("%w: junk after ipv6 literal", errTargetURI)
			}
			port = after[1:]
		}
	} else {
		host = auth
		if i := strings.LastIndexByte(auth, ':'); i >= 0 {
			host, port = auth[:i], auth[i+1:]
		}
		if strings.ContainsRune(host, ':') {
			return "", fmt.Errorf("%w: ipv6 literal not bracketed", errTargetURI)
		}
		var err error
		if host, err = canonicalHostname(host); err != nil {
			return "", err
		}
	}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return "", fmt.Errorf("%w: bad port", errTargetURI)
		}
		port = strconv.FormatUint(n, 10)
		if (scheme == "https" && n == 443) || (scheme == "http" && n == 80) {
			port = ""
		}
	}
	if port == "" {
		return host, nil
	}
	return host + ":" + port, nil
}

// canonicalHostname lowercases a registered name, converts non-ASCII labels
// to Punycode A-labels (lowercase mapping only, not full UTS-46) and strips
// one trailing root dot. Empty labels are malformed.
func canonicalHostname(host string) (string, error) {
	if host == "" {
		return "", fmt.Errorf("%w: authority missing host", errTargetURI)
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return "", fmt.Errorf("%w: authority missing host", errTargetURI)
	}
	labels := strings.Split(host, ".")
	for i, l := range labels {
		if l == "" {
			return "", fmt.Errorf("%w: empty dns label", errTargetURI)
		}
		if !utf8.ValidString(l) {
			return "", fmt.Errorf("%w: host is not utf-8", errTargetURI)
		}
		ascii := true
		for j := 0; j < len(l); j++ {
			c := l[j]
			if c >= utf8.RuneSelf {
				ascii = false
				break
			}
			if !isHostByte(c) {
				return "", fmt.Errorf("%w: bad host character", errTargetURI)
			}
		}
		if ascii {
			labels[i] = strings.ToLower(l)
			continue
		}
		for _, r := range l {
			if r < utf8.RuneSelf && !isHostByte(byte(r)) || r >= utf8.RuneSelf && !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r) {
				return "", fmt.Errorf("%w: bad host character", errTargetURI)
			}
		}
		enc, err := punycodeEncode(strings.ToLower(l))
		if err != nil {
			return "", fmt.Errorf("%w: %w", errTargetURI, err)
		}
		labels[i] = "xn--" + enc
	}
	return strings.Join(labels, "."), nil
}

func isHostByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func isUnreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

const upperHex = "0123456789ABCDEF"

// normalizePercent uppercases %xx escapes, decodes escaped unreserved
// octets, and percent-encodes raw bytes that may not appear in a path.
func normalizePercent(p string) (string, error) {
	clean := true
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == '%' || c <= ' ' || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return p, nil
	}
	var b strings.Builder
	b.Grow(len(p) + 8)
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '%':
			if i+2 >= len(p) {
				return "", fmt.Errorf("%w: truncated percent escape", errTargetURI)
			}
			hi, ok1 := unhex(p[i+1])
			lo, ok2 := unhex(p[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("%w: bad percent escape", errTargetURI)
			}
			v := hi<<4 | lo
			if isUnreserved(v) {
				b.WriteByte(v)
			} else {
				b.WriteByte('%')
				b.WriteByte(upperHex[v>>4])
				b.WriteByte(upperHex[v&15])
			}
			i += 2
		case c <= ' ' || c >= 0x7f:
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// removeDotSegments implements RFC 3986 §5.2.4.
func removeDotSegments(in string) string {
	if !strings.Contains(in, ".") {
		return in
	}
	var out []string // output segments, each starting with "/"
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "/..":
			in = "/"
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			start := 0
			if in[0] == '/' {
				start = 1
			}
			end := strings.IndexByte(in[start:], '/')
			if end < 0 {
				end = len(in)
			} else {
				end += start
			}
			out = append(out, in[:end])
			in = in[end:]
		}
	}
	return strings.Join(out, "")
}

// punycodeEncode implements the RFC 3492 encoder for one label.
func punycodeEncode(s string) (string, error) {
	const (
		base        = 36
		tMin        = 1
		tMax        = 26
		skew        = 38
		damp        = 700
		initialBias = 72
		initialN    = 128
	)
	runes := []rune(s)
	var out []byte
	for _, r := range runes {
		if r < 0x80 {
			out = append(out, byte(r))
		}
	}
	basic := len(out)
	h := basic
	if basic > 0 {
		out = append(out, '-')
	}
	digit := func(d int) byte {
		if d < 26 {
			return byte('a' + d)
		}
		return byte('0' + d - 26)
	}
	adapt := func(delta, numPoints int, first bool) int {
		if first {
			delta /= damp
		} else {
			delta /= 2
		}
		delta += delta / numPoints
		k := 0
		for delta > ((base-tMin)*tMax)/2 {
			delta /= base - tMin
			k += base
		}
		return k + (base-tMin+1)*delta/(delta+skew)
	}
	n, delta, bias := initialN, 0, initialBias
	for h < len(runes) {
		m := int(^uint(0) >> 1)
		for _, r := range runes {
			if int(r) >= n && int(r) < m {
				m = int(r)
			}
		}
		if (m-n)*(h+1) < 0 {
			return "", errors.New("punycode overflow")
		}
		delta += (m - n) * (h + 1)
		n = m
		for _, r := range runes {
			if int(r) < n {
				delta++
			}
			if int(r) == n {
				q := delta
				for k := base; ; k += base {
					t := k - bias
					if t < tMin {
						t = tMin
					} else if t > tMax {
						t = tMax
					}
					if q < t {
						break
					}
					out = append(out, digit(t+(q-t)%(base-t)))
					q = (q - t) / (base - t)
				}
				out = append(out, digit(q))
				bias = adapt(delta, h+1, h == basic)
				delta = 0
				h++
			}
		}
		delta++
		n++
	}
	return string(out), nil
}
