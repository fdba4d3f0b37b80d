package webhookauth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxJSONDepth bounds nesting so a hostile body cannot exhaust the stack of
// the token walk.
const maxJSONDepth = 512

// CheckJSON reports whether body is a webhook body the receiver may parse:
// at most MaxBodyBytes, a single valid JSON object, and no duplicate object
// keys at any depth (Go's encoding/json would silently keep the last one).
// Errors wrap ErrBodyTooLarge or ErrBodyMalformed.
func CheckJSON(body []byte) error {
	if len(body) > MaxBodyBytes {
		return fmt.Errorf("%w: %d bytes", ErrBodyTooLarge, len(body))
	}
	first := bytes.TrimLeft(body, " \t\r\n")
	if len(first) == 0 || first[0] != '{' {
		return fmt.Errorf("%w: not a json object", ErrBodyMalformed)
	}
	return walkJSON(body)
}

// checkDuplicateKeys is the verifier's and signers' check: an empty body
// passes; anything else must be JSON without duplicate keys. Raw control
// bytes inside strings are tolerated here (the HMAC vector "null-bytes"
// must verify); CheckJSON, which the receiver runs before parsing, does
// not tolerate them.
func checkDuplicateKeys(body []byte) error {
	if len(body) > MaxBodyBytes {
		return fmt.Errorf("%w: %d bytes", ErrBodyTooLarge, len(body))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if i := bytes.IndexFunc(body, isBadControl); i >= 0 {
		clean := bytes.Clone(body)
		for j := i; j < len(clean); j++ {
			if isBadControl(rune(clean[j])) {
				clean[j] = ' '
			}
		}
		body = clean
	}
	return walkJSON(body)
}

func isBadControl(r rune) bool { return r < 0x20 && r != '\t' && r != '\n' && r != '\r' }

func walkJSON(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := walkValue(dec, 0); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: trailing data after json value", ErrBodyMalformed)
	}
	return nil
}

func walkValue(dec *json.Decoder, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("%w: nesting deeper than %d", ErrBodyMalformed, maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBodyMalformed, err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		seen := make(map[string]struct{})
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%w: %w", ErrBodyMalformed, err)
			}
			key, ok := kt.(string)
			if !ok {
				return fmt.Errorf("%w: object key is not a string", ErrBodyMalformed)
			}
			if _, dup := seen[key]; dup {
				return fmt.Errorf("%w: duplicate object key", ErrBodyMalformed)
			}
			seen[key] = struct{}{}
			if err := walkValue(dec, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := walkValue(dec, depth+1); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%w: unexpected %v", ErrBodyMalformed, d)
	}
	if _, err := dec.Token(); err != nil { // closing delimiter
		return fmt.Errorf("%w: %w", ErrBodyMalformed, err)
	}
	return nil
}
