package main

import (
	"context"
	"errors"
	"io"
	"text/tabwriter"
)

// approvals lists the approvals waiting for the caller, or opens one: what it buys, what
// governance said, and the caller's own review link to decide it on the confirm page.
func (c cli) approvals(ctx context.Context, args []string) error {
	switch len(args) {
	case 0:
		inbox, err := c.c.Approvals(ctx)
		if err != nil {
			return err
		}
		if c.json {
			return writeJSON(c.out.w, inbox)
		}
		if len(inbox.Items) == 0 {
			c.out.printf("no approval is waiting for %s\n", inbox.Approver)
			return c.out.err
		}
		err = tabulate(c.out.w, "APPROVAL\tBUY\tSELLER\tAMOUNT\tDECIDE BEFORE\tREQUESTED BY", func(tp *printer) {
			for _, a := range inbox.Items {
				tp.printf("%s\t%s\t%s\t%s\t%s\t%s\n", a.ApprovalID, a.Summary, a.Seller, a.Amount, when(a.ExpiresAt), a.Requester)
				for _, l := range a.Legs { // a campaign's: one decision for these legs
					tp.printf("\t  leg %s\t%s\t%s\t\t\n", l.OperationID, l.Seller, l.Amount)
				}
			}
		})
		if err != nil {
			return err
		}
		c.out.printf("open one: buyflow approvals <approval>\n")
		return c.out.err
	case 1:
		a, err := c.c.OpenApproval(ctx, args[0])
		if err != nil {
			return err
		}
		if c.json {
			return writeJSON(c.out.w, a)
		}
		what, subject := "buy", a.OperationID
		if a.CampaignID != "" {
			what, subject = "campaign", a.CampaignID
		}
		why := a.Reason
		if a.ReasonText != "" {
			why += " (" + a.ReasonText + ")"
		}
		err = tabulate(c.out.w, "", func(tp *printer) {
			tp.printf("approval\t%s\n%s\t%s (%s)\nseller\t%s\namount\t%s\nwhy\t%s\nrequested by\t%s\ndecide before\t%s\n",
				a.ApprovalID, what, a.Summary, subject, a.Seller, a.Amount, why, a.Requester, when(a.ExpiresAt))
			tp.row("flight", a.Flight)
			tp.row("proposal", a.ProposalID)
		})
		// The tables of what the approval decides: those of a buy, a campaign or a change.
		table := func(rows int, header string, print func(tp *printer)) {
			if err == nil && rows > 0 {
				err = tabulate(c.out.w, header, print)
			}
		}
		table(len(a.Packages), "\nPRODUCT\tFLIGHT\tBUDGET", func(tp *printer) {
			for _, p := range a.Packages {
				tp.printf("%s\t%s\t%s\n", p.Product, p.Flight, p.Budget)
			}
			tp.printf("total\t\t%s\n", a.Amount)
		})
		table(len(a.Legs), "\nLEG\tSELLER\tPO\tAMOUNT\tWHY\tGOVERNANCE", func(tp *printer) {
			for _, l := range a.Legs {
				tp.printf("%s\t%s\t%s\t%s\t%s\t%s\n", l.OperationID, l.Seller, l.PONumber, l.Amount, l.Why, l.Governance)
			}
			tp.printf("total\t\t\t%s\n", a.Amount)
		})
		table(len(a.Changes), "\nWHAT CHANGES\tNOW\tAFTER THE CHANGE", func(tp *printer) {
			for _, l := range a.Changes {
				tp.printf("%s\t%s\t%s\n", l.What, l.Before, l.After)
			}
		})
		if err != nil {
			return err
		}
		if g := a.Governance; g != nil {
			c.out.printf("\ngovernance: %s\n", g.Label)
			for _, cond := range g.Conditions {
				line := "  - " + cond.Field
				if cond.Reason != "" {
					line += ": " + cond.Reason
				}
				if cond.NeedsPerson {
					line += " (needs your judgement)"
				}
				c.out.println(line)
			}
		}
		c.out.printf("\ndecide on the review page (your own link): %s\n", a.ReviewURL)
		return c.out.err
	}
	return usageError("approvals takes at most one approval id")
}

// tabulate writes a table: its header line (none when ""), then the rows rows prints, in
// aligned columns.
func tabulate(w io.Writer, header string, rows func(tp *printer)) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	tp := &printer{w: tw}
	if header != "" {
		tp.println(header)
	}
	rows(tp)
	return errors.Join(tp.err, tw.Flush())
}

// report writes v as JSON with --json, else as the table of header and rows.
func (c cli) report(v any, header string, rows func(tp *printer)) error {
	if c.json {
		return writeJSON(c.out.w, v)
	}
	return tabulate(c.out.w, header, rows)
}
