package webhookauth

import (
	"context"
	"net/http"
	"testing"

	"github.com/buyflow/buyflow/internal/clocktest"
)

// benchVerify measures a full verification. Each iteration needs a fresh
// nonce (replay protection), so requests are pre-signed outside the timer;
// the replay store is sized to hold them all.
func benchVerify(b *testing.B, alg string) {
	s := testSigner(b, alg)
	n := 0
	s.Nonce = func() string {
		n++
		return hexString([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	}
	v := newVerifier(b, Config{JWKS: jwksOf(b, s), Now: clocktest.At(testNow).Now, Replay: NewMemoryReplayStore(1<<30, clocktest.At(testNow).Now)})
	reqs := make([]Request, b.N)
	for i := range reqs {
		reqs[i] = signed(b, s, testURL, testBody)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := v.Verify(ctx, reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyRFC9421Ed25519(b *testing.B) { benchVerify(b, "ed") }

func BenchmarkVerifyRFC9421ES256(b *testing.B) { benchVerify(b, "es") }

func BenchmarkVerifyHMAC(b *testing.B) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	v := newVerifier(b, Config{Mode: ModeHMAC, Secrets: [][]byte{secret}, Now: clocktest.At(testNow).Now})
	req, _ := http.NewRequest(http.MethodPost, testURL, nil)
	if err := (&HMACSigner{Secret: secret, Now: clocktest.At(testNow).Now}).Sign(req, testBody); err != nil {
		b.Fatal(err)
	}
	r := Request{Method: "POST", URL: testURL, Header: req.Header, Body: testBody}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := v.Verify(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckJSON(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		if err := CheckJSON(testBody); err != nil {
			b.Fatal(err)
		}
	}
}
