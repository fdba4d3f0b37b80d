package webhookauth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/clocktest"
)

const testURL = "https://buyer.example.com/adcp/webhook/create_media_buy/op_abc?x=1"

var testBody = []byte(`{"idempotency_key":"whk_01HW9D3H8FZP2N6R8T0V4X6Z9B","task_id":"task_456","operation_id":"op_abc","task_type":"create_media_buy","status":"completed","timestamp":"2026-04-18T10:00:00Z"}`)

func jwksOf(t testing.TB, signers ...*RFC9421Signer) []byte {
	t.Helper()
	var keys []json.RawMessage
	for _, s := range signers {
		k, err := PublicJWK(s.KeyID, s.Key)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	out, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// signed returns a Request signed by s for testURL and testBody.
func signed(t testing.TB, s *RFC9421Signer, url string, body []byte) Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sign(req, body); err != nil {
		t.Fatal(err)
	}
	return Request{Method: req.Method, URL: url, Header: req.Header, Body: body}
}

func newVerifier(t testing.TB, cfg Config) *Verifier {
	t.Helper()
	v, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRoundTripRFC9421(t *testing.T) {
	for _, alg := range []string{"ed", "es"} {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			s := testSigner(t, alg)
			v := newVerifier(t, Config{JWKS: jwksOf(t, s), Now: clocktest.At(testNow.Add(10 * time.Second)).Now})
			req := signed(t, s, testURL, testBody)
			if got := req.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q", got)
			}
			if !strings.Contains(req.Header.Get("Signature-Input"), `tag="adcp/webhook-signing/v1"`) {
				t.Errorf("Signature-Input = %q", req.Header.Get("Signature-Input"))
			}
			res, err := v.Verify(context.Background(), req)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			want := Result{Mode: ModeRFC9421, KeyID: s.KeyID, Created: testNow, Expires: testNow.Add(MaxWindow)}
			if res != want {
				t.Errorf("Result = %+v, want %+v", res, want)
			}
		})
	}
}

