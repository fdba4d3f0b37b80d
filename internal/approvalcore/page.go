package approvalcore

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// pageCSS is the only style on the pages. It is inlined and allowed by hash in
// SecurityHeaders, so it is written byte for byte.
const pageCSS = `
:root{color-scheme:light;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;line-height:1.5;color:#1a1a1a;background:#f4f4f5}
body{margin:0;padding:1rem}
main{max-width:40rem;margin:0 auto;background:#fff;border:1px solid #d4d4d8;border-radius:.5rem;padding:1.5rem}
h1{font-size:1.5rem;margin:0 0 .75rem}
dl{display:grid;grid-template-columns:minmax(8rem,max-content) 1fr;gap:.5rem 1rem;margin:1rem 0}
dt{font-weight:600}
dd{margin:0;overflow-wrap:anywhere;white-space:pre-wrap}
label{display:block;font-weight:600;margin-top:1rem}
textarea{box-sizing:border-box;width:100%;font:inherit;padding:.5rem;border:1px solid #52525b;border-radius:.25rem}
.hint,.note{color:#3f3f46;font-size:.9rem}
.actions{display:flex;flex-wrap:wrap;gap:.75rem;margin-top:1rem}
button{font:inherit;font-weight:600;padding:.6rem 1.2rem;border:0;border-radius:.25rem;color:#fff;cursor:pointer}
button.approve{background:#146c2e}
button.reject{background:#a4161a}
button:focus-visible,textarea:focus-visible{outline:3px solid #1d4ed8;outline-offset:2px}
.error{border-left:4px solid #a4161a;padding:.5rem .75rem;background:#fef2f2}
h2{font-size:1.15rem;margin:1.5rem 0 .5rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0}
caption{text-align:left;font-size:.9rem;color:#3f3f46;padding-bottom:.25rem}
th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid #d4d4d8;vertical-align:top;overflow-wrap:break-word}
td.num,th.num{text-align:right;white-space:nowrap}
.d{white-space:nowrap}
tfoot th,tfoot td{border-bottom:0;border-top:2px solid #52525b;font-weight:600}
ul.conditions{margin:.25rem 0;padding-left:1.25rem}
@media (max-width:30rem){dl{grid-template-columns:1fr}dd{margin-bottom:.5rem}button{width:100%}main{padding:1rem}th,td{padding:.35rem .25rem;font-size:.9rem}}
`

// The pages are written with a few string writers and one escaper instead of html/template:
// html/template's reflection (MethodByName) makes the linker keep every exported method of
// every type in the binary, which grows the approve bootstrap from ~10 to ~16 MB. Every value
// that is not a constant goes through esc (the same replacements html/template's HTML escaper
// makes) and the form target through safeAction.

var escaper = strings.NewReplacer(
	"\x00", "\uFFFD", `"`, "&#34;", "&", "&amp;", "'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;",
)

// esc escapes s for HTML text and quoted attribute values.
func esc(s string) string { return escaper.Replace(s) }

// safeAction allows a same-origin path as the form target; anything else (a scheme such as
// javascript:, a protocol-relative //host) becomes html/template's inert "#ZgotmplZ".
func safeAction(a string) string {
	if !strings.HasPrefix(a, "/") || strings.HasPrefix(a, "//") {
		return "#ZgotmplZ"
	}
	for _, r := range a {
		if r <= ' ' || r == '"' || r == '\'' || r == '<' || r == '>' || r == '\\' || r >= 0x7f {
			return "#ZgotmplZ"
		}
	}
	return esc(a)
}

func writeLayout(w io.Writer, title string, body func(b *strings.Builder)) error {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<meta name=\"robots\" content=\"noindex, nofollow\">\n<meta name=\"referrer\" content=\"no-referrer\">\n")
	b.WriteString("<title>" + esc(title) + " · buyflow</title>\n<style>" + pageCSS + "</style>\n</head>\n<body>\n<main>\n")
	body(&b)
	b.WriteString("\n</main>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

var (
	styleHash = func() string {
		sum := sha256.Sum256([]byte(pageCSS))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}()
)

// SecurityHeaders returns the response headers every approval page must be
// served with: a CSP that allows nothing but the page's own inline style (by
// hash) and posting the form to the same origin, no framing, no referrer (the
// link's signature is in the query string), no caching and no sniffing. The
// map is fresh on every call.
func SecurityHeaders() map[string]string {
	return map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": "default-src 'none'; style-src " + styleHash + "; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "no-store",
		"X-Content-Type-Options":  "nosniff",
		"X-Frame-Options":         "DENY",
		"X-Robots-Tag":            "noindex, nofollow",
	}
}

