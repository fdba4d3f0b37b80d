package approvalcore

import (
	"strings"
	"testing"
	"time"
)

// changeRecord is what the modify stage stores for a budget increase on a two-package buy.
const changeRecord = `{"buy_operation_id":"mb-1","media_buy_id":"mb_seller_9","kind":"budget","summary":"budget 3000.00 → 14000.25",
 "currency":"USD","budget_before":"3000.00","budget_after":"14000.25",
 "lines":[{"what":"Total budget","before":"3000.00","after":"14000.25","amount":true},
          {"what":"Package pkg_a","before":"1000","after":"12000.25","amount":true}],
 "governance":{"verdict":"conditions","conditions":[{"field":"budget","reason":"over the plan's pacing","needs_person":true}]}}`

func TestParseChangeReadsEveryAmountExactly(t *testing.T) {
	c, v, err := ParseChange([]byte(changeRecord))
	if err != nil {
		t.Fatal(err)
	}
	if c.Before.String() != "USD 3,000.00" || c.After.String() != "USD 14,000.25" || c.Increase().String() != "USD 11,000.25" {
		t.Errorf("budget %s → %s, increase %s", c.Before, c.After, c.Increase())
	}
	if len(c.Lines) != 2 || c.Lines[1].Before != "USD 1,000.00" || c.Lines[1].After != "USD 12,000.25" {
		t.Errorf("lines %+v", c.Lines)
	}
	if v.Label() != "Approved with 1 condition" || !v.Conditions[0].NeedsPerson {
		t.Errorf("verdict %+v", v)
	}
	for name, bad := range map[string]string{
		"an amount finer than the currency": strings.Replace(changeRecord, `"after":"12000.25"`, `"after":"12000.251"`, 1),
		"an amount that is not a number":    strings.Replace(changeRecord, `"budget_after":"14000.25"`, `"budget_after":"lots"`, 1),
		"no lines":                          strings.Replace(strings.Replace(changeRecord, `{"what":"Total budget","before":"3000.00","after":"14000.25","amount":true},`, "", 1), `{"what":"Package pkg_a","before":"1000","after":"12000.25","amount":true}`, "", 1),
		"an unknown field":                  strings.Replace(changeRecord, `"kind"`, `"surprise":1,"kind"`, 1),
		"no buy":                            strings.Replace(changeRecord, `"buy_operation_id":"mb-1"`, `"buy_operation_id":""`, 1),
	} {
		if _, _, err := ParseChange([]byte(bad)); err == nil {
			t.Errorf("%s: ParseChange accepted it", name)
		}
	}
}

func TestConfirmPageOfAChangeShowsEachLineNowAndAfter(t *testing.T) {
	c, v, err := ParseChange([]byte(changeRecord))
	if err != nil {
		t.Fatal(err)
	}
	a := Approval{ID: "apr1", OperationID: "chg-1", Approvers: []string{"alice"}, Requester: "bob", Seller: "acme",
		Amount: c.After, Summary: "Change to media buy mb-1", Reason: ReasonChangeNeedsApproval,
		ReasonText: "the budget increase of 11000.25 USD is over the approval threshold of 10000.00 USD",
		Status:     StatusPending, ExpiresAt: t0.Add(time.Hour), Purchase: Purchase{Change: &c, Governance: v}}
	var b strings.Builder
	if err := RenderConfirm(&b, ConfirmPage{Approval: a, Approver: "alice", Signed: signedFixture(t)}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	checkPage(t, html)
	for _, want := range []string{"<title>Approve a change to a media buy? · buyflow</title>", "asks you to approve this change to a media buy.",
		"<dt>Budget after the change</dt><dd>USD 14,000.25</dd>", "<h2 id=\"changes\">What changes</h2>",
		"<td>Package pkg_<wbr>a</td><td class=\"num\">USD 1,000.00</td><td class=\"num\">USD 12,000.25</td>",
		"The change adds USD 11,000.25 of new spend.", "over the approval threshold of 10000.00 USD",
		"Approved with 1 condition", "(needs your judgement)", "Approve this change", "Reject this change"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(html, "What is bought") {
		t.Error("a change's page shows a buy's packages section")
	}
}
