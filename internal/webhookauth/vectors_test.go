package webhookauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/clocktest"
)

const vectorDir = "testdata/vectors"

type signingVector struct {
	Name         string `json:"name"`
	ReferenceNow int64  `json:"reference_now"`
	Request      struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	} `json:"request"`
	JWKSRef               []string                   `json:"jwks_ref"`
	JWKSOverride          map[string]json.RawMessage `json:"jwks_override"`
	ExpectedSignatureBase *string                    `json:"expected_signature_base"`
	ExpectedOutcome       struct {
		Success   bool   `json:"success"`
		ErrorCode string `json:"error_code"`
	} `json:"expected_outcome"`
	HarnessState *struct {
		ReplayCacheEntries []struct {
			KeyID string `json:"keyid"`
			Nonce string `json:"nonce"`
		} `json:"replay_cache_entries"`
		RevokedKids                []string `json:"revoked_kids"`
		PerKeyIDCapFilledFor       string   `json:"per_keyid_cap_filled_for"`
		RevocationListStaleSeconds int64    `json:"revocation_list_stale_seconds"`
	} `json:"test_harness_state"`
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// vectorKeys returns keys.json's JWKs by kid (private d fields included).
func vectorKeys(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	var f struct {
		Keys []json.RawMessage `json:"keys"`
	}
	readJSON(t, filepath.Join(vectorDir, "webhook-signing", "keys.json"), &f)
	out := map[string]json.RawMessage{}
	for _, k := range f.Keys {
		var id struct {
			Kid string `json:"kid"`
		}
		if err := json.Unmarshal(k, &id); err != nil {
			t.Fatal(err)
		}
		out[id.Kid] = k
	}
	return out
}

