package webhookauth

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A minimal RFC 8941 structured-field parser: dictionaries whose members are
// items or inner lists, with parameters. Byte sequences are kept as raw
// text, because the AdCP profile widens their alphabet to base64url and the
// decoding rule depends on the header.

var errSFV = errors.New("structured field syntax")

type sfKind uint8

const (
	sfInteger sfKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBool
)

type sfItem struct {
	kind   sfKind
	num    int64  // sfInteger; sfBool (0/1)
	text   string // sfString (unescaped), sfToken, sfBytes (raw, between colons), sfDecimal (raw)
	params []sfParam
}

type sfParam struct {
	key string
	val sfItem
}

type sfMember struct {
	key    string
	isList bool
	item   sfItem   // when !isList (its params live in item.params)
	list   []sfItem // when isList
	params []sfParam
}

type sfParser struct {
	s   string
	pos int
}

func (p *sfParser) errf(format string, a ...any) error {
	return fmt.Errorf("%w at offset %d: %s", errSFV, p.pos, fmt.Sprintf(format, a...))
}

func (p *sfParser) skipSP() {
	for p.pos < len(p.s) && p.s[p.pos] == ' ' {
		p.pos++
	}
}

func (p *sfParser) skipOWS() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

// parseDictionary parses an RFC 8941 dictionary. Duplicate keys are an
// error (RFC 8941 would keep the last; the AdCP profile rejects them).
func parseDictionary(s string) ([]sfMember, error) {
	p := &sfParser{s: s}
	p.skipSP()
	var out []sfMember
	if p.pos == len(p.s) {
		return nil, p.errf("empty dictionary")
	}
	for {
		key, err := p.parseKey()
		if err != nil {
			return nil, err
		}
		for _, m := range out {
			if m.key == key {
				return nil, p.errf("duplicate member %q", key)
			}
		}
		m := sfMember{key: key}
		if p.pos < len(p.s) && p.s[p.pos] == '=' {
			p.pos++
			if p.pos < len(p.s) && p.s[p.pos] == '(' {
				m.isList = true
				if m.list, err = p.parseInnerList(); err != nil {
					return nil, err
				}
				if m.params, err = p.parseParams(); err != nil {
					return nil, err
				}
			} else {
				if m.item, err = p.parseItem(); err != nil {
					return nil, err
				}
				m.params = m.item.params
			}
		} else {
			m.item = sfItem{kind: sfBool, num: 1}
			if m.params, err = p.parseParams(); err != nil {
				return nil, err
			}
			m.item.params = m.params
		}
		out = append(out, m)
		p.skipOWS()
		if p.pos == len(p.s) {
			return out, nil
		}
		if p.s[p.pos] != ',' {
			return nil, p.errf("expected ','")
		}
		p.pos++
		p.skipOWS()
		if p.pos == len(p.s) {
			return nil, p.errf("trailing ','")
		}
	}
}

func (p *sfParser) parseKey() (string, error) {
	start := p.pos
	if p.pos >= len(p.s) {
		return "", p.errf("expected key")
	}
	if c := p.s[p.pos]; (c < 'a' || c > 'z') && c != '*' {
		return "", p.errf("bad key start %q", c)
	}
	p.pos++
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*' {
			p.pos++
			continue
		}
		break
	}
	return p.s[start:p.pos], nil
}

func (p *sfParser) parseInnerList() ([]sfItem, error) {
	p.pos++ // '('
	var items []sfItem
	for {
		p.skipSP()
		if p.pos >= len(p.s) {
			return nil, p.errf("unterminated inner list")
		}
		if p.s[p.pos] == ')' {
			p.pos++
			return items, nil
		}
		it, err := p.parseItem()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		if p.pos >= len(p.s) {
			return nil, p.errf("unterminated inner list")
		}
		if c := p.s[p.pos]; c != ' ' && c != ')' {
			return nil, p.errf("expected ' ' or ')'")
		}
	}
}

func (p *sfParser) parseItem() (sfItem, error) {
	it, err := p.parseBareItem()
	if err != nil {
		return sfItem{}, err
	}
	it.params, err = p.parseParams()
	return it, err
}

