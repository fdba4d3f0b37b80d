package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/money"
)

// The amount on the approval page, in the Slack message, in governance's check, on the
// operation and on every timeline event is one number for one request: for a buy with packages,
// for a proposal buy (no packages, total_budget), and for a proposal in a currency with three
// decimals (the threshold is in USD, so it needs a person whatever its amount).
func TestTheApprovedAmountIsTheBoughtAmount(t *testing.T) {
	for _, tc := range []struct {
		name, currency, total string // total: a proposal buy's total_budget.amount
		ledger, shown         string
		minor                 int64
	}{
		{name: "packages", currency: "USD", ledger: "15000.25", shown: "USD 15,000.25", minor: 1500025},
		{name: "proposal", currency: "USD", total: "15000.25", ledger: "15000.25", shown: "USD 15,000.25", minor: 1500025},
		{name: "proposal in KWD", currency: "KWD", total: "15000.125", ledger: "15000.125", shown: "KWD 15,000.125", minor: 15000125},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := begin(t)
			b := buy{PO: po(t), Budgets: []float64{12000, 3000.25}, Sim: "async_complete"}
			body := b.body(t)
			if tc.total != "" {
				body = asProposal(t, body, tc.total, tc.currency)
			}
			sub, _, err := c.Submit(context.Background(), "key-"+randomID(t), body)
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			op := waitFor(t, c, sub.OperationID, 30*time.Second, awaitingApproval)
			if op.Status != "awaiting_approval" {
				t.Fatalf("status %s (reason %q), want awaiting_approval", op.Status, op.Reason)
			}
			if op.Budget != tc.ledger || op.Currency != tc.currency {
				t.Errorf("operation records %s %s, want %s %s", op.Budget, op.Currency, tc.ledger, tc.currency)
			}

			link := approvalLink(t, op)
			if msg := slackText(t, op); !strings.Contains(msg, tc.shown) {
				t.Errorf("the Slack message does not show %s:\n%s", tc.shown, msg)
			}
			page := get(t, http.MethodGet, link)
			if !strings.Contains(page, tc.shown) {
				t.Errorf("the approval page does not show %s", tc.shown)
			}
			if head := get(t, http.MethodHead, link); head != "" {
				t.Errorf("HEAD on the approval link returned a body: %.100q", head)
			}

			if suite.local != nil {
				want := money.Amount{Minor: tc.minor, Currency: tc.currency}
				if got := governanceAmount(t, b.PO, tc.currency); got != want {
					t.Errorf("governance was asked about %+v, want %+v", got, want)
				}
			}

			decide(t, op, "reject")
			finished(t, c, sub.OperationID, "rejected")
			n := 0
			for _, e := range timeline(t, c, sub.OperationID) {
				if e.Amount != "" {
					n++
					if e.Amount != tc.ledger+" "+tc.currency {
						t.Errorf("timeline %s shows %s, want %s %s", e.Type, e.Amount, tc.ledger, tc.currency)
					}
				}
			}
			if n == 0 {
				t.Error("no timeline event carries the amount")
			}
		})
	}
}

// asProposal rewrites a submit body as a proposal buy in currency: no packages, proposal_id
// and total_budget (the amount written as given, not through a float).
func asProposal(t *testing.T, body []byte, amount, currency string) []byte {
	t.Helper()
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var mb map[string]json.RawMessage
	if err := json.Unmarshal(req["media_buy"], &mb); err != nil {
		t.Fatal(err)
	}
	req["currency"] = json.RawMessage(`"` + currency + `"`)
	delete(mb, "packages")
	mb["proposal_id"] = json.RawMessage(`"prop-e2e"`)
	mb["total_budget"] = json.RawMessage(`{"amount":` + amount + `,"currency":"` + currency + `"}`)
	var err error
	if req["media_buy"], err = json.Marshal(mb); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// slackText returns the text and blocks of the Slack messages about op.
func slackText(t *testing.T, op api.MediaBuy) string {
	t.Helper()
	msgs, err := apiclient.SlackMessages(context.Background(), nil, suite.slackURL)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range msgs {
		s := string(m.Body) + m.Text
		if strings.Contains(s, op.OperationID) || strings.Contains(s, op.PONumber) {
			b.WriteString(m.Text + "\n" + string(m.Body) + "\n")
		}
	}
	return b.String()
}

// get fetches url with method (no redirects) and returns the body; it fails unless 200.
func get(t *testing.T, method, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: HTTP %d", method, url, resp.StatusCode)
	}
	return string(b)
}