// TestRoundTripHTTP sends signed webhooks to an httptest receiver that uses
// VerifyHTTP (loopback http is allowed; anything else must be https).
func TestRoundTripHTTP(t *testing.T) {
	s := testSigner(t, "ed")
	s.Now = nil // real clock: the receiver uses one too
	v := newVerifier(t, Config{JWKS: jwksOf(t, s)})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if _, err := v.VerifyHTTP(r.Context(), r, body); err != nil {
			w.Header().Set("WWW-Authenticate", WWWAuthenticate(err))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	for _, path := range []string{"/wh/op_1", "/wh/op_%7e2?b=2&a=1", "/wh//x/./y"} {
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(testBody))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Sign(req, testBody); err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close() // only the status is checked
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("%s: status %d, %s", path, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
}

func TestRoundTripLegacy(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef-current")
	old := []byte("0123456789abcdef0123456789abcdef-previous")
	ctx := context.Background()

	v := newVerifier(t, Config{Mode: ModeHMAC, Secrets: [][]byte{secret, old}, Now: clocktest.At(testNow).Now})
	for _, sec := range [][]byte{secret, old} {
		req, _ := http.NewRequest(http.MethodPost, testURL, nil)
		if err := (&HMACSigner{Secret: sec, Now: clocktest.At(testNow.Add(-299 * time.Second)).Now}).Sign(req, testBody); err != nil {
			t.Fatal(err)
		}
		res, err := v.Verify(ctx, Request{Method: "POST", URL: testURL, Header: req.Header, Body: testBody})
		if err != nil || res.Mode != ModeHMAC || !res.Created.Equal(testNow.Add(-299*time.Second)) {
			t.Errorf("hmac: %+v, %v", res, err)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, testURL, nil)
	if err := (&HMACSigner{Secret: []byte("another-secret-of-at-least-32-bytes!!"), Now: clocktest.At(testNow).Now}).Sign(req, testBody); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, Request{Method: "POST", URL: testURL, Header: req.Header, Body: testBody}); !errors.Is(err, ErrBadSignature) {
		t.Errorf("wrong secret: %v", err)
	}

	b := newVerifier(t, Config{Mode: ModeBearer, Secrets: [][]byte{secret}})
	for _, c := range []struct {
		auth string
		want error
	}{
		{"Bearer " + string(secret), nil},
		{"bearer " + string(secret), nil},
		{"Bearer " + string(old), ErrBadSignature},
		{"Bearer " + string(secret[:31]), ErrBadSignature},
		{"Basic " + string(secret), ErrMalformedHeader},
		{"", ErrMissingSignature},
	} {
		h := http.Header{}
		if c.auth != "" {
			h.Set("Authorization", c.auth)
		}
		_, err := b.Verify(ctx, Request{Method: "POST", URL: testURL, Header: h, Body: testBody})
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("bearer %.12q: %v, want %v", c.auth, err, c.want)
		}
	}
}

// mutate returns a copy of r with f applied to a cloned header.
func mutate(r Request, f func(*Request)) Request {
	r.Header = r.Header.Clone()
	r.Body = bytes.Clone(r.Body)
	f(&r)
	return r
}

// resign rewrites the Signature header with enc over the same signature bytes.
func reencodeSignature(t testing.TB, r *Request, enc *base64.Encoding) {
	t.Helper()
	v := r.Header.Get("Signature")
	raw := strings.TrimSuffix(strings.TrimPrefix(v, "sig1=:"), ":")
	sig, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Signature", "sig1=:"+enc.EncodeToString(sig)+":")
}

func TestVerifyRFC9421Cases(t *testing.T) {
	ed := testSigner(t, "ed")
	es := testSigner(t, "es")
	good := signed(t, ed, testURL, testBody)
	goodES := signed(t, es, testURL, testBody)
	// A signature whose base64url form contains '-' or '_', so the
	// re-encodings below really change the alphabet.
	var urlish Request
	for i := 0; ; i++ {
		urlish = signed(t, ed, testURL+"&n="+string(rune('a'+i%26))+strings.Repeat("z", i/26), testBody)
		if strings.ContainsAny(urlish.Header.Get("Signature"), "-_") {
			break
		}
	}

	cases := []struct {
		name string
		req  Request
		now  time.Time
		want error
	}{
		{"ok", good, testNow, nil},
		{"ok es256", goodES, testNow, nil},
		{"legacy std base64 padded", mutate(urlish, func(r *Request) { reencodeSignature(t, r, base64.StdEncoding) }), testNow, nil},
		{"legacy std base64 unpadded", mutate(urlish, func(r *Request) { reencodeSignature(t, r, base64.RawStdEncoding) }), testNow, nil},
		{"padded base64url", mutate(urlish, func(r *Request) { reencodeSignature(t, r, base64.URLEncoding) }), testNow, ErrMalformedHeader},
		{"digest in std base64", mutate(good, func(r *Request) {
			raw := strings.TrimSuffix(strings.TrimPrefix(r.Header.Get("Content-Digest"), "sha-256=:"), ":")
			d, _ := base64.RawURLEncoding.DecodeString(raw)
			r.Header.Set("Content-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(d)+":")
		}), testNow, ErrBadSignature}, // the digest header is covered: changing its text breaks the signature
		{"created 59s ahead", good, testNow.Add(-59 * time.Second), nil},
		{"created 61s ahead", good, testNow.Add(-61 * time.Second), ErrExpired},
		{"expired 59s ago", good, testNow.Add(MaxWindow + 59*time.Second), nil},
		{"expired 61s ago", good, testNow.Add(MaxWindow + 61*time.Second), ErrExpired},
		{"body tampered", mutate(good, func(r *Request) { r.Body = bytes.Replace(r.Body, []byte("completed"), []byte("failed!!!"), 1) }), testNow, ErrBadDigest},
		{"url tampered", mutate(good, func(r *Request) { r.URL = strings.Replace(r.URL, "op_abc", "op_abd", 1) }), testNow, ErrBadSignature},
		{"authority tampered", mutate(good, func(r *Request) { r.URL = strings.Replace(r.URL, "buyer.example.com", "evil.example.com", 1) }), testNow, ErrBadSignature},
		{"method tampered", mutate(good, func(r *Request) { r.Method = "PUT" }), testNow, ErrBadSignature},
		{"content type tampered", mutate(good, func(r *Request) { r.Header.Set("Content-Type", "text/plain") }), testNow, ErrBadSignature},
		{"signature corrupted", mutate(good, func(r *Request) {
			r.Header.Set("Signature", "sig1=:"+strings.Repeat("A", 86)+":")
		}), testNow, ErrBadSignature},
		{"signature wrong length", mutate(good, func(r *Request) { r.Header.Set("Signature", "sig1=:AAAA:") }), testNow, ErrBadSignature},
		{"mixed alphabets", mutate(good, func(r *Request) { r.Header.Set("Signature", "sig1=:ab+c-d:") }), testNow, ErrMalformedHeader},
		{"signature label missing", mutate(good, func(r *Request) {
			r.Header.Set("Signature", strings.Replace(r.Header.Get("Signature"), "sig1=", "sig2=", 1))
		}), testNow, ErrMalformedHeader},
		{"signature input only", mutate(good, func(r *Request) { r.Header.Del("Signature") }), testNow, ErrMalformedHeader},
		{"no headers", mutate(good, func(r *Request) { r.Header.Del("Signature"); r.Header.Del("Signature-Input") }), testNow, ErrMissingSignature},
		{"hmac headers too", mutate(good, func(r *Request) { r.Header.Set("X-ADCP-Signature", "sha256=00") }), testNow, ErrModeMismatch},
		{"hmac instead", mutate(good, func(r *Request) {
			r.Header.Del("Signature")
			r.Header.Del("Signature-Input")
			r.Header.Set("X-ADCP-Signature", "sha256=00")
			r.Header.Set("X-ADCP-Timestamp", "1")
		}), testNow, ErrModeMismatch},
		{"bearer instead", mutate(good, func(r *Request) {
			r.Header.Del("Signature")
			r.Header.Del("Signature-Input")
			r.Header.Set("Authorization", "Bearer x")
		}), testNow, ErrModeMismatch},
		{"http url", mutate(good, func(r *Request) { r.URL = strings.Replace(r.URL, "https:", "http:", 1) }), testNow, ErrTargetURIMalformed},
		{"loopback http url", signed(t, ed, "http://127.0.0.1:8080/wh", testBody), testNow, nil},
		{"localhost http url", signed(t, ed, "http://localhost/wh", testBody), testNow, nil},
		{"multiple content types", mutate(good, func(r *Request) { r.Header.Add("Content-Type", "application/json") }), testNow, ErrMalformedHeader},
		{"content digest absent", mutate(good, func(r *Request) { r.Header.Del("Content-Digest") }), testNow, ErrBadDigest},
		{"body too large", mutate(good, func(r *Request) { r.Body = make([]byte, MaxBodyBytes+1) }), testNow, ErrBodyTooLarge},
		{"alg does not match key", mutate(good, func(r *Request) {
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), `alg="ed25519"`, `alg="ecdsa-p256-sha256"`, 1))
		}), testNow, ErrKeyPurpose},
		{"short nonce", mutate(good, func(r *Request) {
			si := r.Header.Get("Signature-Input")
			i := strings.Index(si, `nonce="`)
			j := strings.Index(si[i+7:], `"`)
			r.Header.Set("Signature-Input", si[:i+7]+"c2hvcnQ"+si[i+7+j:])
		}), testNow, ErrMalformedHeader},
		{"unknown kid", signed(t, &RFC9421Signer{KeyID: "nope", Key: ed.Key, Now: ed.Now}, testURL, testBody), testNow, ErrUnknownKey},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			v := newVerifier(t, Config{JWKS: jwksOf(t, ed, es), Now: clocktest.At(c.now).Now})
			_, err := v.Verify(context.Background(), c.req)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Verify: %v, want %v", err, c.want)
			}
		})
	}
}

