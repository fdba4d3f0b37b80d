package approvalcore_test

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/approvalcore"
)

// Example shows the order of calls the approve Lambda makes: verify the link,
// show the confirm page on GET, and on POST parse, verify, decide, record
// (conditionally) and answer. The ledger and Step Functions calls are elided.
func Example() {
	now := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	keys, err := approvalcore.ParseKeys([]byte(`{"current":"k1","keys":{"k1":"` + strings.Repeat("A", 43) + `"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	signer, err := approvalcore.NewSigner(keys, clock)
	if err != nil {
		fmt.Println(err)
		return
	}
	a := approvalcore.Approval{
		ID: "apr1", OperationID: "op1", Approvers: []string{"alice"}, Requester: "rita",
		Seller: "Example Sports Network", Amount: approvalcore.Money{Minor: 1250000, Currency: "USD"},
		Summary: "Q1 video", Reason: approvalcore.ReasonPolicyThreshold, Status: approvalcore.StatusPending,
		ExpiresAt: now.Add(24 * time.Hour),
	}

	// notify: one link per approver, sent in Slack.
	link, _ := signer.Sign("https://api.example.com", a.ID, "alice", a.ExpiresAt)
	u, _ := url.Parse(link)

	// approve, GET: verify, check, render the form. Nothing is written.
	claims, err := signer.Verify(a.ID, u.Query())
	if err != nil {
		page := approvalcore.ResultFromError(err, claims.Expires)
		fmt.Println(page.StatusCode())
		return
	}
	if o, err := approvalcore.Check(a, claims.Approver, now); err == nil && o.Result == approvalcore.ResultPending {
		_ = approvalcore.RenderConfirm(io.Discard, approvalcore.ConfirmPage{Approval: a, Approver: claims.Approver, Signed: u.Query()})
	}

	// approve, POST: the form posts the signed fields back with the decision.
	form := u.Query()
	form.Set("decision", "approve")
	d, posted, err := approvalcore.ParseDecisionForm([]byte(form.Encode()), "application/x-www-form-urlencoded")
	if err != nil {
		fmt.Println(err)
		return
	}
	claims, err = signer.Verify(a.ID, posted)
	if err != nil {
		fmt.Println(approvalcore.ResultFromError(err, claims.Expires).StatusCode())
		return
	}
	d.ApprovalID, d.Approver = a.ID, claims.Approver
	o, err := approvalcore.Decide(a, d, now)
	if errors.Is(err, approvalcore.ErrSelfApproval) {
		fmt.Println("self")
		return
	}
	// When o.Record is set the Lambda writes pending → o.Status to the ledger
	// (conditional on pending) and only then calls SendTaskSuccess.
	page := approvalcore.ResultFromOutcome(o, a)
	fmt.Println(page.StatusCode(), o.Message())
	// Output: 200 approved by alice at 2026-11-30 05:00 UTC
}
