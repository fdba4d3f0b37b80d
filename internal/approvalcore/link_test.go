package approvalcore

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/clocktest"
)

var (
	t0    = time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	key1  = bytes.Repeat([]byte{0x11}, 32)
	key2  = bytes.Repeat([]byte{0x22}, 48)
	b64k1 = base64.StdEncoding.EncodeToString(key1)
	b64k2 = base64.RawURLEncoding.EncodeToString(key2)
)

func mustKeys(t *testing.T, current string, keys map[string][]byte) KeySet {
	t.Helper()
	ks, err := NewKeySet(current, keys)
	if err != nil {
		t.Fatalf("NewKeySet: %v", err)
	}
	return ks
}

func mustSigner(t *testing.T, ks KeySet, now time.Time) *Signer {
	t.Helper()
	s, err := NewSigner(ks, clocktest.At(now).Now)
	if err != nil {
		t.Fatalf("NewSigner: %v", err)
	}
	return s
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		secret  string
		current string
		ids     []string
		wantErr string
	}{
		{name: "two keys", secret: fmt.Sprintf(`{"current":"k2","keys":{"k1":%q,"k2":%q}}`, b64k1, b64k2), current: "k2", ids: []string{"k1", "k2"}},
		{name: "not json", secret: `current=k1`, wantErr: "not a JSON object"},
		{name: "unknown field", secret: fmt.Sprintf(`{"current":"k1","keys":{"k1":%q},"extra":1}`, b64k1), wantErr: "not a JSON object"},
		{name: "trailing data", secret: fmt.Sprintf(`{"current":"k1","keys":{"k1":%q}} {}`, b64k1), wantErr: "trailing data"},
		{name: "no keys", secret: `{"current":"k1","keys":{}}`, wantErr: "no keys"},
		{name: "no current", secret: fmt.Sprintf(`{"keys":{"k1":%q}}`, b64k1), wantErr: "no current key id"},
		{name: "current not listed", secret: fmt.Sprintf(`{"current":"k9","keys":{"k1":%q}}`, b64k1), wantErr: `current key id "k9" is not among the keys`},
		{name: "short key", secret: fmt.Sprintf(`{"current":"k1","keys":{"k1":%q}}`, base64.StdEncoding.EncodeToString(make([]byte, 31))), wantErr: `key "k1" is 31 bytes, need at least 32`},
		{name: "bad base64", secret: `{"current":"k1","keys":{"k1":"%%%not-base64-SECRETVALUE%%%"}}`, wantErr: `key "k1" is not valid base64`},
		{name: "bad key id", secret: fmt.Sprintf(`{"current":"k 1","keys":{"k 1":%q}}`, b64k1), wantErr: `key id "k 1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ks, err := ParseKeys([]byte(tt.secret))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "SECRETVALUE") || strings.Contains(err.Error(), b64k1) {
					t.Fatalf("error leaks key material: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKeys: %v", err)
			}
			if ks.Current() != tt.current || strings.Join(ks.KeyIDs(), ",") != strings.Join(tt.ids, ",") {
				t.Fatalf("got current %q ids %v", ks.Current(), ks.KeyIDs())
			}
		})
	}
}

func TestKeySetNeverPrintsKeys(t *testing.T) {
	t.Parallel()
	ks := mustKeys(t, "k1", map[string][]byte{"k1": key1})
	var logBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("keys", "keys", ks)
	for _, s := range []string{fmt.Sprint(ks), fmt.Sprintf("%v %+v %#v %s", ks, ks, ks, ks), logBuf.String()} {
		if strings.Contains(s, b64k1) || strings.Contains(s, string(key1)) || strings.Contains(s, "17 17 17") {
			t.Fatalf("key material printed: %s", s)
		}
		if !strings.Contains(s, "k1") {
			t.Fatalf("key id not printed: %s", s)
		}
	}
}

func TestSignLinkShape(t *testing.T) {
	t.Parallel()
	s := mustSigner(t, mustKeys(t, "k1", map[string][]byte{"k1": key1}), t0)
	exp := t0.Add(48 * time.Hour)
	for _, base := range []string{"https://api.example.com", "https://api.example.com/", "https://x.execute-api.eu-west-1.amazonaws.com/prod/"} {
		link, err := s.Sign(base, "apr_01HZY", "U024BE7LH", exp)
		if err != nil {
			t.Fatalf("Sign(%q): %v", base, err)
		}
		u, err := url.Parse(link)
		if err != nil {
			t.Fatal(err)
		}
		wantPath := strings.TrimRight(strings.TrimPrefix(base, "https://"+u.Host), "/") + "/v1/approvals/apr_01HZY"
		if u.Path != wantPath {
			t.Errorf("path = %q, want %q", u.Path, wantPath)
		}
		if !strings.HasPrefix(u.RawQuery, "approver=U024BE7LH&exp=") || !strings.Contains(u.RawQuery, "&kid=k1&sig=") {
			t.Errorf("query = %q", u.RawQuery)
		}
		c, err := s.Verify("apr_01HZY", u.Query())
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		want := Claims{ApprovalID: "apr_01HZY", Approver: "U024BE7LH", Expires: exp, KeyID: "k1"}
		if c != want {
			t.Errorf("claims = %+v, want %+v", c, want)
		}
	}
}

func TestSignRefuses(t *testing.T) {
	t.Parallel()
	s := mustSigner(t, mustKeys(t, "k1", map[string][]byte{"k1": key1}), t0)
	tests := []struct {
		name, base, id, approver string
		exp                      time.Time
	}{
		{"relative base", "/v1", "apr1", "U1", t0.Add(time.Hour)},
		{"ftp base", "ftp://x", "apr1", "U1", t0.Add(time.Hour)},
		{"base with query", "https://x/?a=b", "apr1", "U1", t0.Add(time.Hour)},
		{"base with user", "https://u:p@x/", "apr1", "U1", t0.Add(time.Hour)},
		{"empty id", "https://x", "", "U1", t0.Add(time.Hour)},
		{"id with slash", "https://x", "a/b", "U1", t0.Add(time.Hour)},
		{"id too long", "https://x", strings.Repeat("a", MaxApprovalIDLen+1), "U1", t0.Add(time.Hour)},
		{"empty approver", "https://x", "apr1", "", t0.Add(time.Hour)},
		{"approver newline", "https://x", "apr1", "U1\nU2", t0.Add(time.Hour)},
		{"approver space", "https://x", "apr1", "a b", t0.Add(time.Hour)},
		{"expired", "https://x", "apr1", "U1", t0},
		{"expires within the current second", "https://x", "apr1", "U1", t0.Add(900 * time.Millisecond)},
		{"too far ahead", "https://x", "apr1", "U1", t0.Add(MaxLinkLifetime + time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if link, err := s.Sign(tt.base, tt.id, tt.approver, tt.exp); err == nil {
				t.Fatalf("Sign = %q, want error", link)
			}
		})
	}
}

func TestNewSignerRefuses(t *testing.T) {
	t.Parallel()
	if _, err := NewSigner(KeySet{}, time.Now); err == nil {
		t.Error("empty key set accepted")
	}
	if _, err := NewSigner(mustKeys(t, "k1", map[string][]byte{"k1": key1}), nil); err == nil {
		t.Error("nil clock accepted")
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	old := mustKeys(t, "k1", map[string][]byte{"k1": key1})
	rotated := mustKeys(t, "k2", map[string][]byte{"k1": key1, "k2": key2})
	onlyNew := mustKeys(t, "k2", map[string][]byte{"k2": key2})
	exp := t0.Add(time.Hour)

	signOld, err := mustSigner(t, old, t0).SignParams("apr1", "U1", exp)
	if err != nil {
		t.Fatal(err)
	}
	signNew, err := mustSigner(t, rotated, t0).SignParams("apr1", "U1", exp)
	if err != nil {
		t.Fatal(err)
	}
	// The MAC of a different approval under the same key, to splice in.
	otherSig, err := mustSigner(t, old, t0).SignParams("apr2", "U1", exp)
	if err != nil {
		t.Fatal(err)
	}

	with := func(base url.Values, name string, vals ...string) url.Values {
		v := url.Values{}
		for k, vs := range base {
			v[k] = append([]string(nil), vs...)
		}
		if vals == nil {
			delete(v, name)
		} else {
			v[name] = vals
		}
		return v
	}
	flipSig := func(sig string) string {
		b, _ := base64.RawURLEncoding.DecodeString(sig)
		b[0] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}

	tests := []struct {
		name    string
		keys    KeySet
		now     time.Time
		id      string
		params  url.Values
		wantErr error
	}{
		{name: "valid", keys: old, now: t0, id: "apr1", params: signOld},
		{name: "extra form fields ignored", keys: old, now: t0, id: "apr1", params: with(signOld, "decision", "approve")},
		{name: "rotation: old kid still verifies", keys: rotated, now: t0, id: "apr1", params: signOld},
		{name: "rotation: new kid verifies", keys: rotated, now: t0, id: "apr1", params: signNew},
		{name: "retired kid refused", keys: onlyNew, now: t0, id: "apr1", params: signOld, wantErr: ErrUnknownKey},
		{name: "unknown kid refused", keys: rotated, now: t0, id: "apr1", params: with(signOld, ParamKeyID, "k9"), wantErr: ErrUnknownKey},
		{name: "kid swapped to another listed key", keys: rotated, now: t0, id: "apr1", params: with(signOld, ParamKeyID, "k2"), wantErr: ErrBadSignature},
		{name: "tampered approval id", keys: old, now: t0, id: "apr2", params: signOld, wantErr: ErrBadSignature},
		{name: "tampered approver", keys: old, now: t0, id: "apr1", params: with(signOld, ParamApprover, "U2"), wantErr: ErrBadSignature},
		{name: "tampered exp", keys: old, now: t0, id: "apr1", params: with(signOld, ParamExpires, fmt.Sprint(exp.Unix()+3600)), wantErr: ErrBadSignature},
		{name: "tampered sig", keys: old, now: t0, id: "apr1", params: with(signOld, ParamSignature, flipSig(signOld.Get(ParamSignature))), wantErr: ErrBadSignature},
		{name: "sig of another approval", keys: old, now: t0, id: "apr1", params: with(signOld, ParamSignature, otherSig.Get(ParamSignature)), wantErr: ErrBadSignature},
		{name: "expired at exp", keys: old, now: exp, id: "apr1", params: signOld, wantErr: ErrExpired},
		{name: "expired after exp", keys: old, now: exp.Add(time.Hour), id: "apr1", params: signOld, wantErr: ErrExpired},
		{name: "expired and tampered is bad signature", keys: old, now: exp.Add(time.Hour), id: "apr1", params: with(signOld, ParamApprover, "U2"), wantErr: ErrBadSignature},
		{name: "one second before exp", keys: old, now: exp.Add(-time.Second), id: "apr1", params: signOld},
		{name: "missing approver", keys: old, now: t0, id: "apr1", params: with(signOld, ParamApprover), wantErr: ErrMalformed},
		{name: "missing exp", keys: old, now: t0, id: "apr1", params: with(signOld, ParamExpires), wantErr: ErrMalformed},
		{name: "missing kid", keys: old, now: t0, id: "apr1", params: with(signOld, ParamKeyID), wantErr: ErrMalformed},
		{name: "missing sig", keys: old, now: t0, id: "apr1", params: with(signOld, ParamSignature), wantErr: ErrMalformed},
		{name: "empty sig", keys: old, now: t0, id: "apr1", params: with(signOld, ParamSignature, ""), wantErr: ErrMalformed},
		{name: "repeated approver", keys: old, now: t0, id: "apr1", params: with(signOld, ParamApprover, "U1", "U2"), wantErr: ErrMalformed},
		{name: "exp with plus sign", keys: old, now: t0, id: "apr1", params: with(signOld, ParamExpires, "+"+signOld.Get(ParamExpires)), wantErr: ErrMalformed},
		{name: "exp with leading zero", keys: old, now: t0, id: "apr1", params: with(signOld, ParamExpires, "0"+signOld.Get(ParamExpires)), wantErr: ErrMalformed},
		{name: "exp not a number", keys: old, now: t0, id: "apr1", params: with(signOld, ParamExpires, "tomorrow"), wantErr: ErrMalformed},
		{name: "exp negative", keys: old, now: t0, id: "apr1", params: with(signOld, ParamExpires, "-5"), wantErr: ErrMalformed},
		{name: "sig padded", keys: old, now: t0, id: "apr1", params: with(signOld, ParamSignature, signOld.Get(ParamSignature)+"="), wantErr: ErrMalformed},
		{name: "sig std alphabet", keys: old, now: t0, id: "apr1", params: with(signOld, ParamSignature, "+/"+signOld.Get(ParamSignature)[2:]), wantErr: ErrMalformed},
		{name: "sig truncated", keys: old, now: t0, id: "apr1", params: with(signOld, ParamSignature, signOld.Get(ParamSignature)[:40]), wantErr: ErrMalformed},
		{name: "kid with slash", keys: old, now: t0, id: "apr1", params: with(signOld, ParamKeyID, "../k1"), wantErr: ErrMalformed},
		{name: "approver with newline", keys: old, now: t0, id: "apr1", params: with(signOld, ParamApprover, "U1\nx"), wantErr: ErrMalformed},
		{name: "bad approval id", keys: old, now: t0, id: "apr1/../x", params: signOld, wantErr: ErrMalformed},
		{name: "no params", keys: old, now: t0, id: "apr1", params: url.Values{}, wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := mustSigner(t, tt.keys, tt.now).Verify(tt.id, tt.params)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Verify err = %v, want %v", err, tt.wantErr)
			}
			switch {
			case err == nil || errors.Is(err, ErrExpired):
				if c.ApprovalID != tt.id || c.Approver != tt.params.Get(ParamApprover) || !c.Expires.Equal(exp) {
					t.Errorf("claims = %+v", c)
				}
			default:
				if c != (Claims{}) {
					t.Errorf("claims on error = %+v, want zero", c)
				}
				if sig := tt.params.Get(ParamSignature); sig != "" && strings.Contains(err.Error(), sig) {
					t.Errorf("error leaks signature: %v", err)
				}
			}
		})
	}
}

// TestCanonicalUnambiguous checks that moving bytes between fields changes
// the signed string, which a plain separator-joined string would not.
func TestCanonicalUnambiguous(t *testing.T) {
	t.Parallel()
	a := canonical("ab", "c", 1, "k")
	b := canonical("a", "bc", 1, "k")
	c := canonical("a", "b", 11, "k")
	d := canonical("a", "b1", 1, "k")
	seen := map[string]bool{}
	for _, x := range [][]byte{a, b, c, d} {
		if seen[string(x)] {
			t.Fatalf("canonical collision: %q", x)
		}
		seen[string(x)] = true
	}
}

func TestSignParamsMatchesLink(t *testing.T) {
	t.Parallel()
	s := mustSigner(t, mustKeys(t, "k1", map[string][]byte{"k1": key1}), t0)
	p, err := s.SignParams("apr1", "alice@example.com", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	link, err := s.Sign("https://x", "apr1", "alice@example.com", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(link, "?"+p.Encode()) {
		t.Fatalf("link %q does not end with %q", link, p.Encode())
	}
}