// VerifyDeferred checks everything but records nothing: the nonce is taken only by Commit, once.
func TestVerifyDeferredRecordsOnlyOnCommit(t *testing.T) {
	s := testSigner(t, "ed")
	store := NewMemoryReplayStore(0, clocktest.At(testNow).Now)
	v := newVerifier(t, Config{JWKS: jwksOf(t, s), Now: clocktest.At(testNow).Now, Replay: store})
	req := signed(t, s, testURL, testBody)
	ctx := context.Background()
	for range 2 {
		p, err := v.VerifyDeferred(ctx, req)
		if err != nil || p.KeyID == "" {
			t.Fatalf("VerifyDeferred: %+v, %v", p, err)
		}
	}
	p, _ := v.VerifyDeferred(ctx, req)
	if err := p.Commit(ctx); err != nil {
		t.Fatalf("first commit: %v", err)
	}
	if err := p.Commit(ctx); !errors.Is(err, ErrReplayed) {
		t.Fatalf("second commit: %v, want ErrReplayed", err)
	}
	if _, err := v.Verify(ctx, req); !errors.Is(err, ErrReplayed) {
		t.Fatalf("Verify after the commit: %v, want ErrReplayed", err)
	}
	// A bad signature is refused before any commit is possible.
	bad := signed(t, s, testURL, testBody)
	bad.Body = []byte(`{"other":1}`)
	if _, err := v.VerifyDeferred(ctx, bad); err == nil {
		t.Fatal("VerifyDeferred accepted a body its digest does not cover")
	}
	// Legacy modes carry no nonce: Commit is nil every time.
	secret := []byte("0123456789abcdef0123456789abcdef")
	hv := newVerifier(t, Config{Mode: ModeHMAC, Secrets: [][]byte{secret}, Now: clocktest.At(testNow).Now, Replay: store})
	hr, _ := http.NewRequest(http.MethodPost, testURL, nil)
	if err := (&HMACSigner{Secret: secret, Now: clocktest.At(testNow).Now}).Sign(hr, testBody); err != nil {
		t.Fatal(err)
	}
	hp, err := hv.VerifyDeferred(ctx, Request{Method: http.MethodPost, URL: testURL, Header: hr.Header, Body: testBody})
	if err != nil || hp.Mode != ModeHMAC {
		t.Fatalf("legacy VerifyDeferred: %+v, %v", hp, err)
	}
	for range 2 {
		if err := hp.Commit(ctx); err != nil {
			t.Fatalf("legacy commit: %v", err)
		}
	}
}