// ConfirmPage is the data for the page a GET of a valid link shows.
type ConfirmPage struct {
	// Approval is what is being approved.
	Approval Approval
	// Approver is the verified approver the link is bound to.
	Approver string
	// Signed holds the link's verified query parameters; approver, exp, kid
	// and sig are posted back as hidden fields.
	Signed url.Values
	// Action is the form's target. Empty posts back to the page's own URL
	// (query included), which is what a link behind any stage prefix wants.
	Action string
	// Error, if set, is shown above the form (e.g. the comment was too long).
	Error string
	// Comment refills the comment box after an error.
	Comment string
}

type hiddenField struct{ Name, Value string }

// RenderConfirm writes the confirm page. It refuses to render a form that
// could not be posted: every signed parameter must be present once.
func RenderConfirm(w io.Writer, p ConfirmPage) error {
	hidden := make([]hiddenField, 0, len(SignedParams))
	for _, name := range SignedParams {
		v := p.Signed[name]
		if len(v) != 1 || v[0] == "" {
			return fmt.Errorf("approval page: signed parameter %s missing", name)
		}
		hidden = append(hidden, hiddenField{name, v[0]})
	}
	a := p.Approval
	title := "Approve a " + a.Subject() + "?"
	return writeLayout(w, title, func(b *strings.Builder) {
		b.WriteString("<h1>" + esc(title) + "</h1>\n")
		b.WriteString("<p>" + esc(a.Requester) + " asks you to approve this " + esc(a.Subject()) + ".</p>\n<dl>\n")
		b.WriteString("<dt>What</dt><dd>" + esc(a.Summary) + "</dd>\n")
		seller := "Seller"
		if a.IsCampaign() {
			seller = "Sellers"
		}
		b.WriteString("<dt>" + seller + "</dt><dd>" + esc(a.Seller) + "</dd>\n")
		b.WriteString("<dt>" + a.AmountLabel() + "</dt><dd>" + esc(a.Amount.String()) + "</dd>\n")
		b.WriteString("<dt>Why approval is needed</dt><dd>" + esc(a.Reason.Label()))
		if a.ReasonText != "" {
			b.WriteString("\n" + esc(a.ReasonText))
		}
		b.WriteString("</dd>\n")
		b.WriteString("<dt>Requested by</dt><dd>" + esc(a.Requester) + "</dd>\n")
		b.WriteString("<dt>Decide before</dt><dd><time datetime=\"" + esc(a.ExpiresAt.UTC().Format(time.RFC3339)) + "\">" + esc(FormatTime(a.ExpiresAt)) + "</time></dd>\n")
		b.WriteString("<dt>Reference</dt><dd>" + esc(a.OperationID) + "</dd>\n</dl>\n")
		if a.IsCampaign() {
			writeLegs(b, a)
		} else {
			writePurchase(b, a)
		}
		if p.Error != "" {
			b.WriteString("<p class=\"error\" role=\"alert\">" + esc(p.Error) + "</p>\n")
		}
		b.WriteString("<form method=\"post\"")
		if p.Action != "" {
			b.WriteString(" action=\"" + safeAction(p.Action) + "\"")
		}
		b.WriteString(">\n")
		for _, h := range hidden {
			b.WriteString("<input type=\"hidden\" name=\"" + esc(h.Name) + "\" value=\"" + esc(h.Value) + "\">\n")
		}
		maxLen := strconv.Itoa(MaxCommentRunes)
		b.WriteString("<label for=\"comment\">Comment (optional)</label>\n")
		b.WriteString("<textarea id=\"comment\" name=\"comment\" rows=\"4\" maxlength=\"" + maxLen + "\" aria-describedby=\"comment-hint\">" + esc(p.Comment) + "</textarea>\n")
		b.WriteString("<p id=\"comment-hint\" class=\"hint\">Up to " + maxLen + " characters. It is kept in the audit log with your decision.</p>\n")
		b.WriteString("<div class=\"actions\">\n")
		b.WriteString("<button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\">Approve this " + a.decided() + "</button>\n")
		b.WriteString("<button type=\"submit\" name=\"decision\" value=\"reject\" class=\"reject\">Reject this " + a.decided() + "</button>\n")
		b.WriteString("</div>\n</form>\n")
		b.WriteString("<p class=\"note\">You are deciding as " + esc(p.Approver) + ". Nothing changes until you press Approve or Reject.</p>\n")
	})
}

