// Command buyflow is the buyer's command line for a buyflow HTTP API: the local stack
// (`make local`) or a deployed stack.
//
//	buyflow [flags] submit [--key K] [--wait] request.json
//	buyflow [flags] status [--wait] <operation-id>
//	buyflow [flags] events <operation-id>
//	buyflow [flags] list [--limit N] [--cursor C]
//	buyflow [flags] approvals [<approval-id>]
//	buyflow [flags] campaign submit [--key K] [--wait] campaign.json
//	buyflow [flags] campaign status [--wait] <campaign-id>
//	buyflow [flags] campaign events <campaign-id>
//	buyflow [flags] campaign list
//	buyflow [flags] agents list|show|add|update|disable|enable|check …
//	buyflow [flags] smoke [--seller ID] [--governance ID] [--events URL] [--sim TOKENS]
//
// Flags (before the command): --endpoint (or BUYFLOW_ENDPOINT) is the API's base URL;
// --tenant (or BUYFLOW_TENANT) names the tenant on a local stack through its dev-only header;
// against any other endpoint requests are SigV4-signed with the default AWS credentials;
// --slack (or BUYFLOW_SLACK_URL) is the local stack's fake Slack, whose review links --wait
// prints; --json prints the API's JSON instead of text.
//
// Exit codes: 0 success (with --wait: the buy completed), 1 the command failed, 2 bad usage;
// with --wait, a buy that ended otherwise: 3 failed, 4 rejected, 5 canceled, 6 expired; a
// campaign: 3 failed, 5 canceled, 7 partially completed.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
)