func TestReplay(t *testing.T) {
	s := testSigner(t, "ed")
	now := testNow
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	store := NewMemoryReplayStore(0, clock)
	v := newVerifier(t, Config{JWKS: jwksOf(t, s), Now: clock, Replay: store})
	req := signed(t, s, testURL, testBody)
	if _, err := v.Verify(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), req); !errors.Is(err, ErrReplayed) || Code(err) != "webhook_signature_replayed" {
		t.Fatalf("replay: %v", err)
	}
	// A fresh nonce for the same body is a new delivery (sender retries do this).
	if _, err := v.Verify(context.Background(), signed(t, s, testURL, testBody)); err != nil {
		t.Fatalf("fresh nonce: %v", err)
	}
	// A failed verification does not consume the nonce.
	s2 := *s
	s2.Nonce = func() string { return "AAAAAAAAAAAAAAAAAAAAAA" }
	good := signed(t, &s2, testURL, testBody)
	bad := mutate(good, func(r *Request) { r.Method = "PUT" })
	if _, err := v.Verify(context.Background(), bad); !errors.Is(err, ErrBadSignature) {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), good); err != nil {
		t.Fatalf("nonce consumed by a failed attempt: %v", err)
	}
	// Past the window the entry expires and the signature itself is expired.
	mu.Lock()
	now = now.Add(MaxWindow + ClockSkew + time.Second)
	mu.Unlock()
	if _, err := v.Verify(context.Background(), req); !errors.Is(err, ErrExpired) {
		t.Fatalf("after window: %v", err)
	}
	if seen, _ := store.Seen(context.Background(), s.KeyID, "other", now.Add(time.Minute)); seen {
		t.Fatal("unexpected entry")
	}
}

func TestReplayCap(t *testing.T) {
	s := testSigner(t, "ed")
	store := NewMemoryReplayStore(2, clocktest.At(testNow).Now)
	v := newVerifier(t, Config{JWKS: jwksOf(t, s), Now: clocktest.At(testNow).Now, Replay: store})
	for i := range 3 {
		_, err := v.Verify(context.Background(), signed(t, s, testURL, testBody))
		if i < 2 && err != nil || i == 2 && !errors.Is(err, ErrRateAbuse) {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	// Entries expire and free the cap.
	later := newVerifier(t, Config{JWKS: jwksOf(t, s), Now: clocktest.At(testNow.Add(10 * time.Minute)).Now, Replay: store})
	s.Now = clocktest.At(testNow.Add(10 * time.Minute)).Now
	store.now = clocktest.At(testNow.Add(10 * time.Minute)).Now
	if _, err := later.Verify(context.Background(), signed(t, s, testURL, testBody)); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// jwksServer serves a mutable JWKS and counts fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	doc     []byte
	status  int
	fetches atomic.Int32
}

func newJWKSServer(t *testing.T, doc []byte) *jwksServer {
	js := &jwksServer{doc: doc, status: http.StatusOK}
	js.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		js.fetches.Add(1)
		js.mu.Lock()
		defer js.mu.Unlock()
		w.WriteHeader(js.status)
		_, _ = w.Write(js.doc) // a failed write surfaces as the verifier's fetch error
	}))
	t.Cleanup(js.Close)
	return js
}

func (js *jwksServer) set(doc []byte, status int) {
	js.mu.Lock()
	js.doc, js.status = doc, status
	js.mu.Unlock()
}

func TestJWKSFetchRefetchCooldown(t *testing.T) {
	a, b := testSigner(t, "ed"), testSigner(t, "es")
	b.KeyID = "rotated-in"
	js := newJWKSServer(t, jwksOf(t, a))
	now := testNow
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
		a.Now, b.Now = clocktest.At(now).Now, clocktest.At(now).Now
	}
	v := newVerifier(t, Config{JWKSURL: js.URL + "/.well-known/jwks.json", HTTPClient: js.Client(), Now: clock})
	ctx := context.Background()
	step := func(name string, s *RFC9421Signer, want error, wantFetches int32) {
		t.Helper()
		_, err := v.Verify(ctx, signed(t, s, testURL, testBody))
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", name, err, want)
		}
		if got := js.fetches.Load(); got != wantFetches {
			t.Fatalf("%s: %d fetches, want %d", name, got, wantFetches)
		}
	}
	step("first use fetches", a, nil, 1)
	step("cached", a, nil, 1)
	step("unknown kid right after a fetch does not refetch", b, ErrUnknownKey, 1)
	advance(DefaultRefetchCooldown)
	step("unknown kid refetches once", b, ErrUnknownKey, 2)
	step("unknown kid within cooldown does not refetch", b, ErrUnknownKey, 2)
	js.set(jwksOf(t, a, b), http.StatusOK)
	advance(10 * time.Second)
	step("still cooling down", b, ErrUnknownKey, 2)
	advance(DefaultRefetchCooldown)
	step("after cooldown the rotated key is found", b, nil, 3)
	step("both cached", a, nil, 3)
	advance(DefaultCacheTTL)
	js.set([]byte("oops"), http.StatusInternalServerError)
	step("ttl expired, jwks down: stale keys still serve", a, nil, 4)
	step("jwks down within cooldown: no hammering", b, nil, 4)
}

