package main

import (
	"context"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/money"
)

// campaign runs buyflow campaign submit|status|events|list.
func (c cli) campaign(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError("campaign takes submit, status, events or list")
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "submit":
		return c.campaignSubmit(ctx, rest)
	case "status":
		return showStatus(ctx, c, "campaign status", "campaign id", "campaign", rest, c.followCampaign, c.c.GetCampaign, c.printCampaign)
	case "events":
		return c.campaignEvents(ctx, rest)
	case "list":
		list, err := c.c.ListCampaigns(ctx, 0)
		if err != nil {
			return err
		}
		return c.report(list, "CAMPAIGN\tSTATUS\tPOLICY\tLEGS\tCOMMITTED\tTOTAL\tCREATED", func(tp *printer) {
			for _, cp := range list {
				tp.printf("%s\t%s\t%s\t%d\t%s\t%s\t%s\n", cp.CampaignID, cp.Status, cp.Policy, len(cp.Legs),
					showMoney(cp.Committed, cp.Currency), showMoney(cp.TotalBudget, cp.Currency), cp.CreatedAt)
			}
		})
	}
	return usageError("campaign takes submit, status, events or list, not " + args[0])
}

func (c cli) campaignSubmit(ctx context.Context, args []string) error {
	in, err := c.readSubmission("campaign submit", "campaign", "campaign file", args)
	if err != nil {
		return err
	}
	sub, status, err := c.c.SubmitCampaign(ctx, in.key, in.body)
	if err != nil {
		return err
	}
	return c.submitted(in, sub, func() {
		c.out.printf("submitted campaign %s: %s, %d legs (HTTP %d, Idempotency-Key %s)%s\n", sub.CampaignID, sub.Status, len(sub.Legs), status, in.key, replayed(sub.Replayed, "campaign"))
		for _, l := range sub.Legs {
			c.out.printf("  leg %s at %s\n", l.OperationID, l.SellerID)
		}
	}, func() error { return c.followCampaign(ctx, sub.CampaignID) })
}

// followCampaign prints every leg's status change with the time since it started following,
// then the campaign; a campaign that did not complete exits with its code (exitCodes).
func (c cli) followCampaign(ctx context.Context, id string) error {
	start := time.Now()
	last := map[string]string{}
	lastApproval := ""
	for {
		cp, err := c.c.GetCampaign(ctx, id)
		if err != nil {
			return err
		}
		// The campaign's one approval, when a person is asked: who, until when, the link.
		if a := cp.Approval; a != nil && a.ApprovalID+a.Status != lastApproval {
			lastApproval = a.ApprovalID + a.Status
			c.err.printf("  %6.1fs  campaign       %s\n", time.Since(start).Seconds(), approvalLine(a))
			if a.Status == "pending" {
				c.printReviewLinks(ctx, a)
			}
		}
		for _, l := range cp.Legs {
			if last[l.OperationID] != l.Status {
				last[l.OperationID] = l.Status
				c.err.printf("  %6.1fs  %-14s %-22s %s\n", time.Since(start).Seconds(), l.SellerID, l.Status, l.OperationID)
			}
		}
		if apiclient.CampaignTerminal(cp.Status) {
			if err := c.printCampaign(cp); err != nil {
				return err
			}
			if cp.Status != "completed" {
				return finalStatus{status: cp.Status}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (c cli) printCampaign(cp api.Campaign) error {
	return c.report(cp, "", func(tp *printer) { campaignRows(tp, cp) })
}

func campaignRows(tp *printer, cp api.Campaign) {
	row := tp.row
	row("campaign", cp.CampaignID)
	row("name", cp.Name)
	row("status", cp.Status)
	row("reason", cp.Reason)
	row("policy", cp.Policy)
	row("governance", cp.GovernanceID+" / plan "+cp.PlanID)
	row("total budget", showMoney(cp.TotalBudget, cp.Currency))
	row("planned", showMoney(cp.Planned, cp.Currency))
	row("committed", showMoney(cp.Committed, cp.Currency))
	for _, s := range cp.BySeller {
		row("  "+s.SellerID, showMoney(s.Committed, cp.Currency))
	}
	if cp.Approval != nil {
		row("approval", approvalLine(cp.Approval))
	}
	row("requester", cp.Requester)
	row("created", cp.CreatedAt)
	tp.println()
	tp.println("LEG\tSELLER\tPO NUMBER\tAMOUNT\tSTATUS\tREASON")
	for _, l := range cp.Legs {
		tp.printf("%s\t%s\t%s\t%s\t%s\t%s\n", l.OperationID, l.SellerID, l.PONumber, showMoney(l.Amount, cp.Currency), l.Status, l.Reason)
	}
}

func (c cli) campaignEvents(ctx context.Context, args []string) error {
	evs, err := readOne(ctx, args, "campaign events takes one campaign id", c.c.CampaignEvents)
	if err != nil {
		return err
	}
	return c.report(evs, "AT\tSELLER\tEVENT\tSTATUS\tBY\tAMOUNT\tREASON", func(tp *printer) {
		for _, e := range evs {
			tp.printf("%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At, orDefault(e.SellerID, "(campaign)"), e.Type, moved(e.From, e.To), e.Actor, e.Amount, e.Reason)
		}
	})
}

// showMoney shows a decimal amount as the approval page does ("USD 20,000.50").
func showMoney(decimal, currency string) string {
	a, err := money.ParseDecimal(decimal, currency)
	if err != nil {
		return strings.TrimSpace(decimal + " " + currency)
	}
	return a.Display()
}
