// Package ecmaregexp compiles the ECMA-262 regular expressions JSON Schema "pattern"s are
// written in (the AdCP schemas among them) for Go's RE2, for the jsonschema validators of the
// buyer (internal/adcp) and of the simulated agents (internal/adcptest): one translation, so
// the two never disagree on what a pattern accepts.
package ecmaregexp

import (
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// lookaheadRegexp supports the ECMAScript lookaheads some AdCP patterns use
// (e.g. "^P(?!$)..." in core/sla-window.json), which Go's RE2 lacks. A
// lookahead right after a leading "^" is checked exactly; one elsewhere is
// dropped, which makes the pattern more permissive, never stricter.
type lookaheadRegexp struct {
	src  string
	main *regexp.Regexp
	neg  []*regexp.Regexp // must not match at the start of the remainder
	pos  []*regexp.Regexp // must match at the start of the remainder
	pre  *regexp.Regexp   // the prefix before the first anchored lookahead
}

func (r *lookaheadRegexp) String() string { return r.src }

func (r *lookaheadRegexp) MatchString(s string) bool {
	if !r.main.MatchString(s) {
		return false
	}
	rest := s
	if r.pre != nil {
		loc := r.pre.FindStringIndex(s)
		if loc == nil {
			return false
		}
		rest = s[loc[1]:]
	}
	for _, n := range r.neg {
		if n.MatchString(rest) {
			return false
		}
	}
	for _, p := range r.pos {
		if !p.MatchString(rest) {
			return false
		}
	}
	return true
}

// Compile is a jsonschema regexp engine (Compiler.UseRegexpEngine). A pattern RE2 takes as it
// is compiles as it is. Otherwise ECMA-262's \uXXXX escapes (which RE2 spells \x{XXXX}) are
// translated and lookaheads are handled as lookaheadRegexp says; anything else RE2 refuses is
// an error, so a schema whose pattern cannot be honoured fails to compile rather than pass
// everything.
func Compile(src string) (jsonschema.Regexp, error) {
	if re, err := regexp.Compile(src); err == nil {
		return re, nil
	}
	src = translateUnicodeEscapes(src)
	if re, err := regexp.Compile(src); err == nil {
		return &translated{src: src, Regexp: re}, nil
	}
	r := &lookaheadRegexp{src: src}
	var b strings.Builder
	anchoredPrefix := ""
	for i := 0; i < len(src); {
		if src[i] == '\\' && i+1 < len(src) {
			b.WriteString(src[i : i+2])
			i += 2
			continue
		}
		if strings.HasPrefix(src[i:], "(?!") || strings.HasPrefix(src[i:], "(?=") {
			depth, j := 0, i
			for ; j < len(src); j++ {
				if src[j] == '\\' {
					j++
					continue
				}
				if src[j] == '(' {
					depth++
				} else if src[j] == ')' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			inner := src[i+3 : j]
			// Exact only when everything before is a plain literal prefix after ^.
			prefix := b.String()
			if strings.HasPrefix(prefix, "^") && regexp.QuoteMeta(prefix[1:]) == prefix[1:] {
				anchoredPrefix = prefix
				re, err := regexp.Compile("^(?:" + inner + ")")
				if err != nil {
					return nil, err
				}
				if src[i+2] == '!' {
					r.neg = append(r.neg, re)
				} else {
					r.pos = append(r.pos, re)
				}
			}
			i = j + 1
			continue
		}
		b.WriteByte(src[i])
		i++
	}
	main, err := regexp.Compile(b.String())
	if err != nil {
		return nil, err
	}
	r.main = main
	if anchoredPrefix != "" {
		r.pre = regexp.MustCompile(anchoredPrefix)
	}
	return r, nil
}

// translated is a pattern RE2 took once its escapes were translated; String gives RE2's form.
type translated struct {
	src string
	*regexp.Regexp
}

func (t *translated) String() string { return t.src }

// translateUnicodeEscapes rewrites ECMA-262's \uXXXX (four hex digits) as RE2's \x{XXXX},
// inside and outside character classes; an escaped backslash (\\u) is left alone.
func translateUnicodeEscapes(src string) string {
	var b strings.Builder
	for i := 0; i < len(src); i++ {
		if src[i] != '\\' || i+1 >= len(src) {
			b.WriteByte(src[i])
			continue
		}
		if src[i+1] == 'u' && i+6 <= len(src) && isHex(src[i+2:i+6]) {
			b.WriteString(`\x{` + src[i+2:i+6] + `}`)
			i += 5
			continue
		}
		b.WriteString(src[i : i+2]) // any other escape, kept whole so \\u stays literal
		i++
	}
	return b.String()
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}