// writePurchase writes what is bought (one table row per package, long lists folded, the
// total) and what governance said, each under its own heading.
func writePurchase(b *strings.Builder, a Approval) {
	pu := a.Purchase
	if pu.Change != nil {
		writeChange(b, *pu.Change)
		writeGovernance(b, pu.Governance)
		return
	}
	b.WriteString("<section aria-labelledby=\"bought\">\n<h2 id=\"bought\">What is bought</h2>\n")
	if f := pu.Flight(); f != "" {
		b.WriteString("<p>Flight: " + esc(f) + "</p>\n")
	}
	if pu.ProposalID != "" && len(pu.Packages) == 0 {
		b.WriteString("<p>The seller's proposal " + esc(pu.ProposalID) + ", for " + esc(a.Amount.String()) + " in total.</p>\n")
	}
	if len(pu.Packages) > 0 {
		shown, folded := pu.Shown()
		n := strconv.Itoa(len(pu.Packages))
		b.WriteString("<table>\n<caption>" + n + " package" + plural(len(pu.Packages)) + " from " + esc(a.Seller) + "</caption>\n")
		b.WriteString("<thead><tr><th scope=\"col\">Product</th><th scope=\"col\">Flight</th><th scope=\"col\" class=\"num\">Budget</th></tr></thead>\n<tbody>\n")
		for _, pk := range shown {
			b.WriteString("<tr><td>" + breakable(pk.Product) + "</td><td>" + flightHTML(pk.Start, pk.End) + "</td><td class=\"num\">" + esc(pk.Budget.String()) + "</td></tr>\n")
		}
		if folded > 0 {
			b.WriteString("<tr><td colspan=\"2\">and " + strconv.Itoa(folded) + " more packages</td><td class=\"num\">" + esc(pu.Folded().String()) + "</td></tr>\n")
		}
		b.WriteString("</tbody>\n<tfoot><tr><th scope=\"row\" colspan=\"2\">Total</th><td class=\"num\">" + esc(a.Amount.String()) + "</td></tr></tfoot>\n</table>\n")
	}
	b.WriteString("</section>\n")
	writeGovernance(b, pu.Governance)
}