func (p *sfParser) parseParams() ([]sfParam, error) {
	var out []sfParam
	for p.pos < len(p.s) && p.s[p.pos] == ';' {
		p.pos++
		p.skipSP()
		key, err := p.parseKey()
		if err != nil {
			return nil, err
		}
		val := sfItem{kind: sfBool, num: 1}
		if p.pos < len(p.s) && p.s[p.pos] == '=' {
			p.pos++
			if val, err = p.parseBareItem(); err != nil {
				return nil, err
			}
		}
		for _, q := range out {
			if q.key == key {
				return nil, p.errf("duplicate parameter %q", key)
			}
		}
		out = append(out, sfParam{key: key, val: val})
	}
	return out, nil
}

func (p *sfParser) parseBareItem() (sfItem, error) {
	if p.pos >= len(p.s) {
		return sfItem{}, p.errf("expected item")
	}
	c := p.s[p.pos]
	switch {
	case c == '-' || c >= '0' && c <= '9':
		return p.parseNumber()
	case c == '"':
		return p.parseString()
	case c == ':':
		return p.parseBytes()
	case c == '?':
		if p.pos+1 < len(p.s) && (p.s[p.pos+1] == '0' || p.s[p.pos+1] == '1') {
			v := int64(p.s[p.pos+1] - '0')
			p.pos += 2
			return sfItem{kind: sfBool, num: v}, nil
		}
		return sfItem{}, p.errf("bad boolean")
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '*':
		start := p.pos
		p.pos++
		for p.pos < len(p.s) && isTokenChar(p.s[p.pos]) {
			p.pos++
		}
		return sfItem{kind: sfToken, text: p.s[start:p.pos]}, nil
	}
	return sfItem{}, p.errf("unexpected %q", c)
}

func isTokenChar(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0
}

func (p *sfParser) parseNumber() (sfItem, error) {
	start := p.pos
	if p.s[p.pos] == '-' {
		p.pos++
	}
	digits, dot := 0, false
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c >= '0' && c <= '9' {
			digits++
			p.pos++
			continue
		}
		if c == '.' && !dot {
			dot = true
			p.pos++
			continue
		}
		break
	}
	raw := p.s[start:p.pos]
	if digits == 0 || strings.HasSuffix(raw, ".") {
		return sfItem{}, p.errf("bad number")
	}
	if dot {
		return sfItem{kind: sfDecimal, text: raw}, nil
	}
	if digits > 15 {
		return sfItem{}, p.errf("integer too long")
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return sfItem{}, p.errf("bad integer")
	}
	return sfItem{kind: sfInteger, num: n}, nil
}

func (p *sfParser) parseString() (sfItem, error) {
	p.pos++ // '"'
	var b strings.Builder
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		p.pos++
		switch {
		case c == '\\':
			if p.pos >= len(p.s) {
				return sfItem{}, p.errf("unterminated string")
			}
			e := p.s[p.pos]
			if e != '"' && e != '\\' {
				return sfItem{}, p.errf("bad escape")
			}
			b.WriteByte(e)
			p.pos++
		case c == '"':
			return sfItem{kind: sfString, text: b.String()}, nil
		case c < 0x20 || c > 0x7e:
			return sfItem{}, p.errf("bad string character")
		default:
			b.WriteByte(c)
		}
	}
	return sfItem{}, p.errf("unterminated string")
}

func (p *sfParser) parseBytes() (sfItem, error) {
	p.pos++ // ':'
	start := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c == ':' {
			raw := p.s[start:p.pos]
			p.pos++
			return sfItem{kind: sfBytes, text: raw}, nil
		}
		if !isByteSeqChar(c) {
			return sfItem{}, p.errf("bad byte sequence character")
		}
		p.pos++
	}
	return sfItem{}, p.errf("unterminated byte sequence")
}

// appendSFString appends s as an RFC 8941 sf-string. s must be printable
// ASCII (checked by the caller).
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// isByteSeqChar reports whether c may appear inside an sf-binary: the base64
// alphabet, its padding, and (leniently) the base64url characters.
func isByteSeqChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '+' || c == '/' || c == '=' || c == '-' || c == '_'
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
