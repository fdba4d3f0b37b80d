// Command buyflow-local runs buyflow on this machine with no AWS account and no Docker: an
// embedded AWS emulator (kumo), the real Lambda bootstraps, the same state machine and HTTP API
// as the CDK stack, simulated seller and governance agents and a fake Slack.
//
//	go run ./cmd/buyflow-local [--bin bin/host] [--demo] [--verbose | --log <file>] [--pprof 127.0.0.1:6060]
//
// It prints one line a script can wait for,
//
//	buyflow local stack ready api=<url> slack=<url>
//
// and runs until interrupted: Ctrl-C (SIGINT) or SIGTERM stops everything it started and exits
// 0, also when it interrupts the start or the demo. With --demo it submits examples/media-buy.json, follows the buy,
// approves it from the Slack link like a person would, and prints the timeline. Set
// BUYFLOW_AGENTS=<file> to use real agents instead of the simulated ones, keeping any of the
// simulated ones the file lists (see devstack.AgentsFile for the format).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/statusevent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	giveBack := ownTerminal()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	interrupted := ctx.Err() != nil
	giveBack()
	stop()
	if err == nil {
		return
	}
	// nowhere left to report a failed write
	if interrupted {
		// Stopping is how the stack ends, whatever it was doing; run has stopped what it started.
		_, _ = fmt.Fprintln(os.Stderr, "buyflow-local: stopped:", err)
		return
	}
	_, _ = fmt.Fprintln(os.Stderr, "buyflow-local:", err)
	os.Exit(1)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	so, se := &printer{w: stdout}, &printer{w: stderr}
	fs := flag.NewFlagSet("buyflow-local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", "", "folder with <function>/bootstrap built for this host (default: build them into a temporary folder)")
	demo := fs.Bool("demo", false, "submit examples/media-buy.json, approve it from Slack and print the timeline")
	campaignDemo := fs.Bool("campaign", false, "submit examples/campaign.json (three legs at three simulated sellers) and print its legs, totals and timeline")
	exit := fs.Bool("exit", false, "stop after the demo instead of serving until interrupted")
	verbose := fs.Bool("verbose", false, "print the functions' logs (default: to a file, named at start)")
	logFile := fs.String("log", "", "file for the functions' logs (default: a new buyflow-local-functions-*.log in the temp folder, kept after the stack stops)")
	apiAddr := fs.String("api-addr", "127.0.0.1:0", "listen address of the HTTP API (loopback only)")
	example := fs.String("example", "examples/media-buy.json", "the request the demo submits")
	portWait := fs.Duration("port-wait", 0, "wait up to this long for a taken emulator port to become free (as test runs take turns)")
	profiles := fs.String("pprof", "", "serve Go's runtime profiles (/debug/pprof/) at this loopback address, e.g. 127.0.0.1:6060 (scripts/soak-memory.sh uses it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := devstack.FindRepoRoot(wd)
	if err != nil {
		return err
	}

	opts := devstack.Options{RepoRoot: root, APIAddr: *apiAddr, PortWait: *portWait}
	if f := getenv("BUYFLOW_AGENTS"); f != "" {
		if strings.HasPrefix(strings.TrimSpace(f), "{") {
			return errors.New("BUYFLOW_AGENTS must name a file (the agents and their credentials), not hold JSON")
		}
		opts.AgentsFile = f
	}
	tmp, err := os.MkdirTemp("", "buyflow-local-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }() // best effort: a temp folder

	if *verbose {
		opts.Log = stderr
	} else {
		// A file of this run's own (every stack and test run on the machine may run at once),
		// kept when the stack stops so that what went wrong can be read afterwards.
		lf, err := devstack.NewLogFile(*logFile, "buyflow-local-functions")
		if err != nil {
			return err
		}
		defer func() { _ = lf.Close() }() // log file: nothing to do on a failed close
		opts.Log = lf
		se.printf("function logs: %s (--verbose prints them here)\n", lf.Name())
	}
	opts.BinDir = *bin
	if opts.BinDir == "" {
		opts.BinDir = filepath.Join(tmp, "bin")
		se.println("building the functions for this host…")
		if err := devstack.Build(ctx, root, opts.BinDir, nil); err != nil {
			return err
		}
	}

	if *profiles != "" {
		url, stopProfiles, err := devstack.ServeProfiles(*profiles)
		if err != nil {
			return err
		}
		defer stopProfiles()
		se.printf("profiles: %s/debug/pprof/\n", url)
	}

	start := time.Now()
	st, err := devstack.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer st.Close()
	se.printf("started in %s (AWS endpoint %s, seller %s, governance %s)\n",
		time.Since(start).Round(time.Millisecond), st.EmulatorURL, orNone(st.SellerURL), orNone(st.GovernanceURL))
	so.printf("buyflow local stack ready api=%s slack=%s\n", st.APIURL, st.SlackURL)
	if so.err != nil {
		return fmt.Errorf("print the ready line: %w", so.err)
	}
	se.printf("try: curl -s -H '%s: demo' %s/v1/media-buys   (Ctrl-C stops everything)\n", st.TenantHeader, st.APIURL)
	se.printf("smoke: buyflow --endpoint %s --tenant demo smoke --seller %s --governance %s --events %s\n",
		st.APIURL, devstack.SellerID, devstack.GovernanceID, st.EventSinkURL)

	if *demo {
		body, err := os.ReadFile(filepath.Join(root, *example))
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if err := runDemoOf(ctx, st, body, stdout, "demo", demoBuy); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	if *campaignDemo {
		body, err := os.ReadFile(filepath.Join(root, "examples", "campaign.json"))
		if err != nil {
			return fmt.Errorf("campaign demo: %w", err)
		}
		if err := runDemoOf(ctx, st, body, stdout, "demo-campaign", demoCampaign); err != nil {
			return fmt.Errorf("campaign demo: %w", err)
		}
	}
	if (*demo || *campaignDemo) && *exit {
		return nil
	}
	<-ctx.Done()
	se.println("stopping…")
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(real agents)"
	}
	return s
}

// demo is what a demo runs with: the stack, the printer, the API client of tenant "demo", the
// submission's fresh Idempotency-Key, and the submission, asking to tell requester (askToBeTold).
type demo struct {
	st        *devstack.Stack
	out       *printer
	c         *apiclient.Client
	key       string
	body      []byte
	requester string
}

// runDemoOf runs the demo run of body on st as tenant "demo" within three minutes, printing to
// w; its Idempotency-Key starts with keyPrefix.
func runDemoOf(ctx context.Context, st *devstack.Stack, body []byte, w io.Writer, keyPrefix string, run func(context.Context, demo) error) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	body, requester, err := askToBeTold(body)
	if err != nil {
		return err
	}
	d := demo{
		st: st, out: &printer{w: w},
		c:    &apiclient.Client{BaseURL: st.APIURL, TenantHeader: st.TenantHeader, Tenant: "demo"},
		key:  fmt.Sprintf("%s-%d", keyPrefix, time.Now().UnixNano()),
		body: body, requester: requester,
	}
	if err := run(ctx, d); err != nil {
		return err
	}
	return d.out.err
}

