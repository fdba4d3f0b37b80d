package approvalcore

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run go test -update to accept):\n%s", path, got)
	}
}

func signedFixture(t *testing.T) url.Values {
	t.Helper()
	p, err := mustSigner(t, mustKeys(t, "k1", map[string][]byte{"k1": key1}), t0).SignParams("apr1", "alice", t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkPage asserts what every page must have: accessibility scaffolding and
// no script, no external asset.
func checkPage(t *testing.T, html string) {
	t.Helper()
	for _, want := range []string{`<!DOCTYPE html>`, `<html lang="en">`, `<meta charset="utf-8">`,
		`<meta name="viewport" content="width=device-width, initial-scale=1">`, `<title>`, `<main>`, `</main>`, `<h1>`} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Only real tags count: escaped user text (&lt;script&gt;) is harmless.
	for _, tag := range tagRE.FindAllString(strings.ToLower(html), -1) {
		if m := badTagRE.FindString(tag); m != "" {
			t.Errorf("page has %q in tag %s", m, tag)
		}
	}
}

var (
	tagRE    = regexp.MustCompile(`<[^>]*>`)
	badTagRE = regexp.MustCompile(`^<(script|link|img|iframe|object|embed|base|svg)\b|\s(src|href|on[a-z]+)=|javascript:|https?://`)
)

func TestRenderConfirmGolden(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	err := RenderConfirm(&buf, ConfirmPage{Approval: pendingApproval(), Approver: "alice", Signed: signedFixture(t)})
	if err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	checkPage(t, html)
	golden(t, "confirm.golden.html", buf.Bytes())

	for _, want := range []string{
		"Q1 video campaign, 3 packages", "Example Sports Network", "USD 12,500.00",
		"The amount is over the approval threshold set by policy.", "Budget over USD 10,000.00",
		"rita asks you to approve", `<time datetime="2026-12-01T05:00:00Z">2026-12-01 05:00 UTC</time>`,
		`<form method="post">`,
		`<button type="submit" name="decision" value="approve"`, `<button type="submit" name="decision" value="reject"`,
		`<label for="comment">`, `<textarea id="comment" name="comment"`, "You are deciding as alice.",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("confirm page lacks %q", want)
		}
	}
	// The form carries exactly the signed parameters, so a POST verifies.
	hidden := regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`).FindAllStringSubmatch(html, -1)
	posted := url.Values{}
	for _, h := range hidden {
		posted.Add(h[1], h[2])
	}
	if want := signedFixture(t); posted.Encode() != want.Encode() {
		t.Fatalf("hidden fields = %v, want %v", posted, want)
	}
	posted.Set("decision", "approve")
	s := mustSigner(t, mustKeys(t, "k1", map[string][]byte{"k1": key1}), t0)
	if _, err := s.Verify("apr1", posted); err != nil {
		t.Fatalf("posted form does not verify: %v", err)
	}
}

func TestRenderConfirmEscapes(t *testing.T) {
	t.Parallel()
	a := pendingApproval()
	a.Summary = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	a.Seller = `Evil "Seller" & <b>Co</b>`
	a.ReasonText = `</dd><script>steal()</script>`
	a.Requester = `<svg onload=alert(1)>`
	var buf bytes.Buffer
	err := RenderConfirm(&buf, ConfirmPage{
		Approval: a, Approver: "alice", Signed: signedFixture(t),
		Action: "javascript:alert(1)", Error: "<i>bad</i>", Comment: "</textarea><script>x()</script>",
	})
	if err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	checkPage(t, html)
	for _, want := range []string{
		`&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;`,
		`Evil &#34;Seller&#34; &amp; &lt;b&gt;Co&lt;/b&gt;`,
		`&lt;/dd&gt;&lt;script&gt;steal()&lt;/script&gt;`,
		`&lt;/textarea&gt;&lt;script&gt;x()&lt;/script&gt;</textarea>`,
		`&lt;i&gt;bad&lt;/i&gt;`,
		`action="#ZgotmplZ"`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("escaped page lacks %q", want)
		}
	}
}

