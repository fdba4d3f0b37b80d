// Package jsonnum bounds the numbers in JSON that comes from outside (a submit body, a seller's
// or governance agent's answer, a webhook) before any library reads them. A JSON number has no
// size limit, and libraries turn it into big numbers: github.com/santhosh-tekuri/jsonschema
// v6.0.3 panics on a nil *big.Rat for 1e10000000 (math/big refuses the exponent and the
// validator does not check), and math/big itself spends seconds and megabytes on 1e9999999.
// Every number buyflow reads from outside passes Check first.
package jsonnum

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The bounds. A number over any of them is refused; none is near what AdCP carries (budgets,
// prices, counts, ratios).
const (
	// maxLiteral is the longest number literal, in bytes.
	maxLiteral = 64
	// maxDigits is the most significant digits (integer and fraction digits together).
	maxDigits = 40
	// maxExponent bounds the literal's exponent: |e| ≤ MaxExponent.
	maxExponent = 100
	// maxMagnitude bounds the value: |x| < 10^MaxMagnitude.
	maxMagnitude = 30
)

// Decimal is a number literal taken apart: its value is (-1 if Negative) × Digits × 10^Exp,
// where Digits are the literal's integer and fraction digits run together.
type Decimal struct {
	Digits   string
	Exp      int
	Negative bool
}

// Split takes a JSON number literal apart. It reads only the JSON number grammar (RFC 8259
// §6) and refuses a literal over the bounds, so what it returns is safe for any arithmetic.
func Split(s string) (Decimal, error) {
	if len(s) > maxLiteral {
		return Decimal{}, fmt.Errorf("the number has %d characters; at most %d are accepted", len(s), maxLiteral)
	}
	var d Decimal
	rest := s
	if strings.HasPrefix(rest, "-") {
		d.Negative, rest = true, rest[1:]
	}
	intPart, rest := leadingDigits(rest)
	if intPart == "" || (len(intPart) > 1 && intPart[0] == '0') {
		return Decimal{}, errNotNumber
	}
	frac := ""
	if strings.HasPrefix(rest, ".") {
		if frac, rest = leadingDigits(rest[1:]); frac == "" {
			return Decimal{}, errNotNumber
		}
	}
	exp := 0
	if rest != "" {
		if rest[0] != 'e' && rest[0] != 'E' {
			return Decimal{}, errNotNumber
		}
		rest = rest[1:]
		neg := strings.HasPrefix(rest, "-")
		if neg || strings.HasPrefix(rest, "+") {
			rest = rest[1:]
		}
		e, tail := leadingDigits(rest)
		if e == "" || tail != "" {
			return Decimal{}, errNotNumber
		}
		e = strings.TrimLeft(e, "0")
		if len(e) > 3 {
			return Decimal{}, fmt.Errorf("the exponent is beyond ±%d", maxExponent)
		}
		exp, _ = strconv.Atoi("0" + e)
		if neg {
			exp = -exp
		}
		if exp > maxExponent || exp < -maxExponent {
			return Decimal{}, fmt.Errorf("the exponent %d is beyond ±%d", exp, maxExponent)
		}
	}
	d.Digits, d.Exp = intPart+frac, exp-len(frac)
	significant := strings.TrimLeft(d.Digits, "0")
	if len(significant) > maxDigits {
		return Decimal{}, fmt.Errorf("the number has %d significant digits; at most %d are accepted", len(significant), maxDigits)
	}
	if significant != "" && len(significant)+d.Exp > maxMagnitude {
		return Decimal{}, fmt.Errorf("the number is 10^%d or more in size; at most 10^%d is accepted", maxMagnitude, maxMagnitude)
	}
	return d, nil
}

var errNotNumber = errors.New("not a JSON number")

func leadingDigits(s string) (digits, rest string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i], s[i:]
}

// Error is a number in a JSON document that is over the bounds.
type Error struct {
	// Pointer is the JSON pointer (RFC 6901) of the number in the document.
	Pointer string
	// Literal is the number as written, cut to MaxLiteral bytes.
	Literal string
	Err     error
}

func (e *Error) Error() string {
	return fmt.Sprintf("number at %s: %v", pointerOrRoot(e.Pointer), e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func pointerOrRoot(p string) string {
	if p == "" {
		return "the document root"
	}
	return p
}

// Check reads the JSON document doc and returns an *Error for the first number over the
// bounds. A document that is not one JSON value returns the decoder's error (callers report it as they
// report malformed JSON); Check does not otherwise judge the document.
func Check(doc []byte) error { return walk(doc, false) }

// CheckUnique is Check that also refuses an object holding a key twice, with a
// *DuplicateKeyError: readers disagree on which of the two counts (encoding/json keeps the
// last, others the first or refuse), so a budget written twice could be one amount to buyflow
// and another to a seller or governance agent.
func CheckUnique(doc []byte) error { return walk(doc, true) }

// DuplicateKeyError is an object in a JSON document with a key twice.
type DuplicateKeyError struct {
	// Pointer is the JSON pointer of the second occurrence.
	Pointer string
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("the key at %s appears twice in its object", e.Pointer)
}

func walk(doc []byte, unique bool) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var stack []container // the open objects and arrays, outermost first
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) > 0 {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		if err != nil {
			return err
		}
		var top *container
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if key, ok := tok.(string); ok && top != nil && top.object && top.wantKey {
			top.key, top.wantKey = key, false
			if unique {
				if top.seen[key] {
					return &DuplicateKeyError{Pointer: pointer(stack)}
				}
				if top.seen == nil {
					top.seen = map[string]bool{}
				}
				top.seen[key] = true
			}
			continue
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return end(dec)
			}
			stack[len(stack)-1].valueRead()
			continue
		}
		// tok starts a value: a scalar, or an object or array.
		if top != nil && !top.object {
			top.index++
		}
		if n, ok := tok.(json.Number); ok {
			if _, err := Split(n.String()); err != nil {
				lit := n.String()
				if len(lit) > maxLiteral {
					lit = lit[:maxLiteral]
				}
				return &Error{Pointer: pointer(stack), Literal: lit, Err: err}
			}
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, container{object: d == '{', wantKey: d == '{', index: -1})
			continue
		}
		if top == nil {
			return end(dec)
		}
		top.valueRead()
	}
}

// errTrailingData is a document with more after its one value.
var errTrailingData = errors.New("jsonnum: data after the JSON value")

// end checks that nothing but space follows the document's value.
func end(dec *json.Decoder) error {
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return err
		}
		return errTrailingData
	}
	return nil
}

// container is an open object or array and where Check is in it.
type container struct {
	object  bool
	wantKey bool            // object: the next string is a key
	key     string          // object: the key of the value being read
	index   int             // array: the index of the value being read
	seen    map[string]bool // object, with CheckUnique: the keys read so far
}

func (c *container) valueRead() { c.wantKey = c.object }

// pointer is the JSON pointer (RFC 6901) of the value being read.
func pointer(stack []container) string {
	var b strings.Builder
	for _, c := range stack {
		b.WriteByte('/')
		if c.object {
			b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(c.key))
		} else {
			b.WriteString(strconv.Itoa(c.index))
		}
	}
	return b.String()
}