func TestJWKSUnavailable(t *testing.T) {
	s := testSigner(t, "ed")
	js := newJWKSServer(t, nil)
	js.set([]byte("{}"), http.StatusServiceUnavailable)
	v := newVerifier(t, Config{JWKSURL: js.URL, HTTPClient: js.Client(), Now: clocktest.At(testNow).Now})
	_, err := v.Verify(context.Background(), signed(t, s, testURL, testBody))
	if !errors.Is(err, ErrKeysUnavailable) || Code(err) != "" || WWWAuthenticate(err) != "" {
		t.Fatalf("Verify: %v (code %q), want ErrKeysUnavailable with no code", err, Code(err))
	}
}

func TestConcurrentVerify(t *testing.T) {
	s := testSigner(t, "ed")
	js := newJWKSServer(t, jwksOf(t, s))
	v := newVerifier(t, Config{JWKSURL: js.URL, HTTPClient: js.Client(), Now: clocktest.At(testNow).Now})
	reqs := make([]Request, 32)
	for i := range reqs {
		reqs[i] = signed(t, s, testURL, testBody)
	}
	var wg sync.WaitGroup
	var ok atomic.Int32
	for i := range 64 {
		wg.Go(func() {
			if _, err := v.Verify(context.Background(), reqs[i%32]); err == nil {
				ok.Add(1)
			} else if !errors.Is(err, ErrReplayed) {
				t.Errorf("Verify: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 32 {
		t.Errorf("%d accepted, want exactly 32 (each nonce once)", ok.Load())
	}
	if js.fetches.Load() != 1 {
		t.Errorf("%d jwks fetches, want 1", js.fetches.Load())
	}
}

func TestKeyPurpose(t *testing.T) {
	s := testSigner(t, "ed")
	var base map[string]any
	raw, _ := PublicJWK(s.KeyID, s.Key)
	if err := json.Unmarshal(raw, &base); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(map[string]any)
		want error
	}{
		{"as published", func(map[string]any) {}, nil},
		{"request-signing reuse", func(k map[string]any) { k["adcp_use"] = "request-signing" }, nil},
		{"no use member", func(k map[string]any) { delete(k, "use") }, nil},
		{"response-signing", func(k map[string]any) { k["adcp_use"] = "response-signing" }, ErrKeyPurpose},
		{"no adcp_use", func(k map[string]any) { delete(k, "adcp_use") }, ErrKeyPurpose},
		{"use enc", func(k map[string]any) { k["use"] = "enc" }, ErrKeyPurpose},
		{"key_ops sign", func(k map[string]any) { k["key_ops"] = []string{"sign"} }, ErrKeyPurpose},
		{"no key_ops", func(k map[string]any) { delete(k, "key_ops") }, ErrKeyPurpose},
		{"alg crv mismatch", func(k map[string]any) { k["alg"] = "ES256" }, ErrKeyPurpose},
		{"bad x", func(k map[string]any) { k["x"] = "AAAA" }, ErrKeyPurpose},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := map[string]any{}
			for n, v := range base {
				k[n] = v
			}
			c.edit(k)
			doc, _ := json.Marshal(map[string]any{"keys": []any{k}})
			v := newVerifier(t, Config{JWKS: doc, Now: clocktest.At(testNow).Now})
			_, err := v.Verify(context.Background(), signed(t, s, testURL, testBody))
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Verify: %v, want %v", err, c.want)
			}
		})
	}
}