// demoBuy submits a buy, prints every status, approves from the Slack link when the buy waits
// for a person, and prints the timeline.
func demoBuy(ctx context.Context, d demo) error {
	st, out, c, key, requester := d.st, d.out, d.c, d.key, d.requester
	sub, status, err := c.Submit(ctx, key, d.body)
	if err != nil {
		return err
	}
	out.printf("submitted %s (HTTP %d, Idempotency-Key %s): %s\n", sub.OperationID, status, key, sub.Status)
	approved := map[string]bool{}
	op, err := c.Wait(ctx, sub.OperationID, 250*time.Millisecond, func(op api.MediaBuy) bool {
		if apiclient.Terminal(op.Status) {
			return true
		}
		if op.Status == "awaiting_approval" {
			approve(ctx, st, out, approved)
		}
		return false
	}, func(op api.MediaBuy) {
		line := fmt.Sprintf("  status %-20s", op.Status)
		// The reason belongs to the status that set it: a wait for a person or a failure.
		if op.Reason != "" && (op.Status == "awaiting_approval" || (apiclient.Terminal(op.Status) && op.Status != "completed")) {
			line += " " + op.Reason
		}
		out.println(strings.TrimRight(line, " "))
	})
	if err != nil {
		return err
	}
	out.printf("final status %s", op.Status)
	if op.MediaBuyID != "" {
		out.printf(" (seller media buy %s)", op.MediaBuyID)
	}
	out.println()
	events, err := c.Events(ctx, sub.OperationID)
	if err != nil {
		return err
	}
	out.println("timeline:")
	for _, e := range events {
		line := fmt.Sprintf("  %s  %-26s", e.At, e.Type)
		if e.From != "" || e.To != "" {
			line += fmt.Sprintf(" %s → %s", e.From, e.To)
		}
		if e.Actor != "" {
			line += "  by " + e.Actor
		}
		out.println(strings.TrimRight(line, " "))
	}
	printStatusEvents(ctx, st, out, sub.OperationID, op.Status)
	printRequesterMessages(ctx, st, out, requester, finalWord(op.Status))
	return nil
}

// demoRequester is the Slack user the demo buy asks to be told in.
const demoRequester = "U0LOCALREQUESTER"

// askToBeTold adds "notify": {"slack": demoRequester} to a submit body that names no one, and
// returns the body and the id the requester's messages go to.
func askToBeTold(body []byte) ([]byte, string, error) {
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, "", fmt.Errorf("the example is not a JSON object: %w", err)
	}
	if n, ok := req["notify"].(map[string]any); ok {
		id, _ := n["slack"].(string)
		return body, id, nil
	}
	req["notify"] = map[string]any{"slack": demoRequester}
	out, err := json.Marshal(req)
	return out, demoRequester, err
}