// governanceAmount reads what the simulated governance agent was asked to check for the PO:
// the sum of the payload's package budgets (in currency), or its total_budget, exactly.
func governanceAmount(t *testing.T, po, currency string) money.Amount {
	t.Helper()
	for _, call := range suite.local.Governance.CallsTo("check_governance") {
		var args struct {
			Payload struct {
				PONumber string `json:"po_number"`
				Packages []struct {
					Budget json.Number `json:"budget"`
				} `json:"packages"`
				TotalBudget *struct {
					Amount   json.Number `json:"amount"`
					Currency string      `json:"currency"`
				} `json:"total_budget"`
			} `json:"payload"`
		}
		dec := json.NewDecoder(bytes.NewReader(call.Arguments))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil || args.Payload.PONumber != po {
			continue
		}
		if p := args.Payload; len(p.Packages) == 0 && p.TotalBudget != nil {
			a, err := money.Parse(p.TotalBudget.Amount.String(), p.TotalBudget.Currency)
			if err != nil {
				t.Fatalf("governance total_budget: %v", err)
			}
			return a
		}
		sum := money.Amount{Currency: currency}
		for _, p := range args.Payload.Packages {
			a, err := money.Parse(p.Budget.String(), currency)
			if err != nil {
				t.Fatalf("governance package budget: %v", err)
			}
			sum = sum.Add(a)
		}
		return sum
	}
	t.Fatalf("governance was never asked about PO %s", po)
	return money.Amount{}
}

// The numbers that made the schema library panic, posted twice, are refused with a 422 that
// names the field; the submit function keeps serving, and a normal buy goes through.
func TestCrashingNumbersLeaveSubmitServing(t *testing.T) {
	c := begin(t)
	for i, lit := range []string{"1e10000000", "1e10000000", "-1e-10000000", "2E9999999"} {
		body := buy{PO: po(t), Budgets: []float64{3000, 2000}}.body(t)
		body = bytes.Replace(body, []byte(`"budget":3000`), []byte(`"budget":`+lit), 1)
		if !bytes.Contains(body, []byte(lit)) {
			t.Fatalf("the body does not carry %s: %s", lit, body)
		}
		_, status, err := c.Submit(context.Background(), "key-"+randomID(t), body)
		var se *apiclient.StatusError
		if !errors.As(err, &se) || status != http.StatusUnprocessableEntity || se.Code != "number_out_of_range" {
			t.Fatalf("post %d (%s): status %d, err %v; want 422 number_out_of_range", i, lit, status, err)
		}
		var p api.Problem
		if json.Unmarshal(se.Body, &p) != nil || p.Error.Field != "/media_buy/packages/0/budget" {
			t.Errorf("post %d: problem %s, want field /media_buy/packages/0/budget", i, se.Body)
		}
	}
	sub := submit(t, c, buy{PO: po(t), Sim: "async_complete"})
	finished(t, c, sub.OperationID, "completed")
}

// Methods and paths that no route serves, under buyflow's prefixes or outside them (the
// default route), get buyflow's error shape, not the gateway's {"message":"Not Found"}.
func TestUnservedRoutesAnswerInBuyflowsShape(t *testing.T) {
	c := begin(t)
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodDelete, "/v1/media-buys", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodPut, "/v1/media-buys/mb-x", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodGet, "/v1/media-buys/mb-x/nothing/here", http.StatusNotFound, "no_route"},
		{http.MethodGet, "/v1/webhooks/adcp/op-1", http.StatusMethodNotAllowed, "method_not_allowed"},
		{http.MethodGet, "/v1/nope", http.StatusNotFound, "no_route"},
		{http.MethodGet, "/", http.StatusNotFound, "no_route"},
		{http.MethodPost, "/v2/media-buys", http.StatusNotFound, "no_route"},
	} {
		status, _, body, err := c.Do(context.Background(), tc.method, tc.path, nil, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		var p api.Problem
		if status != tc.status || json.Unmarshal(body, &p) != nil || p.Error.Code != tc.code || p.Error.Message == "" {
			t.Errorf("%s %s: HTTP %d %s, want %d %s", tc.method, tc.path, status, body, tc.status, tc.code)
		}
	}
}