func TestRenderConfirmAction(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := RenderConfirm(&buf, ConfirmPage{Approval: pendingApproval(), Approver: "alice", Signed: signedFixture(t), Action: "/prod/v1/approvals/apr1"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `<form method="post" action="/prod/v1/approvals/apr1">`) {
		t.Fatalf("no form action in:\n%s", buf.String())
	}
}

func TestRenderConfirmNeedsSignedParams(t *testing.T) {
	t.Parallel()
	for _, name := range SignedParams {
		p := signedFixture(t)
		p.Del(name)
		if err := RenderConfirm(&bytes.Buffer{}, ConfirmPage{Approval: pendingApproval(), Approver: "alice", Signed: p}); err == nil {
			t.Errorf("rendered a form without %s", name)
		}
	}
}

func TestRenderResultGolden(t *testing.T) {
	t.Parallel()
	at := t0.Add(2 * time.Hour)
	tests := []struct {
		page   ResultPage
		status int
		line   string
	}{
		{ResultPage{Kind: PageApproved, By: "alice", At: at, Summary: "Q1 video", Comment: "go"}, http.StatusOK, "Approved by alice at 2026-11-30 07:00 UTC."},
		{ResultPage{Kind: PageRejected, By: "bob", At: at}, http.StatusOK, "Rejected by bob at 2026-11-30 07:00 UTC."},
		{ResultPage{Kind: PageAlreadyApproved, By: "bob", At: at}, http.StatusConflict, "Already approved by bob at 2026-11-30 07:00 UTC."},
		{ResultPage{Kind: PageAlreadyRejected, By: "bob", At: at}, http.StatusConflict, "Already rejected by bob at 2026-11-30 07:00 UTC."},
		{ResultPage{Kind: PageExpired, At: at}, http.StatusGone, "Expired at 2026-11-30 07:00 UTC."},
		{ResultPage{Kind: PageInvalidLink}, http.StatusForbidden, "This link is not valid."},
		{ResultPage{Kind: PageSelfApproval}, http.StatusForbidden, "You cannot approve your own request."},
		{ResultPage{Kind: PageNotApprover}, http.StatusForbidden, "You are not an approver of this request."},
		{ResultPage{Kind: PageBadRequest, Detail: "Choose Approve or Reject."}, http.StatusBadRequest, "Choose Approve or Reject."},
		{ResultPage{Kind: PageUnavailable}, http.StatusInternalServerError, "Something went wrong on our side."},
	}
	for _, tt := range tests {
		t.Run(string(tt.page.Kind), func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			if err := RenderResult(&buf, tt.page); err != nil {
				t.Fatal(err)
			}
			checkPage(t, buf.String())
			if !strings.Contains(buf.String(), "<p>"+tt.line+"</p>") {
				t.Errorf("page lacks %q:\n%s", tt.line, buf.String())
			}
			if got := tt.page.StatusCode(); got != tt.status {
				t.Errorf("StatusCode = %d, want %d", got, tt.status)
			}
			if strings.Contains(buf.String(), "<form") {
				t.Error("result page has a form")
			}
			golden(t, "result_"+string(tt.page.Kind)+".golden.html", buf.Bytes())
		})
	}
}

func TestRenderResultEscapes(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := ResultPage{Kind: PageApproved, By: "<script>x</script>", At: t0, Summary: "<script>y</script>", Comment: "<b>z</b>"}
	if err := RenderResult(&buf, p); err != nil {
		t.Fatal(err)
	}
	checkPage(t, buf.String())
	if !strings.Contains(buf.String(), "Approved by &lt;script&gt;x&lt;/script&gt;") {
		t.Fatalf("not escaped:\n%s", buf.String())
	}
}