// printStatusEvents prints the buy's events as the bus delivered them to the local sink, once
// the one into the final status is in.
func printStatusEvents(ctx context.Context, st *devstack.Stack, out *printer, id, final string) {
	wait, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err := st.Events.WaitFor(wait, func(evs []statusevent.Event) bool {
		return slices.ContainsFunc(evs, func(ev statusevent.Event) bool { return ev.Detail.OperationID == id && ev.Detail.To == final })
	})
	out.printf("status events on the bus %s (delivered to the local sink):\n", st.EventBusName)
	for _, ev := range st.Events.Of(id) {
		d := ev.Detail
		out.printf("  %-24s #%d %s → %s  %s\n", ev.DetailType, d.Sequence, orStart(d.From), d.To, d.EventID)
	}
	if err != nil {
		out.printf("  (the event into %s has not arrived: %v)\n", final, err)
	}
}

func orStart(s string) string {
	if s == "" {
		return "(new)"
	}
	return s
}

// printRequesterMessages prints what the requester was told in Slack, once the last message
// names word (how it names the final status).
func printRequesterMessages(ctx context.Context, st *devstack.Stack, out *printer, requester, word string) {
	if requester == "" {
		return
	}
	var mine []apiclient.SlackMessage
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		msgs, err := apiclient.SlackMessages(ctx, nil, st.SlackURL)
		if err != nil {
			out.printf("requester messages: %v\n", err)
			return
		}
		mine = mine[:0]
		for _, m := range msgs {
			if m.Channel == requester {
				mine = append(mine, m)
			}
		}
		if len(mine) > 0 && strings.Contains(strings.ToLower(mine[len(mine)-1].Text), word) {
			break
		}
	}
	out.printf("requester messages in Slack (%s):\n", requester)
	for _, m := range mine {
		out.printf("  %s\n", m.Text)
	}
}

// finalWord is how the requester's last message about a buy names its final status.
func finalWord(status string) string {
	if status == "completed" {
		return "placed"
	}
	return status
}

// demoCampaign submits a campaign, prints every leg's status as it changes (approving from
// Slack when a leg waits for a person), then the campaign's legs and totals and its timeline.
func demoCampaign(ctx context.Context, d demo) error {
	st, out, c, key, requester := d.st, d.out, d.c, d.key, d.requester
	sub, status, err := c.SubmitCampaign(ctx, key, d.body)
	if err != nil {
		return err
	}
	out.printf("submitted campaign %s (HTTP %d, Idempotency-Key %s): %s, %d legs\n", sub.CampaignID, status, key, sub.Status, len(sub.Legs))
	seen, approved := map[string]string{}, map[string]bool{}
	var cp api.Campaign
	for {
		if cp, err = c.GetCampaign(ctx, sub.CampaignID); err != nil {
			return err
		}
		for _, l := range cp.Legs {
			if seen[l.OperationID] != l.Status {
				seen[l.OperationID] = l.Status
				out.printf("  leg %-14s %-20s %s\n", l.SellerID, l.Status, l.OperationID)
			}
			if l.Status == "awaiting_approval" {
				approve(ctx, st, out, approved)
			}
		}
		if apiclient.CampaignTerminal(cp.Status) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("campaign %s still %s", sub.CampaignID, cp.Status)
		case <-time.After(250 * time.Millisecond):
		}
	}
	out.printf("final status %s (%s): committed %s of %s planned, total budget %s %s\n", cp.Status, cp.Policy, cp.Committed, cp.Planned, cp.TotalBudget, cp.Currency)
	for _, s := range cp.BySeller {
		out.printf("  %-14s committed %s %s\n", s.SellerID, s.Committed, cp.Currency)
	}
	events, err := c.CampaignEvents(ctx, sub.CampaignID)
	if err != nil {
		return err
	}
	out.println("timeline (every leg's events):")
	for _, e := range events {
		who := e.SellerID
		if who == "" {
			who = "campaign"
		}
		line := fmt.Sprintf("  %s  %-14s %-20s", e.At, who, e.Type)
		if e.To != "" {
			line += fmt.Sprintf(" %s → %s", e.From, e.To)
		}
		out.println(strings.TrimRight(line, " "))
	}
	// A campaign's last message names its outcome ("Partially completed: your campaign").
	printRequesterMessages(ctx, st, out, requester, strings.ReplaceAll(cp.Status, "_", " "))
	return nil
}

// approve opens every new approval link in the fake Slack and approves, as a person would.
func approve(ctx context.Context, st *devstack.Stack, out *printer, done map[string]bool) {
	msgs, err := apiclient.SlackMessages(ctx, nil, st.SlackURL)
	if err != nil {
		out.println("  (slack:", err, ")")
		return
	}
	for _, link := range apiclient.ApprovalLinks(msgs, st.APIURL) {
		if done[link] {
			continue
		}
		done[link] = true
		out.printf("  approval requested in Slack; opening %s\n", link)
		code, heading, err := apiclient.Decide(ctx, &http.Client{Timeout: 30 * time.Second}, link, "approve", "approved by the local demo")
		if err != nil {
			out.printf("  approval failed: %v\n", err)
			continue
		}
		out.printf("  approved: HTTP %d %s\n", code, heading)
	}
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

func (p *printer) println(a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintln(p.w, a...)
	}
}
