package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/approvalcore"
)

// Exit codes of a command that follows a buy to its final status (submit --wait, status
// --wait): one per final status, so a script can tell them apart without parsing text.
// Codes 1 and 2 stay what they are for every command (it could not run; bad usage).
const (
	exitCompleted = 0
	exitFailed    = 3
	exitRejected  = 4
	exitCanceled  = 5
	exitExpired   = 6
	// exitPartial is a campaign that kept some legs and not others.
	exitPartial = 7
)

// exitCodes maps each final status to its exit code.
var exitCodes = map[string]int{
	"completed": exitCompleted, "failed": exitFailed, "rejected": exitRejected, "canceled": exitCanceled, "expired": exitExpired,
	"partially_completed": exitPartial,
}

// finalStatus is returned by follow for a buy that ended in a status other than completed:
// the buy was followed to its end (nothing went wrong in buyflow's CLI), and the exit code
// says how it ended.
type finalStatus struct{ status string }

func (f finalStatus) Error() string { return "the buy ended " + f.status }

func (f finalStatus) code() int { return exitCodes[f.status] }

// follow prints every status change with the time since it started following and how long
// the stage before took, says who is asked while an approval is pending (and, on the local
// stack, where the fake Slack's review links are), then prints the time the buy spent in each
// stage by the ledger's clock and the final operation.
func (c cli) follow(ctx context.Context, id string) error {
	start := time.Now()
	stageStart := start
	lastStatus, lastApproval := "", ""
	approvalChanged := func(op api.MediaBuy) bool {
		a := op.Approval
		return a != nil && a.ApprovalID+a.Status != lastApproval
	}
	printApproval := func(a *api.Approval) {
		lastApproval = a.ApprovalID + a.Status
		c.err.printf("  %7s  %s\n", "", approvalLine(a))
		if a.Status == "pending" {
			c.printReviewLinks(ctx, a)
		}
	}
	watch := func(op api.MediaBuy) bool {
		now := time.Now()
		// A decision comes before the status it leads to; a new request after the status
		// that waits for it.
		if approvalChanged(op) && op.Approval.Status != "pending" {
			printApproval(op.Approval)
		}
		if op.Status != lastStatus {
			line := fmt.Sprintf("%-20s", op.Status)
			if lastStatus != "" {
				line += fmt.Sprintf("  (%s took %s)", lastStatus, seconds(now.Sub(stageStart)))
			}
			c.err.printf("  %7s  %s\n", "+"+seconds(now.Sub(start)), strings.TrimRight(line, " "))
			lastStatus, stageStart = op.Status, now
		}
		if approvalChanged(op) {
			printApproval(op.Approval)
		}
		return apiclient.Terminal(op.Status)
	}
	op, err := c.c.Wait(ctx, id, 500*time.Millisecond, watch, nil)
	if err != nil {
		return err
	}
	if evs, err := c.c.Events(ctx, id); err == nil {
		if line := stageTimes(evs); line != "" {
			c.err.println("time per stage:", line)
		}
	}
	if err := c.printOperation(op); err != nil {
		return err
	}
	if op.Status != "completed" {
		return finalStatus{op.Status}
	}
	return nil
}

// printReviewLinks prints the review links the local stack's fake Slack received for the
// approval, so a person can open one; it does nothing without --slack.
func (c cli) printReviewLinks(ctx context.Context, a *api.Approval) {
	if c.slackURL == "" {
		return
	}
	// The notify stage posts after it records the approval: give it a moment.
	var links []string
	for try := 0; try < 20 && len(links) == 0; try++ {
		msgs, err := apiclient.SlackMessages(ctx, nil, c.slackURL)
		if err != nil {
			c.err.printf("  %7s  (could not read the fake Slack at %s: %v)\n", "", c.slackURL, err)
			return
		}
		for _, l := range apiclient.ApprovalLinks(msgs, c.c.BaseURL) {
			if strings.Contains(l, "/v1/approvals/"+a.ApprovalID+"?") {
				links = append(links, l)
			}
		}
		if len(links) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	for _, l := range links {
		who := "an approver"
		if u, err := url.Parse(l); err == nil && u.Query().Get("approver") != "" {
			who = u.Query().Get("approver")
		}
		c.err.printf("  %7s  review link for %s (local fake Slack): %s\n", "", who, l)
	}
}

// approvalLine says where an approval stands and, while it waits, why a person is asked, e.g.
// "waiting for approval by U123 or U456 until 2026-12-01 14:05 UTC; then asks S0FINANCE. Why:
// The amount is over the approval threshold set by policy.".
func approvalLine(a *api.Approval) string {
	switch a.Status {
	case "pending":
		s := "waiting for approval by " + orList(a.Approvers) + " until " + when(a.ExpiresAt)
		if a.Escalation {
			s += " (escalated)"
		}
		switch {
		case len(a.EscalatesTo) > 0:
			s += "; then asks " + orList(a.EscalatesTo)
		case a.CampaignID != "":
			s += "; one decision for every leg; if nobody decides, nothing is bought"
		default:
			s += "; if nobody decides, the buy expires"
		}
		return s + whyAsked(a)
	case "approved", "rejected":
		return a.Status + " by " + a.DecidedBy + " at " + when(a.DecidedAt)
	case "expired":
		return "approval expired at " + when(a.ExpiresAt) + " with no decision"
	}
	return "approval " + a.Status
}

// whyAsked is why a person is asked, as the approval's reason says it (the policy's threshold,
// the seller asked, governance's conditions), with what asked in its own words when it said
// more; "" when the view has no reason.
func whyAsked(a *api.Approval) string {
	if a.Reason == "" {
		return ""
	}
	why := ". Why: " + approvalcore.ReasonCode(a.Reason).Label()
	if t := strings.TrimSpace(a.ReasonText); t != "" {
		why += " (" + t + ")"
	}
	return why
}

// stageTimes sums how long the buy spent in each status, from the ledger's transition times,
// in the order the buy went through them.
func stageTimes(evs []api.Event) string {
	var order []string
	spent := map[string]time.Duration{}
	var cur string
	var since time.Time
	for _, e := range evs {
		if e.To == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, e.At)
		if err != nil {
			return ""
		}
		if cur != "" && cur != e.To {
			spent[cur] += at.Sub(since)
		}
		if !slices.Contains(order, e.To) {
			order = append(order, e.To)
		}
		if cur != e.To {
			cur, since = e.To, at
		}
	}
	parts := make([]string, 0, len(order))
	for _, st := range order {
		if apiclient.Terminal(st) {
			continue
		}
		parts = append(parts, st+" "+seconds(spent[st]))
	}
	return strings.Join(parts, ", ")
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func orList(ids []string) string {
	switch len(ids) {
	case 0:
		return "(nobody)"
	case 1:
		return ids[0]
	}
	return strings.Join(ids[:len(ids)-1], ", ") + " or " + ids[len(ids)-1]
}

// when shows an RFC 3339 time the way the approval page and Slack do.
func when(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	return approvalcore.FormatTime(t)
}