// TestSignerWithVectorKeys signs with the conformance private keys and
// verifies against the published conformance JWKs.
func TestSignerWithVectorKeys(t *testing.T) {
	keys := vectorKeys(t)
	for _, kid := range []string{"test-ed25519-webhook-2026", "test-es256-webhook-2026"} {
		t.Run(kid, func(t *testing.T) {
			var k struct {
				Kty string `json:"kty"`
				X   string `json:"x"`
				Y   string `json:"y"`
				D   string `json:"_private_d_for_test_only"`
			}
			if err := json.Unmarshal(keys[kid], &k); err != nil {
				t.Fatal(err)
			}
			d, _ := base64.RawURLEncoding.DecodeString(k.D)
			s := &RFC9421Signer{KeyID: kid, Now: clocktest.At(testNow).Now}
			if k.Kty == "OKP" {
				s.Key = ed25519.NewKeyFromSeed(d)
			} else {
				x, _ := base64.RawURLEncoding.DecodeString(k.X)
				y, _ := base64.RawURLEncoding.DecodeString(k.Y)
				key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
				if err != nil {
					t.Fatal(err)
				}
				// The public key is derived from d; it must be the vector's x, y.
				if pub, err := key.PublicKey.Bytes(); err != nil || !bytes.Equal(pub, slices.Concat([]byte{4}, x, y)) {
					t.Fatalf("public key from d = %x (%v), want the vector's x, y", pub, err)
				}
				s.Key = key
			}
			doc, _ := json.Marshal(map[string]any{"keys": []json.RawMessage{keys[kid]}})
			v := newVerifier(t, Config{JWKS: doc, Now: clocktest.At(testNow).Now})
			if _, err := v.Verify(context.Background(), signed(t, s, testURL, testBody)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPublicJWK(t *testing.T) {
	for _, alg := range []string{"ed", "es"} {
		s := testSigner(t, alg)
		raw, err := PublicJWK("kid-1", s.Key)
		if err != nil {
			t.Fatal(err)
		}
		var k map[string]any
		if err := json.Unmarshal(raw, &k); err != nil {
			t.Fatal(err)
		}
		if k["kid"] != "kid-1" || k["use"] != "sig" || k["adcp_use"] != "webhook-signing" || k["d"] != nil {
			t.Errorf("%s: %s", alg, raw)
		}
		if ops, _ := k["key_ops"].([]any); len(ops) != 1 || ops[0] != "verify" {
			t.Errorf("%s: key_ops %v", alg, k["key_ops"])
		}
		wantAlg := map[string]string{"ed": "EdDSA", "es": "ES256"}[alg]
		if k["alg"] != wantAlg {
			t.Errorf("%s: alg %v", alg, k["alg"])
		}
	}
	if _, err := PublicJWK("", newKey(t, "ed")); !errors.Is(err, ErrConfig) {
		t.Errorf("empty kid: %v", err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), strings.NewReader(strings.Repeat("x", 512)))
	if p384 != nil {
		if _, err := PublicJWK("k", p384); !errors.Is(err, ErrConfig) {
			t.Errorf("p-384: %v", err)
		}
	}
}

func TestSignerContentType(t *testing.T) {
	s := testSigner(t, "ed")
	req, _ := http.NewRequest(http.MethodPost, testURL, nil)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if err := s.Sign(req, testBody); err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get("Content-Type"); got != "application/json; charset=utf-8" {
		t.Errorf("Content-Type overwritten: %q", got)
	}
	v := newVerifier(t, Config{JWKS: jwksOf(t, s), Now: clocktest.At(testNow).Now})
	if _, err := v.Verify(context.Background(), Request{Method: "POST", URL: testURL, Header: req.Header, Body: testBody}); err != nil {
		t.Fatal(err)
	}
}

func TestNewConfig(t *testing.T) {
	s := testSigner(t, "ed")
	long := []byte("0123456789abcdef0123456789abcdef")
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"rfc9421 without keys", Config{}},
		{"rfc9421 with both", Config{JWKS: jwksOf(t, s), JWKSURL: "https://x"}},
		{"rfc9421 with secret", Config{JWKS: jwksOf(t, s), Secrets: [][]byte{long}}},
		{"bad jwks", Config{JWKS: []byte("[")}},
		{"hmac without secret", Config{Mode: ModeHMAC}},
		{"hmac short secret", Config{Mode: ModeHMAC, Secrets: [][]byte{long[:31]}}},
		{"hmac with keys", Config{Mode: ModeHMAC, Secrets: [][]byte{long}, JWKSURL: "https://x"}},
		{"bearer repeated byte", Config{Mode: ModeBearer, Secrets: [][]byte{bytes.Repeat([]byte{'a'}, 40)}}},
		{"unknown mode", Config{Mode: 7}},
	} {
		if _, err := New(c.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", c.name, err)
		}
	}
}

func TestLegacyModeMismatch(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	signedReq := signed(t, testSigner(t, "ed"), testURL, testBody)
	hmacReq, _ := http.NewRequest(http.MethodPost, testURL, nil)
	if err := (&HMACSigner{Secret: secret, Now: clocktest.At(testNow).Now}).Sign(hmacReq, testBody); err != nil {
		t.Fatal(err)
	}
	h := newVerifier(t, Config{Mode: ModeHMAC, Secrets: [][]byte{secret}, Now: clocktest.At(testNow).Now})
	b := newVerifier(t, Config{Mode: ModeBearer, Secrets: [][]byte{secret}, Now: clocktest.At(testNow).Now})
	bearer := http.Header{"Authorization": {"Bearer " + string(secret)}}
	for _, c := range []struct {
		name string
		v    *Verifier
		h    http.Header
	}{
		{"rfc9421 to hmac", h, signedReq.Header},
		{"bearer to hmac", h, bearer},
		{"rfc9421 to bearer", b, signedReq.Header},
		{"hmac to bearer", b, hmacReq.Header},
	} {
		_, err := c.v.Verify(context.Background(), Request{Method: "POST", URL: testURL, Header: c.h, Body: testBody})
		if !errors.Is(err, ErrModeMismatch) || Code(err) != "webhook_mode_mismatch" {
			t.Errorf("%s: %v, want ErrModeMismatch", c.name, err)
		}
	}
}

func TestRevocation(t *testing.T) {
	s := testSigner(t, "ed")
	for _, c := range []struct {
		name string
		rl   *RevocationList
		want error
	}{
		{"not revoked", &RevocationList{KeyIDs: []string{"other"}, UpdatedAt: testNow, MaxAge: time.Hour, Now: clocktest.At(testNow).Now}, nil},
		{"revoked", &RevocationList{KeyIDs: []string{s.KeyID}, Now: clocktest.At(testNow).Now}, ErrKeyRevoked},
		{"stale", &RevocationList{UpdatedAt: testNow.Add(-2 * time.Hour), MaxAge: time.Hour, Now: clocktest.At(testNow).Now}, ErrRevocationStale},
	} {
		v := newVerifier(t, Config{JWKS: jwksOf(t, s), Now: clocktest.At(testNow).Now, Revocations: c.rl})
		_, err := v.Verify(context.Background(), signed(t, s, testURL, testBody))
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestCodes(t *testing.T) {
	for _, c := range codes {
		wrapped := errors.Join(errors.New("context"), c.err)
		if Code(wrapped) != c.code {
			t.Errorf("Code(%v) = %q, want %q", c.err, Code(wrapped), c.code)
		}
		if got, want := WWWAuthenticate(c.err), `Signature error="`+c.code+`"`; got != want {
			t.Errorf("WWWAuthenticate = %q, want %q", got, want)
		}
	}
	for _, err := range []error{nil, ErrKeysUnavailable, ErrConfig, context.Canceled} {
		if Code(err) != "" || WWWAuthenticate(err) != "" {
			t.Errorf("Code(%v) = %q, want empty", err, Code(err))
		}
	}
	if ModeHMAC.String() != "hmac-sha256" || Mode(9).String() != "mode(9)" {
		t.Error("Mode.String")
	}
}

func TestCheckJSON(t *testing.T) {
	for _, c := range []struct {
		name string
		body string
		want error
	}{
		{"object", `{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`, nil},
		{"whitespace", " \n{\"a\" : [1, 2]}\n", nil},
		{"empty object", `{}`, nil},
		{"escaped distinct keys", `{"a":1,"\u0062":2}`, nil},
		{"empty", ``, ErrBodyMalformed},
		{"array", `[{"a":1}]`, ErrBodyMalformed},
		{"scalar", `"x"`, ErrBodyMalformed},
		{"top-level duplicate", `{"status":"approved","status":"rejected"}`, ErrBodyMalformed},
		{"escaped duplicate", `{"a":1,"\u0061":2}`, ErrBodyMalformed},
		{"nested duplicate", `{"r":{"id":1,"id":2}}`, ErrBodyMalformed},
		{"array duplicate", `{"p":[{"id":1},{"id":1,"id":2}]}`, ErrBodyMalformed},
		{"three deep", `{"a":{"b":{"c":1,"c":2}}}`, ErrBodyMalformed},
		{"trailing garbage", `{"a":1}x`, ErrBodyMalformed},
		{"two values", `{"a":1}{"b":2}`, ErrBodyMalformed},
		{"truncated", `{"a":`, ErrBodyMalformed},
		{"raw control", "{\"a\":\"x\x00y\"}", ErrBodyMalformed},
		{"too deep", strings.Repeat(`{"a":`, maxJSONDepth+2) + "1" + strings.Repeat("}", maxJSONDepth+2), ErrBodyMalformed},
		{"too large", `{"a":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, ErrBodyTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckJSON([]byte(c.body))
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("CheckJSON: %v, want %v", err, c.want)
			}
		})
	}
}

func TestParseSignatureInput(t *testing.T) {
	in, err := ParseSignatureInput(`sig1=("@method" "content-digest");created=1;expires=2;nonce="n";keyid="k\"q";alg="ed25519";tag="t";x=?0;y=tok;z=1.5;w=:AAA=:, relay=();created=3`)
	if err != nil {
		t.Fatal(err)
	}
	if len(in) != 2 || in[0].Label != "sig1" || in[0].KeyID != `k"q` || in[0].Created != 1 || in[1].Created != 3 || len(in[1].Components) != 0 {
		t.Fatalf("%+v", in)
	}
	if got, want := in[0].signatureParams(), `("@method" "content-digest");created=1;expires=2;nonce="n";keyid="k\"q";alg="ed25519";tag="t";x=?0;y=tok;z=1.5;w=:AAA=:`; got != want {
		t.Errorf("signatureParams = %s", got)
	}
	for _, bad := range []string{
		``, `sig1`, `sig1=:AAAA:`, `sig1=("a" "a")`, `sig1=("a";p=1)`, `sig1=(a)`, `sig1=("a");created="1"`,
		`sig1=("a");keyid=k`, `sig1=("a"), sig1=("b")`, `sig1=("a");created=1;created=2`, `Sig1=("a")`,
		`sig1=("a"`, `sig1=("a"),`, `sig1=("a") x`, `sig1=("a");created=1234567890123456`, "sig1=(\"\x01\")",
	} {
		if _, err := ParseSignatureInput(bad); !errors.Is(err, ErrMalformedHeader) {
			t.Errorf("ParseSignatureInput(%q): %v, want ErrMalformedHeader", bad, err)
		}
	}
}

// TestVerifyDoesNotMutateRequest guards against writing into the caller's
// header slices or body (Verify is called concurrently on shared values).
func TestVerifyDoesNotMutateRequest(t *testing.T) {
	s := testSigner(t, "ed")
	req := signed(t, s, testURL, testBody)
	req.Header["Content-Type"] = []string{"  application/json  "}
	before := req.Header.Clone()
	body := bytes.Clone(req.Body)
	v := newVerifier(t, Config{JWKS: jwksOf(t, s), Now: clocktest.At(testNow).Now})
	if _, err := v.Verify(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	for k, vals := range before {
		if strings.Join(req.Header[k], "\x00") != strings.Join(vals, "\x00") {
			t.Errorf("header %s changed: %q → %q", k, vals, req.Header[k])
		}
	}
	if !bytes.Equal(body, req.Body) {
		t.Error("body changed")
	}
}

func TestJWKSRedirectRefused(t *testing.T) {
	s := testSigner(t, "ed")
	js := newJWKSServer(t, jwksOf(t, s))
	redirect := httptest.NewServer(http.RedirectHandler(js.URL, http.StatusFound))
	defer redirect.Close()
	v := newVerifier(t, Config{JWKSURL: redirect.URL, Now: clocktest.At(testNow).Now})
	if _, err := v.Verify(context.Background(), signed(t, s, testURL, testBody)); !errors.Is(err, ErrKeysUnavailable) {
		t.Fatalf("Verify: %v, want ErrKeysUnavailable", err)
	}
	if js.fetches.Load() != 0 {
		t.Error("redirect was followed")
	}
}

// TestLowercaseHeaderMap covers headers copied straight from an API Gateway
// v2 event, whose keys are lowercase.
func TestLowercaseHeaderMap(t *testing.T) {
	s := testSigner(t, "es")
	req := signed(t, s, testURL, testBody)
	lower := http.Header{}
	for k, v := range req.Header {
		lower[strings.ToLower(k)] = v
	}
	req.Header = lower
	v := newVerifier(t, Config{JWKS: jwksOf(t, s), Now: clocktest.At(testNow).Now})
	if _, err := v.Verify(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	hreq, _ := http.NewRequest(http.MethodPost, testURL, nil)
	if err := (&HMACSigner{Secret: secret, Now: clocktest.At(testNow).Now}).Sign(hreq, testBody); err != nil {
		t.Fatal(err)
	}
	hl := http.Header{"x-adcp-signature": hreq.Header["X-Adcp-Signature"], "x-adcp-timestamp": hreq.Header["X-Adcp-Timestamp"]}
	hv := newVerifier(t, Config{Mode: ModeHMAC, Secrets: [][]byte{secret}, Now: clocktest.At(testNow).Now})
	if _, err := hv.Verify(context.Background(), Request{Method: "POST", URL: testURL, Header: hl, Body: testBody}); err != nil {
		t.Fatal(err)
	}
}

func TestAllowHTTP(t *testing.T) {
	s := testSigner(t, "ed")
	req := signed(t, s, "http://buyflow.local:4566/wh", testBody)
	for _, allow := range []bool{false, true} {
		v := newVerifier(t, Config{JWKS: jwksOf(t, s), Now: clocktest.At(testNow).Now, AllowHTTP: allow})
		_, err := v.Verify(context.Background(), req)
		if allow && err != nil || !allow && !errors.Is(err, ErrTargetURIMalformed) {
			t.Errorf("AllowHTTP=%v: %v", allow, err)
		}
	}
}