func loadSigningVectors(t testing.TB) map[string]signingVector {
	t.Helper()
	out := map[string]signingVector{}
	for _, dir := range []string{"positive", "negative"} {
		paths, err := filepath.Glob(filepath.Join(vectorDir, "webhook-signing", dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			var v signingVector
			readJSON(t, p, &v)
			out[dir+"/"+strings.TrimSuffix(filepath.Base(p), ".json")] = v
		}
	}
	return out
}

// vectorVerifier builds the Verifier a conformance runner would: the
// vector's keys, its clock, and its harness state installed.
func vectorVerifier(t testing.TB, v signingVector, keys map[string]json.RawMessage) *Verifier {
	t.Helper()
	now := time.Unix(v.ReferenceNow, 0)
	clock := func() time.Time { return now }
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	for _, kid := range v.JWKSRef {
		if o, ok := v.JWKSOverride[kid]; ok {
			set.Keys = append(set.Keys, o)
			continue
		}
		k, ok := keys[kid]
		if !ok {
			t.Fatalf("unknown kid %q in jwks_ref", kid)
		}
		set.Keys = append(set.Keys, k)
	}
	jwks, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{JWKS: jwks, Now: clock}
	store := NewMemoryReplayStore(0, clock)
	if hs := v.HarnessState; hs != nil {
		for _, e := range hs.ReplayCacheEntries {
			if _, err := store.Seen(context.Background(), e.KeyID, e.Nonce, now.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		if hs.PerKeyIDCapFilledFor != "" {
			store = NewMemoryReplayStore(8, clock)
			for i := range 8 {
				if _, err := store.Seen(context.Background(), hs.PerKeyIDCapFilledFor, "filler-nonce-"+string(rune('a'+i)), now.Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(hs.RevokedKids) > 0 || hs.RevocationListStaleSeconds > 0 {
			rl := &RevocationList{KeyIDs: hs.RevokedKids, UpdatedAt: now, MaxAge: time.Hour, Now: clock}
			if hs.RevocationListStaleSeconds > 0 {
				rl.UpdatedAt = now.Add(-time.Duration(hs.RevocationListStaleSeconds) * time.Second)
			}
			cfg.Revocations = rl
		}
	}
	cfg.Replay = store
	ver, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ver
}

func (v signingVector) request() Request {
	h := http.Header{}
	for k, val := range v.Request.Headers {
		h.Set(k, val)
	}
	return Request{Method: v.Request.Method, URL: v.Request.URL, Header: h, Body: []byte(v.Request.Body)}
}

// TestRFC9421Vectors runs every webhook-signing conformance vector.
func TestRFC9421Vectors(t *testing.T) {
	keys := vectorKeys(t)
	vectors := loadSigningVectors(t)
	if len(vectors) != 29 {
		t.Fatalf("loaded %d webhook-signing vectors, want 29", len(vectors))
	}
	for id, v := range vectors {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			req := v.request()
			// 012 and 014 publish the base of the header before the
			// parameter was removed, so it cannot match the wire header.
			if v.ExpectedSignatureBase != nil && !strings.HasPrefix(id, "negative/012") && !strings.HasPrefix(id, "negative/014") {
				if base, err := vectorBase(req); err == nil {
					if string(base) != *v.ExpectedSignatureBase {
						t.Errorf("signature base:\n got %q\nwant %q", base, *v.ExpectedSignatureBase)
					}
				} else if v.ExpectedOutcome.Success {
					t.Errorf("building base: %v", err)
				}
			}
			ver := vectorVerifier(t, v, keys)
			res, err := ver.Verify(context.Background(), req)
			if v.ExpectedOutcome.Success {
				if err != nil {
					t.Fatalf("Verify: %v (code %s), want success", err, Code(err))
				}
				if res.KeyID != v.JWKSRef[0] || res.Mode != ModeRFC9421 {
					t.Errorf("result = %+v", res)
				}
				// Delivering the same signed request again is a replay.
				if _, err := ver.Verify(context.Background(), req); !errors.Is(err, ErrReplayed) {
					t.Errorf("second delivery: %v, want ErrReplayed", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify succeeded, want %s", v.ExpectedOutcome.ErrorCode)
			}
			if got := Code(err); got != v.ExpectedOutcome.ErrorCode {
				t.Fatalf("Code = %q (%v), want %q", got, err, v.ExpectedOutcome.ErrorCode)
			}
			want := `Signature error="` + v.ExpectedOutcome.ErrorCode + `"`
			if got := WWWAuthenticate(err); got != want {
				t.Errorf("WWWAuthenticate = %q, want %q", got, want)
			}
		})
	}
}

// vectorBase recomputes the signature base a verifier would build.
func vectorBase(req Request) ([]byte, error) {
	inputs, err := ParseSignatureInput(req.Header.Get("Signature-Input"))
	if err != nil {
		return nil, err
	}
	target, authority, err := CanonicalTargetURI(req.URL)
	if err != nil {
		return nil, err
	}
	return signatureBase(selectInput(inputs), req.Method, target, authority, req.Header)
}

// TestRFC9421VectorReplayBlackBox delivers vector 016 twice without the
// preloaded cache, as the black-box runner does.
func TestRFC9421VectorReplayBlackBox(t *testing.T) {
	keys := vectorKeys(t)
	v := loadSigningVectors(t)["negative/016-replayed-nonce"]
	v.HarnessState = nil
	ver := vectorVerifier(t, v, keys)
	if _, err := ver.Verify(context.Background(), v.request()); err != nil {
		t.Fatalf("first delivery: %v", err)
	}
	_, err := ver.Verify(context.Background(), v.request())
	if Code(err) != "webhook_signature_replayed" {
		t.Fatalf("second delivery: %v, want webhook_signature_replayed", err)
	}
}

type hmacVectors struct {
	Secret  string `json:"secret"`
	Vectors []struct {
		ID                string `json:"id"`
		Timestamp         int64  `json:"timestamp"`
		RawBody           string `json:"raw_body"`
		ExpectedSignature string `json:"expected_signature"`
		RFC9421ErrorCode  string `json:"rfc9421_error_code"`
	} `json:"vectors"`
	RejectionVectors []struct {
		ID          string          `json:"id"`
		Timestamp   json.RawMessage `json:"timestamp"`
		RawBody     string          `json:"raw_body"`
		Signature   *string         `json:"signature"`
		CurrentTime *int64          `json:"current_time"`
	} `json:"rejection_vectors"`
	SecretRejectionVectors []struct {
		Description string `json:"description"`
		Secret      string `json:"secret"`
	} `json:"secret_rejection_vectors"`
	SignerSide struct {
		RejectionVectors []struct {
			ID   string `json:"id"`
			Body string `json:"signer_input_body"`
		} `json:"rejection_vectors"`
		PositiveVectors []struct {
			ID   string `json:"id"`
			Body string `json:"signer_input_body"`
		} `json:"positive_vectors"`
	} `json:"signer_side"`
}

func hmacVerifier(t testing.TB, secret string, now int64) *Verifier {
	t.Helper()
	v, err := New(Config{Mode: ModeHMAC, Secrets: [][]byte{[]byte(secret)}, Now: func() time.Time { return time.Unix(now, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestHMACVectors runs every vector of webhook-hmac-sha256.json: signing
// and verifying the positive ones, rejecting the rejection ones, refusing
// weak secrets and refusing duplicate-key input at the signer.
func TestHMACVectors(t *testing.T) {
	var f hmacVectors
	readJSON(t, filepath.Join(vectorDir, "webhook-hmac-sha256.json"), &f)
	if len(f.Vectors) != 15 || len(f.RejectionVectors) != 10 || len(f.SecretRejectionVectors) != 4 {
		t.Fatalf("vector counts %d/%d/%d", len(f.Vectors), len(f.RejectionVectors), len(f.SecretRejectionVectors))
	}
	for _, v := range f.Vectors {
		t.Run("vectors/"+v.ID, func(t *testing.T) {
			now := func() time.Time { return time.Unix(v.Timestamp, 0) }
			req, _ := http.NewRequest(http.MethodPost, "https://buyer.example.com/wh", nil)
			signer := &HMACSigner{Secret: []byte(f.Secret), Now: now}
			signErr := signer.Sign(req, []byte(v.RawBody))
			h := http.Header{}
			h.Set("X-ADCP-Signature", v.ExpectedSignature)
			h.Set("X-ADCP-Timestamp", jsonInt(v.Timestamp))
			_, err := hmacVerifier(t, f.Secret, v.Timestamp).Verify(context.Background(), Request{Method: "POST", URL: "https://buyer.example.com/wh", Header: h, Body: []byte(v.RawBody)})
			if v.RFC9421ErrorCode != "" {
				if !errors.Is(err, ErrBodyMalformed) || Code(err) != v.RFC9421ErrorCode {
					t.Fatalf("Verify: %v (code %q), want %s", err, Code(err), v.RFC9421ErrorCode)
				}
				if signErr == nil {
					t.Errorf("signer accepted a duplicate-key body")
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if signErr != nil {
				t.Fatalf("Sign: %v", signErr)
			}
			if got := req.Header.Get("X-ADCP-Signature"); got != v.ExpectedSignature {
				t.Errorf("signer produced %s, want %s", got, v.ExpectedSignature)
			}
		})
	}
	for _, v := range f.RejectionVectors {
		t.Run("rejection_vectors/"+v.ID, func(t *testing.T) {
			now := int64(1700000000)
			if v.CurrentTime != nil {
				now = *v.CurrentTime
			}
			h := http.Header{}
			if v.Signature != nil {
				h.Set("X-ADCP-Signature", *v.Signature)
			}
			ts := string(v.Timestamp)
			if strings.HasPrefix(ts, `"`) {
				if err := json.Unmarshal(v.Timestamp, &ts); err != nil {
					t.Fatal(err)
				}
			}
			h.Set("X-ADCP-Timestamp", ts)
			_, err := hmacVerifier(t, f.Secret, now).Verify(context.Background(), Request{Method: "POST", URL: "https://buyer.example.com/wh", Header: h, Body: []byte(v.RawBody)})
			if err == nil {
				t.Fatal("Verify accepted a rejection vector")
			}
			if Code(err) == "" {
				t.Errorf("error %v has no code", err)
			}
		})
	}
	for _, v := range f.SecretRejectionVectors {
		t.Run("secret_rejection_vectors/"+v.Description, func(t *testing.T) {
			if _, err := New(Config{Mode: ModeHMAC, Secrets: [][]byte{[]byte(v.Secret)}}); !errors.Is(err, ErrConfig) {
				t.Errorf("New: %v, want ErrConfig", err)
			}
			req, _ := http.NewRequest(http.MethodPost, "https://buyer.example.com/wh", nil)
			if err := (&HMACSigner{Secret: []byte(v.Secret)}).Sign(req, []byte(`{}`)); !errors.Is(err, ErrConfig) {
				t.Errorf("Sign: %v, want ErrConfig", err)
			}
		})
	}
	for _, v := range f.SignerSide.RejectionVectors {
		t.Run("signer_side/"+v.ID, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "https://buyer.example.com/wh", nil)
			if err := (&HMACSigner{Secret: []byte(f.Secret)}).Sign(req, []byte(v.Body)); !errors.Is(err, ErrBodyMalformed) {
				t.Errorf("HMACSigner.Sign: %v, want ErrBodyMalformed", err)
			}
			if req.Header.Get("X-ADCP-Signature") != "" {
				t.Errorf("signer emitted a header for rejected input")
			}
			if err := testSigner(t, "ed").Sign(req, []byte(v.Body)); !errors.Is(err, ErrBodyMalformed) {
				t.Errorf("RFC9421Signer.Sign: %v, want ErrBodyMalformed", err)
			}
		})
	}
	for _, v := range f.SignerSide.PositiveVectors {
		t.Run("signer_side/"+v.ID, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "https://buyer.example.com/wh", nil)
			if err := (&HMACSigner{Secret: []byte(f.Secret)}).Sign(req, []byte(v.Body)); err != nil {
				t.Fatalf("Sign: %v", err)
			}
		})
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestCanonicalizationVectors runs request-signing/canonicalization.json,
// whose @target-uri rules the webhook profile shares.
func TestCanonicalizationVectors(t *testing.T) {
	var f struct {
		Cases []struct {
			Name              string `json:"name"`
			InputURL          string `json:"input_url"`
			ExpectedTargetURI string `json:"expected_target_uri"`
			ExpectedAuthority string `json:"expected_authority"`
			Reject            bool   `json:"reject"`
		} `json:"cases"`
	}
	readJSON(t, filepath.Join(vectorDir, "canonicalization.json"), &f)
	if len(f.Cases) != 37 {
		t.Fatalf("%d cases, want 37", len(f.Cases))
	}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			target, authority, err := CanonicalTargetURI(c.InputURL)
			if c.Reject {
				if !errors.Is(err, ErrTargetURIMalformed) {
					t.Fatalf("got (%q, %q, %v), want ErrTargetURIMalformed", target, authority, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if target != c.ExpectedTargetURI || authority != c.ExpectedAuthority {
				t.Errorf("got (%q, %q), want (%q, %q)", target, authority, c.ExpectedTargetURI, c.ExpectedAuthority)
			}
		})
	}
}

// TestReceiverEnvelopeVectorsSignatureLayer signs every payload of
// webhook-receiver-envelope.json in both RFC 9421 and HMAC modes. The
// authentication layer must accept all of them, retries included (a retry
// carries a fresh nonce; deduplication by idempotency_key is the ledger's
// job), and CheckJSON must pass them: the negatives are rejected by the
// receiver's envelope validation, never with a webhook_signature_* code.
func TestReceiverEnvelopeVectorsSignatureLayer(t *testing.T) {
	var f struct {
		Positive []struct {
			ID      string          `json:"id"`
			Payload json.RawMessage `json:"payload"`
		} `json:"positive"`
		Negative []struct {
			ID      string          `json:"id"`
			Payload json.RawMessage `json:"payload"`
		} `json:"negative"`
	}
	readJSON(t, filepath.Join(vectorDir, "webhook-receiver-envelope.json"), &f)
	payloads := map[string]json.RawMessage{}
	for _, p := range f.Positive {
		payloads["positive/"+p.ID] = p.Payload
	}
	for _, p := range f.Negative {
		payloads["negative/"+p.ID] = p.Payload
	}
	if len(payloads) != 5 {
		t.Fatalf("%d payloads, want 5", len(payloads))
	}
	s := testSigner(t, "ed")
	v := newVerifier(t, Config{JWKS: jwksOf(t, s), Now: clocktest.At(testNow).Now})
	secret := []byte("0123456789abcdef0123456789abcdef")
	hv := newVerifier(t, Config{Mode: ModeHMAC, Secrets: [][]byte{secret}, Now: clocktest.At(testNow).Now})
	for id, raw := range payloads {
		t.Run(id, func(t *testing.T) {
			var body bytes.Buffer
			if err := json.Compact(&body, raw); err != nil {
				t.Fatal(err)
			}
			if err := CheckJSON(body.Bytes()); err != nil {
				t.Fatalf("CheckJSON: %v", err)
			}
			if _, err := v.Verify(context.Background(), signed(t, s, testURL, body.Bytes())); err != nil {
				t.Fatalf("rfc9421: %v", err)
			}
			req, _ := http.NewRequest(http.MethodPost, testURL, nil)
			if err := (&HMACSigner{Secret: secret, Now: clocktest.At(testNow).Now}).Sign(req, body.Bytes()); err != nil {
				t.Fatal(err)
			}
			if _, err := hv.Verify(context.Background(), Request{Method: "POST", URL: testURL, Header: req.Header, Body: body.Bytes()}); err != nil {
				t.Fatalf("hmac: %v", err)
			}
		})
	}
}
