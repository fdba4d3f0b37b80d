package approvalcore

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseDecisionForm(t *testing.T) {
	t.Parallel()
	signed := signedFixture(t)
	body := func(extra url.Values) string {
		v := url.Values{}
		for k, vs := range signed {
			v[k] = vs
		}
		for k, vs := range extra {
			v[k] = vs
		}
		return v.Encode()
	}
	const form = "application/x-www-form-urlencoded"
	tests := []struct {
		name        string
		body        string
		contentType string
		want        DecisionRequest
		wantErr     bool
	}{
		{name: "approve with comment", body: body(url.Values{"decision": {"approve"}, "comment": {"Fine <b>by</b> me\r\nthanks"}}), contentType: form,
			want: DecisionRequest{Decision: DecisionApprove, Comment: "Fine <b>by</b> me\r\nthanks"}},
		{name: "reject, charset given", body: body(url.Values{"decision": {"reject"}}), contentType: "application/x-www-form-urlencoded; charset=UTF-8",
			want: DecisionRequest{Decision: DecisionReject}},
		{name: "unknown decision is left for Decide", body: body(url.Values{"decision": {"yes"}}), contentType: form,
			want: DecisionRequest{Decision: "yes"}},
		{name: "json refused", body: `{"decision":"approve"}`, contentType: "application/json", wantErr: true},
		{name: "multipart refused", body: "x", contentType: "multipart/form-data; boundary=x", wantErr: true},
		{name: "no content type", body: body(nil), contentType: "", wantErr: true},
		{name: "latin-1 refused", body: body(nil), contentType: form + "; charset=iso-8859-1", wantErr: true},
		{name: "too large", body: body(url.Values{"comment": {strings.Repeat("a", MaxFormBytes)}}), contentType: form, wantErr: true},
		{name: "bad escape", body: "decision=%zz", contentType: form, wantErr: true},
		{name: "semicolon separator", body: "decision=approve;comment=x", contentType: form, wantErr: true},
		{name: "two decisions", body: body(url.Values{"decision": {"approve", "reject"}}), contentType: form, wantErr: true},
		{name: "two comments", body: body(url.Values{"comment": {"a", "b"}}), contentType: form, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, vals, err := ParseDecisionForm([]byte(tt.body), tt.contentType)
			if tt.wantErr {
				if !errors.Is(err, ErrBadForm) {
					t.Fatalf("err = %v, want ErrBadForm", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("request = %+v, want %+v", got, tt.want)
			}
			for _, name := range SignedParams {
				if vals.Get(name) != signed.Get(name) {
					t.Errorf("%s = %q, want %q", name, vals.Get(name), signed.Get(name))
				}
			}
		})
	}
}

// TestPostFlow goes link → GET params → form → POST → Verify → Decide, the
// way the approve Lambda will.
func TestPostFlow(t *testing.T) {
	t.Parallel()
	s := mustSigner(t, mustKeys(t, "k1", map[string][]byte{"k1": key1}), t0)
	link, err := s.Sign("https://api.example.com", "apr1", "alice", t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	claims, err := s.Verify("apr1", u.Query())
	if err != nil {
		t.Fatal(err)
	}
	post := u.Query()
	post.Set("decision", "approve")
	post.Set("comment", "ok")
	d, vals, err := ParseDecisionForm([]byte(post.Encode()), "application/x-www-form-urlencoded")
	if err != nil {
		t.Fatal(err)
	}
	c2, err := s.Verify("apr1", vals)
	if err != nil || c2 != claims {
		t.Fatalf("Verify(posted) = %+v, %v", c2, err)
	}
	d.ApprovalID, d.Approver = "apr1", c2.Approver
	o, err := Decide(pendingApproval(), d, t0)
	if err != nil || o.Result != ResultDecided || o.Status != StatusApproved || !o.Record {
		t.Fatalf("Decide = %+v, %v", o, err)
	}
	if p := ResultFromOutcome(o, pendingApproval()); p.Kind != PageApproved || p.By != "alice" {
		t.Fatalf("page = %+v", p)
	}
}
