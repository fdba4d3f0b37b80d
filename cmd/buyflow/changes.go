package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"regexp"
	"strings"

	"github.com/buyflow/buyflow/internal/api"
)

// decimalRE is an amount as a person types it (the API checks it against the currency).
var decimalRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// changeVerbs are the commands that change a placed buy, each one PATCH (or the cancel POST).
var changeVerbs = map[string]bool{"budget": true, "end-date": true, "pause": true, "resume": true, "cancel": true}

// change runs one change verb: budget ID (TOTAL | PACKAGE=AMOUNT...), end-date ID TIME, pause ID,
// resume ID, cancel ID REASON. The Idempotency-Key is fresh unless --key names one (a change is
// not a file to resubmit: the same pause twice is two changes, and the second is refused).
func (c cli) change(ctx context.Context, verb string, args []string) error {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(c.err.w)
	key := fs.String("key", "", "the Idempotency-Key (default: a fresh one)")
	reason := fs.String("reason", "", "why (required for cancel, also the words after the id)")
	wait := fs.Bool("wait", false, "follow the change to a final status")
	if err := fs.Parse(args); err != nil {
		return usageError(verb + ": " + err.Error())
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usageError(verb + " takes a media buy's operation id first")
	}
	id, rest := rest[0], rest[1:]
	body := map[string]any{}
	switch verb {
	case "budget":
		if len(rest) == 0 {
			return usageError("budget takes the new total (one-package buys) or PACKAGE_ID=AMOUNT pairs")
		}
		if len(rest) == 1 && !strings.Contains(rest[0], "=") {
			if !decimalRE.MatchString(rest[0]) {
				return usageError(fmt.Sprintf("budget: %q is neither an amount nor PACKAGE_ID=AMOUNT", rest[0]))
			}
			body["budget"] = map[string]any{"total": json.Number(rest[0])}
			break
		}
		var pkgs []map[string]any
		for _, kv := range rest {
			pkg, amt, ok := strings.Cut(kv, "=")
			if !ok || pkg == "" || !decimalRE.MatchString(amt) {
				return usageError(fmt.Sprintf("budget: %q is not PACKAGE_ID=AMOUNT", kv))
			}
			pkgs = append(pkgs, map[string]any{"package_id": pkg, "budget": json.Number(amt)})
		}
		body["budget"] = map[string]any{"packages": pkgs}
	case "end-date":
		if len(rest) != 1 {
			return usageError("end-date takes one RFC 3339 time, e.g. 2027-04-30T23:59:59Z")
		}
		body["end_time"] = rest[0]
	case "pause", "resume":
		if len(rest) != 0 {
			return usageError(verb + " takes only the operation id")
		}
		body["paused"] = verb == "pause"
	case "cancel":
		if *reason == "" {
			*reason = strings.Join(rest, " ")
		}
		if strings.TrimSpace(*reason) == "" {
			return usageError("cancel needs a reason: buyflow cancel ID the reason in words")
		}
	}
	if *reason != "" {
		body["reason"] = *reason
	}
	if *key == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		*key = "cli-" + hex.EncodeToString(b)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	acc, err := c.c.Change(ctx, id, *key, raw, verb == "cancel")
	if err != nil {
		return err
	}
	if *wait {
		return c.follow(ctx, acc.ChangeID)
	}
	if c.json {
		return writeJSON(c.out.w, acc)
	}
	c.out.printf("change %s (%s) of %s: %s\n", acc.ChangeID, acc.Kind, acc.BuyID, acc.Status)
	c.out.printf("follow it: buyflow status --wait %s; the buy: buyflow status %s\n", acc.ChangeID, acc.BuyID)
	return nil
}

// delivery prints what a buy delivered: the approved budget, the spend of the newest
// snapshot and every snapshot, newest first.
func (c cli) delivery(ctx context.Context, args []string) error {
	d, err := readOne(ctx, args, "delivery takes one operation id", c.c.Delivery)
	if err != nil {
		return err
	}
	return c.report(d, "", func(tp *printer) {
		tp.printf("approved budget\t%s %s\n", d.Approved, d.Currency)
		if d.Spend == "" {
			tp.println("spend\tno delivery reported yet")
			return
		}
		over := ""
		if d.OverBudget {
			over = "  OVER THE APPROVED BUDGET"
		}
		tp.printf("spend\t%s %s%s\n", d.Spend, d.Currency, over)
		tp.println("AS OF\tIMPRESSIONS\tSPEND\tAPPROVED\tPACING")
		for _, s := range d.Snapshots {
			tp.printf("%s\t%d\t%s\t%s\t%s\n", s.AsOf, s.Impressions, s.Spend, s.Approved, s.Pacing)
		}
	})
}

// currentRows are the status rows of a changed buy.
func currentRows(row func(k, v string), cur *api.Current) {
	if cur == nil {
		return
	}
	row("state", fmt.Sprintf("%s (revision %d)", cur.State, cur.Revision))
	row("approved budget", cur.Budget+" "+cur.Currency)
	row("end date", cur.EndTime)
	row("change in flight", cur.ChangeInFlight)
	if cur.LastChangeID != "" {
		last := cur.LastChangeID + ": " + cur.LastOutcome
		if cur.LastReason != "" {
			last += " (" + cur.LastReason + ")"
		}
		row("last change", last)
	}
}
