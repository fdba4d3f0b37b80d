package webhookauth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// FuzzParseSignatureInput checks the structured-field parser never panics,
// fails only with ErrMalformedHeader, and that what it accepts serialises to
// @signature-params that parse back to the same members.
func FuzzParseSignatureInput(f *testing.F) {
	for _, v := range loadSigningVectors(f) {
		f.Add(v.Request.Headers["Signature-Input"])
	}
	for _, s := range []string{
		``, `sig1=()`, `sig1=("a" "b");x=?1;y=?0;z=-1.25;w=:AA==:;t=tok/x`, `a=1, b="x", c`,
		`sig1=("a");created=999999999999999`, `sig1=("a");created=9999999999999999`, `*x=("@method")`,
		`sig1=("a"  "b" );nonce="\\\""`, "sig1=(\"a\")\t,\tsig2=()",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		inputs, err := ParseSignatureInput(header)
		if err != nil {
			if !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("error %v does not wrap ErrMalformedHeader", err)
			}
			return
		}
		for _, si := range inputs {
			again, err := ParseSignatureInput(si.Label + "=" + si.signatureParams())
			if err != nil {
				t.Fatalf("re-parse of %q: %v", si.signatureParams(), err)
			}
			if len(again) != 1 || again[0].signatureParams() != si.signatureParams() || again[0].KeyID != si.KeyID || again[0].Created != si.Created {
				t.Fatalf("round trip changed %q", si.signatureParams())
			}
		}
	})
}

// FuzzVerifyRFC9421 feeds mutated conformance requests to the verifier:
// it must never panic, never accept a request other than one the vectors
// signed (some negative vectors carry valid signatures and fail only on
// harness state this target does not install), and every rejection must
// carry a code.
func FuzzVerifyRFC9421(f *testing.F) {
	keys := vectorKeys(f)
	vectors := loadSigningVectors(f)
	base := vectors["positive/001-basic-post"]
	for _, v := range vectors {
		f.Add(v.Request.Method, v.Request.URL, v.Request.Headers["Signature-Input"], v.Request.Headers["Signature"], v.Request.Headers["Content-Digest"], v.Request.Body)
	}
	f.Fuzz(func(t *testing.T, method, url, sigInput, sig, digest, body string) {
		v := base
		v.JWKSRef = []string{"test-ed25519-webhook-2026", "test-es256-webhook-2026"}
		ver := vectorVerifier(t, v, keys)
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("Signature-Input", sigInput)
		h.Set("Signature", sig)
		h.Set("Content-Digest", digest)
		_, err := ver.Verify(context.Background(), Request{Method: method, URL: url, Header: h, Body: []byte(body)})
		if err == nil {
			known := false
			// Only the member the verifier selects is signed (its @signature-params are in
			// the base); other members may differ, as positive/003 shows. Compare that one.
			for _, kv := range vectors {
				r := kv.Request
				if r.Body == body && r.Headers["Signature"] == sig && signedMember(r.Headers["Signature-Input"]) == signedMember(sigInput) &&
					r.Headers["Content-Digest"] == digest && r.Method == method {
					known = true
				}
			}
			if !known {
				t.Fatalf("accepted a request that no vector signed: %s %s", method, url)
			}
			return
		}
		if Code(err) == "" && !strings.Contains(err.Error(), "replay") {
			t.Fatalf("rejection without a code: %v", err)
		}
	})
}

// signedMember is the Signature-Input member the verifier checks (selectInput), as label=params,
// or the raw header when it does not parse.
func signedMember(header string) string {
	inputs, err := ParseSignatureInput(header)
	if err != nil || len(inputs) == 0 {
		return "unparsed:" + header
	}
	si := selectInput(inputs)
	return si.Label + "=" + si.signatureParams()
}

// FuzzVerifyHMAC checks the legacy verifier never panics and accepts only
// the exact signed body and timestamp.
func FuzzVerifyHMAC(f *testing.F) {
	secret := []byte("cc237f7fe354609bb41360c6530a2deb7926f3cc55e91df3ff90e37202950b6c")
	f.Add("1700000000", "sha256=0987f9b3e89d331142297dbc0e992edbc13b2ae29e7038ed8f948b565aa05c4b", `{"event":"creative.status_changed","creative_id":"creative_123","status":"approved"}`)
	f.Add("-1", "sha256=", "")
	f.Add("1700000000", "sha256=sha256=00", `{"a":1,"a":2}`)
	f.Fuzz(func(t *testing.T, ts, sig, body string) {
		v := hmacVerifier(t, string(secret), 1700000000)
		h := http.Header{}
		h.Set("X-ADCP-Timestamp", ts)
		h.Set("X-ADCP-Signature", sig)
		_, err := v.Verify(context.Background(), Request{Method: "POST", URL: "https://b.example/wh", Header: h, Body: []byte(body)})
		if err == nil {
			want := "sha256=" + hexString(hmacSHA256(secret, ts, []byte(body)))
			if !strings.EqualFold(sig, want) {
				t.Fatalf("accepted signature %q for ts %q", sig, ts)
			}
			return
		}
		if Code(err) == "" {
			t.Fatalf("rejection without a code: %v", err)
		}
	})
}

// FuzzCheckJSON checks CheckJSON never panics, and that whatever it accepts
// encoding/json accepts too.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":[{"b":1,"b":2}]}`, `{"a":"\u0061"}`, `[1]`, `{"a":1}x`, "{\"a\":\"\x00\"}", `{"a":{"b":{"c":[1,2,{"d":null}]}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := CheckJSON(body)
		if err != nil {
			if !errors.Is(err, ErrBodyMalformed) && !errors.Is(err, ErrBodyTooLarge) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		var m map[string]any
		if jerr := jsonUnmarshal(body, &m); jerr != nil {
			t.Fatalf("CheckJSON accepted what encoding/json rejects: %v", jerr)
		}
	})
}

// FuzzCanonicalTargetURI checks canonicalisation never panics and is
// idempotent.
func FuzzCanonicalTargetURI(f *testing.F) {
	for _, s := range []string{"https://a.example/p", "HTTPS://B\u00dcCHER.example.:443/a/../%7e?x", "https://[::1]:8443/", "https://a..b/", "http://x/%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		target, authority, err := CanonicalTargetURI(raw)
		if err != nil {
			return
		}
		t2, a2, err := CanonicalTargetURI(target)
		if err != nil || t2 != target || a2 != authority {
			t.Fatalf("not idempotent: %q → %q → %q (%v)", raw, target, t2, err)
		}
	})
}