// writeGovernance writes what governance said, under its own heading, when it was recorded.
func writeGovernance(b *strings.Builder, g Verdict) {
	if g.Verdict == "" {
		return
	}
	b.WriteString("<section aria-labelledby=\"governance\">\n<h2 id=\"governance\">What governance said</h2>\n")
	b.WriteString("<p>" + esc(g.Label()) + "</p>\n")
	if len(g.Conditions) > 0 {
		b.WriteString("<ul class=\"conditions\" aria-label=\"Governance conditions\">\n")
		for _, c := range g.Conditions {
			b.WriteString("<li><strong>" + esc(c.Field) + "</strong>")
			if c.Reason != "" {
				b.WriteString(": " + esc(c.Reason))
			}
			if c.NeedsPerson {
				b.WriteString(" (needs your judgement)")
			}
			b.WriteString("</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</section>\n")
}

// writeLegs writes a campaign's legs (one row each: seller, PO number, why it asks a person,
// what governance said, its amount) and their total: the decision covers every row.
func writeLegs(b *strings.Builder, a Approval) {
	n := strconv.Itoa(len(a.Legs))
	b.WriteString("<section aria-labelledby=\"bought\">\n<h2 id=\"bought\">What is bought</h2>\n")
	b.WriteString("<p>One decision for all " + n + " legs: each is a media buy at its seller, and none is placed unless you approve.</p>\n")
	b.WriteString("<table>\n<caption>" + n + " leg" + plural(len(a.Legs)) + "</caption>\n")
	b.WriteString("<thead><tr><th scope=\"col\">Seller</th><th scope=\"col\">PO number</th><th scope=\"col\">Why</th><th scope=\"col\">Governance</th><th scope=\"col\" class=\"num\">Amount</th></tr></thead>\n<tbody>\n")
	for _, l := range a.Legs {
		b.WriteString("<tr><td>" + breakable(l.Seller) + "</td><td>" + breakable(l.PONumber) + "</td><td>" + esc(l.Why) + "</td><td>" + esc(l.Governance.Label()))
		for _, c := range l.Governance.Conditions {
			b.WriteString("<br>" + esc(c.Field))
			if c.Reason != "" {
				b.WriteString(": " + esc(c.Reason))
			}
			if c.NeedsPerson {
				b.WriteString(" (needs your judgement)")
			}
		}
		b.WriteString("</td><td class=\"num\">" + esc(l.Amount.String()) + "</td></tr>\n")
	}
	b.WriteString("</tbody>\n<tfoot><tr><th scope=\"row\" colspan=\"4\">Total</th><td class=\"num\">" + esc(a.Amount.String()) + "</td></tr></tfoot>\n</table>\n")
	b.WriteString("</section>\n")
}

// breakable escapes a product id and lets a narrow screen wrap it after its separators
// (ctv_premium_sports) rather than inside a word.
func breakable(s string) string {
	return strings.NewReplacer("_", "_<wbr>", "-", "-<wbr>", ".", ".<wbr>", "/", "/<wbr>").Replace(esc(s))
}

// flightHTML is flight with each date kept on one line, so a narrow screen wraps at the arrow.
func flightHTML(start, end string) string {
	f := flight(start, end)
	if s, e := day(start), day(end); s != "" && e != "" {
		return "<span class=\"d\">" + esc(s) + " →</span> <span class=\"d\">" + esc(e) + "</span>"
	}
	return esc(f)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// PageKind selects a result page.
type PageKind string

// Result page kinds.
const (
	PageApproved        PageKind = "approved"
	PageRejected        PageKind = "rejected"
	PageAlreadyApproved PageKind = "already_approved"
	PageAlreadyRejected PageKind = "already_rejected"
	PageExpired         PageKind = "expired"
	PageInvalidLink     PageKind = "invalid_link"
	PageSelfApproval    PageKind = "self_approval"
	PageNotApprover     PageKind = "not_approver"
	PageBadRequest      PageKind = "bad_request"
	// PageUnavailable is for our own failures (ledger down, inconsistent item).
	PageUnavailable PageKind = "unavailable"
)

// ResultPage is the data for a page shown after a POST, or instead of the
// form when there is nothing left to decide. Serve it with StatusCode and
// SecurityHeaders.
type ResultPage struct {
	Kind PageKind
	// By is who decided (decided kinds).
	By string
	// At is when it was decided or when it expired; zero if unknown.
	At time.Time
	// Summary optionally names the buy.
	Summary string
	// Comment is the decider's comment, if any.
	Comment string
	// Detail is shown on PageBadRequest (e.g. "The comment is too long.").
	Detail string
}

// StatusCode is the HTTP status to serve the page with.
func (p ResultPage) StatusCode() int {
	switch p.Kind {
	case PageApproved, PageRejected:
		return http.StatusOK
	case PageAlreadyApproved, PageAlreadyRejected:
		return http.StatusConflict
	case PageExpired:
		return http.StatusGone
	case PageInvalidLink, PageSelfApproval, PageNotApprover:
		return http.StatusForbidden
	case PageUnavailable:
		return http.StatusInternalServerError
	default:
		return http.StatusBadRequest
	}
}

// ResultFromOutcome is the result page for an outcome of Decide (or of Check
// when it is not pending). Summary is taken from a.
func ResultFromOutcome(o Outcome, a Approval) ResultPage {
	p := ResultPage{By: o.By, At: o.At, Summary: a.Summary, Comment: o.Comment}
	switch {
	case o.Result == ResultDecided && o.Status == StatusApproved:
		p.Kind = PageApproved
	case o.Result == ResultDecided && o.Status == StatusRejected:
		p.Kind = PageRejected
	case o.Result == ResultAlreadyDecided && o.Status == StatusApproved:
		p.Kind = PageAlreadyApproved
	case o.Result == ResultAlreadyDecided && o.Status == StatusRejected:
		p.Kind = PageAlreadyRejected
	case o.Result == ResultExpired:
		p = ResultPage{Kind: PageExpired, At: o.At, Summary: a.Summary}
	default:
		p = ResultPage{Kind: PageBadRequest}
	}
	return p
}

// ResultFromError is the result page for an error from Verify, Check, Decide
// or ParseDecisionForm. For ErrExpired pass the Claims Verify returned as at,
// via claims.Expires; otherwise at is ignored.
func ResultFromError(err error, at time.Time) ResultPage {
	switch {
	case errors.Is(err, ErrExpired):
		return ResultPage{Kind: PageExpired, At: at}
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrUnknownKey), errors.Is(err, ErrBadSignature),
		errors.Is(err, ErrWrongApproval):
		return ResultPage{Kind: PageInvalidLink}
	case errors.Is(err, ErrSelfApproval):
		return ResultPage{Kind: PageSelfApproval}
	case errors.Is(err, ErrNotApprover):
		return ResultPage{Kind: PageNotApprover}
	case errors.Is(err, ErrCommentTooLong):
		return ResultPage{Kind: PageBadRequest, Detail: fmt.Sprintf("The comment is too long: at most %d characters.", MaxCommentRunes)}
	case errors.Is(err, ErrInvalidComment):
		return ResultPage{Kind: PageBadRequest, Detail: "The comment has characters that cannot be stored."}
	case errors.Is(err, ErrInvalidDecision):
		return ResultPage{Kind: PageBadRequest, Detail: "Choose Approve or Reject."}
	case errors.Is(err, ErrBadForm):
		return ResultPage{Kind: PageBadRequest, Detail: "The request could not be read. Open the link from Slack again."}
	default:
		// ErrInvalidState and anything unexpected: our fault. The error text
		// stays in the logs, never on the page.
		return ResultPage{Kind: PageUnavailable}
	}
}

type resultView struct {
	Title string
	Line  string
	Hint  string
}

// decidedPages are the titles ("<title> by <approver> at <time>.") and hints of the pages of a
// decision.
var decidedPages = map[PageKind]struct{ title, hint string }{
	PageApproved:        {"Approved", "The buy goes ahead. You can close this page."},
	PageRejected:        {"Rejected", "Nothing will be bought. You can close this page."},
	PageAlreadyApproved: {"Already approved", "Your click did not change anything."},
	PageAlreadyRejected: {"Already rejected", "Your click did not change anything."},
}

func (p ResultPage) view() resultView {
	var v resultView
	at := ""
	if !p.At.IsZero() {
		at = " at " + FormatTime(p.At)
	}
	switch p.Kind {
	case PageApproved, PageRejected, PageAlreadyApproved, PageAlreadyRejected:
		d := decidedPages[p.Kind]
		v.Title, v.Line, v.Hint = d.title, fmt.Sprintf("%s by %s%s.", d.title, p.By, at), d.hint
	case PageExpired:
		v.Title = "Expired"
		if at != "" {
			v.Line = "Expired" + at + "."
		} else {
			v.Line = "This approval link has expired."
		}
		v.Hint = "Nothing was decided. Ask the requester to submit the buy again if it is still needed."
	case PageInvalidLink:
		v.Title, v.Line = "This link is not valid", "This link is not valid."
		v.Hint = "Open the link from the Slack message again; if it still fails, ask for a new one."
	case PageSelfApproval:
		v.Title, v.Line = "You cannot approve your own request", "You cannot approve your own request."
		v.Hint = "Another approver has to decide this buy."
	case PageNotApprover:
		v.Title, v.Line = "You are not an approver", "You are not an approver of this request."
		v.Hint = "Only the approvers named on the request can decide it."
	case PageUnavailable:
		v.Title, v.Line = "Something went wrong", "Something went wrong on our side."
		v.Hint = "Nothing was decided. Try the link again in a minute."
	default:
		v.Title, v.Line = "The request could not be processed", p.Detail
		if v.Line == "" {
			v.Line = "The request could not be processed."
		}
		v.Hint = "Nothing was decided."
	}
	return v
}

// RenderResult writes a result page.
func RenderResult(w io.Writer, p ResultPage) error {
	v := p.view()
	return writeLayout(w, v.Title, func(b *strings.Builder) {
		b.WriteString("<h1>" + esc(v.Title) + "</h1>\n")
		if v.Line != "" {
			b.WriteString("<p>" + esc(v.Line) + "</p>\n")
		}
		if p.Summary != "" {
			b.WriteString("<p>Buy: " + esc(p.Summary) + "</p>\n")
		}
		if p.Comment != "" {
			b.WriteString("<p>Comment: " + esc(p.Comment) + "</p>\n")
		}
		if v.Hint != "" {
			b.WriteString("<p class=\"note\">" + esc(v.Hint) + "</p>\n")
		}
	})
}

// RenderMessage writes a plain page in the same layout for answers that have no page kind (for
// example a decision recorded after the workflow stopped waiting): a title, one line and a
// hint. Every value is escaped.
func RenderMessage(w io.Writer, title, line, hint string) error {
	return writeLayout(w, title, func(b *strings.Builder) {
		b.WriteString("<h1>" + esc(title) + "</h1>\n<p>" + esc(line) + "</p>\n")
		if hint != "" {
			b.WriteString("<p class=\"note\">" + esc(hint) + "</p>\n")
		}
	})
}