const usage = `usage: buyflow [--endpoint URL] [--tenant T] [--principal P] [--slack URL] [--json] <command> [args]

commands:
  submit [--key K] [--wait] FILE   submit a media buy (FILE "-" reads stdin); the Idempotency-Key
                                   defaults to a hash of the body, so resubmitting a file is safe
  status [--wait] ID               show a media buy (--wait follows it to a final status)
  events ID                        show a media buy's timeline
  list [--limit N] [--cursor C]    list your media buys, newest first
  approvals [ID]                   list the approvals waiting for you (as an approver), or open
                                   one: what it buys, what governance said, your review link
  campaign submit [--key K] [--wait] FILE
                                   submit a campaign: one plan across several sellers
  campaign status [--wait] ID      show a campaign: every leg's status and amount, the totals
  campaign events ID               show a campaign's timeline, every leg's events included
  campaign list                    list your campaigns, newest first
  agents SUBCOMMAND                manage the agent registry (as an operator): list, show ID,
                                   add FILE, update ID FILE, disable ID [--reason R], enable ID,
                                   check ID; every change is in the agent's audit trail
  smoke [--events URL] [--sim T]   run one buy at the sandbox agents (sandbox-seller,
                                   sandbox-governance; --seller, --governance for others) and
                                   print each stage with its time; a stage not reached is
                                   diagnosed (function, call, missing permission), exit 8

changing a placed buy (each is its own workflow run; --reason, --key K, --wait):
  budget ID TOTAL | PKG=AMOUNT...  a new budget: the total of a one-package buy, or per package
  end-date ID TIME                 a new end of the flight (RFC 3339)
  pause ID / resume ID             pause or resume delivery
  cancel ID REASON...              cancel the buy (final)
  delivery ID                      what the buy delivered and spent against the approved budget

--wait prints each status with the time since it started and how long the stage before took,
who is asked to approve and until when (with --slack, the local fake Slack's review links), and
the time per stage by the ledger's clock.

exit codes: 0 success (with --wait: the buy completed), 1 the command failed, 2 bad usage;
with --wait a buy that ended otherwise exits 3 failed, 4 rejected, 5 canceled, 6 expired;
a campaign exits 3 failed, 5 canceled, 7 partially completed

environment: BUYFLOW_ENDPOINT, BUYFLOW_TENANT, BUYFLOW_TENANT_HEADER (default X-Buyflow-Tenant),
BUYFLOW_PRINCIPAL (who you are within the tenant on a local stack; the local approver is
dev:approver, the local operator dev:operator), BUYFLOW_SLACK_URL (the local stack prints it as slack=…)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command and returns the exit code: 0 success, 1 failure, 2 usage, and for
// a followed buy that did not complete the code of its final status (see exitCodes).
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	se := &printer{w: stderr}
	fs := flag.NewFlagSet("buyflow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { se.printf("%s", usage) }
	endpoint := fs.String("endpoint", getenv("BUYFLOW_ENDPOINT"), "the API's base URL")
	tenant := fs.String("tenant", getenv("BUYFLOW_TENANT"), "tenant name on a local stack (dev-only header)")
	tenantHeader := fs.String("tenant-header", orDefault(getenv("BUYFLOW_TENANT_HEADER"), "X-Buyflow-Tenant"), "the local stack's tenant header")
	asJSON := fs.Bool("json", false, "print JSON")
	principal := fs.String("principal", getenv("BUYFLOW_PRINCIPAL"), "who you are within the tenant on a local stack (dev-only header)")
	slackURL := fs.String("slack", getenv("BUYFLOW_SLACK_URL"), "the local stack's fake Slack (its review links are printed by --wait)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if *endpoint == "" {
		se.println("buyflow: no endpoint: pass --endpoint or set BUYFLOW_ENDPOINT (the local stack prints it as api=…)")
		return 2
	}
	c := &apiclient.Client{BaseURL: strings.TrimRight(*endpoint, "/")}
	if *tenant != "" {
		c.TenantHeader, c.Tenant, c.Principal = *tenantHeader, *tenant, *principal
	} else if !loopback(*endpoint) {
		sign, err := sigV4(ctx)
		if err != nil {
			se.println("buyflow:", err)
			return 1
		}
		c.Sign = sign
	} else {
		se.println("buyflow: a local stack needs --tenant (or BUYFLOW_TENANT)")
		return 2
	}
	cmd := cli{c: c, json: *asJSON, out: &printer{w: stdout}, err: se, in: stdin, slackURL: strings.TrimRight(*slackURL, "/")}
	var err error
	name, rest := fs.Arg(0), fs.Args()[1:]
	switch run, ok := commands[name]; {
	case ok:
		err = run(cmd, ctx, rest)
	case changeVerbs[name]:
		err = cmd.change(ctx, name, rest)
	default:
		se.printf("buyflow: unknown command %q\n", name)
		fs.Usage()
		return 2
	}
	var ue usageError
	var fin finalStatus
	var sf smokeFailed
	switch {
	case errors.As(err, &sf):
		se.println("buyflow:", err)
		return exitSmokeFailed
	case errors.As(err, &fin):
		return fin.code()
	case errors.As(err, &ue):
		se.println("buyflow:", err)
		return 2
	case err != nil:
		se.println("buyflow:", err)
		return 1
	}
	return 0
}

type usageError string

func (e usageError) Error() string { return string(e) }

type cli struct {
	c        *apiclient.Client
	json     bool
	in       io.Reader
	out      *printer
	err      *printer
	slackURL string
}

// submission is what a submit verb reads from its arguments: the request body, its
// Idempotency-Key and whether to follow the result.
type submission struct {
	body []byte
	key  string
	wait bool
}

// readSubmission parses a submit verb's flags (verb names it in errors; what is the thing
// --wait follows, file what the one argument holds) and reads the request file.
func (c cli) readSubmission(verb, what, file string, args []string) (submission, error) {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(c.err.w)
	key := fs.String("key", "", "Idempotency-Key (default: derived from the body)")
	wait := fs.Bool("wait", false, "follow the "+what+" to a final status")
	if err := fs.Parse(args); err != nil {
		return submission{}, usageError(verb + ": " + err.Error())
	}
	if fs.NArg() != 1 {
		return submission{}, usageError(verb + " takes one " + file + " (or - for stdin)")
	}
	body, err := c.readRequest(fs.Arg(0), key)
	if err != nil {
		return submission{}, err
	}
	return submission{body: body, key: *key, wait: *wait}, nil
}

func (c cli) submit(ctx context.Context, args []string) error {
	in, err := c.readSubmission("submit", "buy", "request file", args)
	if err != nil {
		return err
	}
	sub, status, err := c.c.Submit(ctx, in.key, in.body)
	if err != nil {
		return err
	}
	return c.submitted(in, sub, func() {
		c.out.printf("submitted %s: %s (HTTP %d, Idempotency-Key %s)%s\n", sub.OperationID, sub.Status, status, in.key, replayed(sub.Replayed, "buy"))
	}, func() error { return c.follow(ctx, sub.OperationID) })
}

// submitted answers a submission: the API's answer v as JSON with --json, else the lines say
// prints; then, with --wait, it follows what was submitted.
func (c cli) submitted(in submission, v any, say func(), follow func() error) error {
	if c.json {
		if err := writeJSON(c.out.w, v); err != nil {
			return err
		}
	} else {
		say()
	}
	if in.wait {
		return follow()
	}
	return nil
}

// replayed notes a submission the API answered from an earlier one with the same key.
func replayed(yes bool, what string) string {
	if !yes {
		return ""
	}
	return " (already submitted with this key: same " + what + ")"
}

// readRequest reads a request file (or stdin for "-"), and sets *key, when empty, to a hash of
// the body: resubmitting the same file is the same request.
func (c cli) readRequest(file string, key *string) ([]byte, error) {
	var body []byte
	var err error
	if file == "-" {
		body, err = io.ReadAll(io.LimitReader(c.in, 4<<20))
	} else {
		body, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	if *key == "" {
		sum := sha256.Sum256(body)
		*key = "cli-" + hex.EncodeToString(sum[:12])
	}
	return body, nil
}

// commands are the CLI's commands by name, but for the changes to a buy (changeVerbs).
var commands = map[string]func(c cli, ctx context.Context, args []string) error{
	"submit":    cli.submit,
	"status":    cli.status,
	"events":    cli.events,
	"list":      cli.list,
	"approvals": cli.approvals,
	"campaign":  cli.campaign,
	"delivery":  cli.delivery,
	"agents":    cli.agents,
	"smoke":     cli.smoke,
}

func (c cli) status(ctx context.Context, args []string) error {
	return showStatus(ctx, c, "status", "operation id", "buy", args, c.follow, c.c.Get, c.printOperation)
}

// showStatus runs a status command (name): its arguments are one id (what) and -wait, which
// follows the buy or campaign (follows) to a final status; without it, get reads it once and
// show prints it.
func showStatus[T any](ctx context.Context, c cli, name, what, follows string, args []string,
	follow func(context.Context, string) error, get func(context.Context, string) (T, error), show func(T) error) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.err.w)
	wait := fs.Bool("wait", false, "follow the "+follows+" to a final status")
	if err := fs.Parse(args); err != nil {
		return usageError(name + ": " + err.Error())
	}
	if fs.NArg() != 1 {
		return usageError(name + " takes one " + what)
	}
	if *wait {
		return follow(ctx, fs.Arg(0))
	}
	v, err := get(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	return show(v)
}

// readOne reads, with get, what a command's one argument names; usage says what it takes.
func readOne[T any](ctx context.Context, args []string, usage string, get func(context.Context, string) (T, error)) (T, error) {
	if len(args) != 1 {
		var zero T
		return zero, usageError(usage)
	}
	return get(ctx, args[0])
}

func (c cli) printOperation(op api.MediaBuy) error {
	return c.report(op, "", func(tp *printer) {
		operationRows(tp.row, op)
	})
}

func operationRows(row func(k, v string), op api.MediaBuy) {
	row("operation", op.OperationID)
	row("status", op.Status)
	row("reason", op.Reason)
	if op.Approval != nil {
		row("approval", approvalLine(op.Approval))
	}
	if w := op.Waiting; w != nil {
		row("waiting", fmt.Sprintf("%s: %s unavailable since %s (circuit breaker open; next try %s)", w.Reason, w.AgentID, w.Since, w.RetryAt))
	}
	row("seller", op.SellerID)
	row("governance", op.GovernanceID+" / plan "+op.PlanID)
	row("po number", op.PONumber)
	row("budget", amount(op))
	currentRows(row, op.Current)
	if op.Kind != "" {
		row("change", op.Kind+" of "+op.BuyID+": "+string(op.Change))
	}
	row("seller task", op.SellerTaskID)
	row("media buy", op.MediaBuyID)
	row("requester", op.Requester)
	row("created", op.CreatedAt)
	row("updated", op.UpdatedAt)
}

func (c cli) events(ctx context.Context, args []string) error {
	evs, err := readOne(ctx, args, "events takes one operation id", c.c.Events)
	if err != nil {
		return err
	}
	return c.report(evs, "AT\tEVENT\tSTATUS\tBY\tAMOUNT\tREASON", func(tp *printer) {
		for _, e := range evs {
			tp.printf("%s\t%s\t%s\t%s\t%s\t%s\n", e.At, e.Type, moved(e.From, e.To), e.Actor, e.Amount, e.Reason)
		}
	})
}

// moved shows an event's change of status ("" when it did not move one).
func moved(from, to string) string {
	if to == "" {
		return ""
	}
	return strings.TrimSpace(from + " → " + to)
}

func (c cli) list(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	fs.SetOutput(c.err.w)
	limit := fs.Int("limit", 0, "page size (default: the API's)")
	cursor := fs.String("cursor", "", "the next_cursor of the previous page")
	if err := fs.Parse(args); err != nil {
		return usageError("list: " + err.Error())
	}
	page, err := c.c.List(ctx, *limit, *cursor)
	if err != nil {
		return err
	}
	err = c.report(page, "OPERATION\tSTATUS\tSELLER\tPO NUMBER\tBUDGET\tCREATED", func(tp *printer) {
		for _, op := range page.Items {
			tp.printf("%s\t%s\t%s\t%s\t%s\t%s\n", op.OperationID, op.Status, op.SellerID, op.PONumber,
				amount(op), op.CreatedAt)
		}
	})
	if err != nil || c.json {
		return err
	}
	if page.NextCursor != "" {
		c.out.printf("more: buyflow list --cursor %s\n", page.NextCursor)
	}
	return nil
}

// amount shows a buy's amount as the approval page and Slack do ("USD 20,000.50").
func amount(op api.MediaBuy) string { return showMoney(op.Budget, op.Currency) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func loopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// sigV4 signs requests for the IAM-authorized routes (service execute-api) with the default
// AWS credentials and region.
func sigV4(ctx context.Context) (func(*http.Request, []byte) error, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS credentials for signing: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region: set AWS_REGION to the stack's region")
	}
	return apiclient.SignV4(cfg.Credentials, "execute-api", cfg.Region), nil
}

// printer writes to w and keeps the first write error, so a report checks it once.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

// row prints the line "k<tab>v" of a table of fields, unless v is empty.
func (p *printer) row(k, v string) {
	if v != "" {
		p.printf("%s\t%s\n", k, v)
	}
}

func (p *printer) println(a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintln(p.w, a...)
	}
}