func TestResultFromOutcomeAndError(t *testing.T) {
	t.Parallel()
	a := pendingApproval()
	tests := []struct {
		name string
		got  ResultPage
		want PageKind
	}{
		{"decided approve", ResultFromOutcome(Outcome{Result: ResultDecided, Status: StatusApproved, By: "alice", At: t0}, a), PageApproved},
		{"decided reject", ResultFromOutcome(Outcome{Result: ResultDecided, Status: StatusRejected, By: "alice", At: t0}, a), PageRejected},
		{"already approved", ResultFromOutcome(Outcome{Result: ResultAlreadyDecided, Status: StatusApproved, By: "bob", At: t0}, a), PageAlreadyApproved},
		{"already rejected", ResultFromOutcome(Outcome{Result: ResultAlreadyDecided, Status: StatusRejected, By: "bob", At: t0}, a), PageAlreadyRejected},
		{"expired", ResultFromOutcome(Outcome{Result: ResultExpired, Status: StatusExpired, At: t0}, a), PageExpired},
		{"pending is not a result", ResultFromOutcome(Outcome{Result: ResultPending}, a), PageBadRequest},
		{"link expired", ResultFromError(ErrExpired, t0), PageExpired},
		{"bad signature", ResultFromError(ErrBadSignature, time.Time{}), PageInvalidLink},
		{"unknown key", ResultFromError(ErrUnknownKey, time.Time{}), PageInvalidLink},
		{"malformed", ResultFromError(fmt.Errorf("%w: sig", ErrMalformed), time.Time{}), PageInvalidLink},
		{"wrong approval", ResultFromError(ErrWrongApproval, time.Time{}), PageInvalidLink},
		{"self", ResultFromError(ErrSelfApproval, time.Time{}), PageSelfApproval},
		{"not approver", ResultFromError(ErrNotApprover, time.Time{}), PageNotApprover},
		{"comment", ResultFromError(ErrCommentTooLong, time.Time{}), PageBadRequest},
		{"form", ResultFromError(ErrBadForm, time.Time{}), PageBadRequest},
		{"inconsistent item", ResultFromError(ErrInvalidState, time.Time{}), PageUnavailable},
		{"other", ResultFromError(errors.New("boom"), time.Time{}), PageUnavailable},
	}
	for _, tt := range tests {
		if tt.got.Kind != tt.want {
			t.Errorf("%s: kind = %q, want %q", tt.name, tt.got.Kind, tt.want)
		}
	}
	if p := ResultFromError(ErrExpired, t0); !p.At.Equal(t0) {
		t.Errorf("expired page lost its time: %+v", p)
	}
	var buf bytes.Buffer
	if err := RenderResult(&buf, ResultFromError(errors.New("db password is hunter2"), time.Time{})); err != nil || strings.Contains(buf.String(), "hunter2") {
		t.Errorf("internal error text reached the page (%v)", err)
	}
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	h := SecurityHeaders()
	csp := h["Content-Security-Policy"]
	for _, want := range []string{"default-src 'none'", "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'", "style-src 'sha256-"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	for k, want := range map[string]string{
		"Referrer-Policy": "no-referrer", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
		"Content-Type": "text/html; charset=utf-8", "X-Frame-Options": "DENY",
	} {
		if h[k] != want {
			t.Errorf("%s = %q, want %q", k, h[k], want)
		}
	}
	// The hash in the CSP must match the style the pages actually carry.
	var buf bytes.Buffer
	if err := RenderResult(&buf, ResultPage{Kind: PageInvalidLink}); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(buf.String())
	if m == nil {
		t.Fatal("no <style> in page")
	}
	sum := sha256.Sum256([]byte(m[1]))
	if want := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, want) {
		t.Errorf("CSP %q does not allow the page's style (%s)", csp, want)
	}
	h["Cache-Control"] = "public"
	if SecurityHeaders()["Cache-Control"] != "no-store" {
		t.Error("SecurityHeaders returns a shared map")
	}
}

func TestRenderMessageEscapes(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := RenderMessage(&buf, "Recorded, <b>late</b>", `x "y" & z`, "hint"); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	checkPage(t, html)
	for _, want := range []string{"<title>Recorded, &lt;b&gt;late&lt;/b&gt; · buyflow</title>", "<p>x &#34;y&#34; &amp; z</p>", `<p class="note">hint</p>`} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q:\n%s", want, html)
		}
	}
}

// A campaign's confirm page lists every leg (seller, PO, why, governance, amount) with the
// total, names the campaign, and escapes what sellers and governance wrote.
func TestConfirmPageOfACampaign(t *testing.T) {
	a := Approval{
		ID: "apr1", OperationID: "cp-1", Approvers: []string{"alice"}, Requester: "bob", Reason: ReasonCampaignLegs,
		Summary: "Campaign spring, 2 legs", Seller: "2 sellers", Amount: Money{Minor: 3000050, Currency: "USD"},
		Status: StatusPending, ExpiresAt: t0.Add(time.Hour),
		Legs: []Leg{
			{OperationID: "mb-a", Seller: "seller-a", PONumber: "PO-A", Amount: Money{Minor: 2000050, Currency: "USD"},
				Why: "the budget is over the threshold", Governance: Verdict{Verdict: "approved"}},
			{OperationID: "mb-b", Seller: "<seller-b>", PONumber: "PO-B", Amount: Money{Minor: 1000000, Currency: "USD"},
				Why: "no approval needed on its own", Governance: Verdict{Verdict: "conditions",
					Conditions: []Condition{{Field: "brand_safety", Reason: "check <b>", NeedsPerson: true}}}},
		},
	}
	var b bytes.Buffer
	if err := RenderConfirm(&b, ConfirmPage{Approval: a, Approver: "alice", Signed: signedFixture(t)}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	checkPage(t, html)
	for _, want := range []string{
		"<h1>Approve a campaign?</h1>", "asks you to approve this campaign.", "<dt>Sellers</dt>", "2 legs</caption>",
		"seller-<wbr>a", "PO-<wbr>A", "USD 20,000.50", "the budget is over the threshold", "Approved",
		"&lt;seller-<wbr>b&gt;", "check &lt;b&gt; (needs your judgement)", "USD 10,000.00",
		`<th scope="row" colspan="4">Total</th><td class="num">USD 30,000.50</td>`, "Approve this campaign", "Reject this campaign",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("campaign page lacks %q", want)
		}
	}
	if strings.Contains(html, "<seller-b>") || strings.Contains(html, "Approve a media buy") {
		t.Error("campaign page shows raw seller text or calls itself a media buy")
	}
}
