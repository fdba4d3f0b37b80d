package slack

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/approvalcore"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var t0 = time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)

func goldenJSON(t *testing.T, name string, v any) {
	t.Helper()
	raw, err := marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	got := append(buf.Bytes(), '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run go test -update to accept):\n%s", path, got)
	}
}

// threePackages is the buy the approval page's browser test shows too: three packages, the
// display one ending early, and governance's verdict with two conditions.
func threePackages() approvalcore.Purchase {
	const start, end = "2026-01-05T00:00:00Z", "2026-03-29T23:59:59Z"
	return approvalcore.Purchase{
		Start: start, End: end,
		Packages: []approvalcore.Package{
			{Product: "ctv_premium_sports", Start: start, End: end, Budget: approvalcore.Money{Minor: 600000, Currency: "USD"}},
			{Product: "olv_highlights", Start: start, End: end, Budget: approvalcore.Money{Minor: 425000, Currency: "USD"}},
			{Product: "display_run_of_site", Start: start, End: "2026-02-28T23:59:59Z", Budget: approvalcore.Money{Minor: 225000, Currency: "USD"}},
		},
		Governance: approvalcore.Verdict{Verdict: "conditions", Conditions: []approvalcore.Condition{
			{Field: "packages[2].end_time", Reason: "Display must end with the February flight"},
			{Field: "packages[1].targeting_overlay", Reason: "Highlights may only run in the US and Canada: confirm the seller's geo targeting", NeedsPerson: true},
		}},
	}
}

func sampleApproval() approvalcore.Approval {
	return approvalcore.Approval{
		ID:                  "apr_01HZY",
		OperationID:         "op_7f3a",
		Tenant:              "acct_1",
		Approvers:           []string{"U0ALICE01", "U0BOB0002"},
		EscalationApprovers: []string{"U0CFO0003"},
		Requester:           "U0RITA004",
		Seller:              "Example Sports Network",
		Amount:              approvalcore.Money{Minor: 1250000, Currency: "USD"},
		Summary:             "Q1 video campaign, 3 packages",
		Reason:              approvalcore.ReasonPolicyThreshold,
		ReasonText:          "Budget over USD 10,000.00",
		Status:              approvalcore.StatusPending,
		Purchase:            threePackages(),
		ExpiresAt:           t0.Add(24 * time.Hour),
	}
}

const reviewURL = "https://api.example.com/v1/approvals/apr_01HZY?approver=U0ALICE01&exp=1796101200&kid=k1&sig=08QcooSpbh0_hoUEoEWpep-hQaALWqbwakprEelz9ZQ"

func TestRequestMessageGolden(t *testing.T) {
	t.Parallel()
	dm, err := RequestMessage(sampleApproval(), []Review{{Approver: "U0ALICE01", URL: reviewURL}})
	if err != nil {
		t.Fatal(err)
	}
	dm.Channel = "U0ALICE01"
	goldenJSON(t, "request_dm.golden.json", dm)

	shared, err := RequestMessage(sampleApproval(), []Review{
		{Approver: "U0ALICE01", URL: reviewURL},
		{Approver: "bob@example.com", URL: strings.Replace(reviewURL, "U0ALICE01", "bob%40example.com", 1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	goldenJSON(t, "request_channel.golden.json", shared)

	b, _ := marshal(dm)
	for _, want := range []string{"Q1 video campaign", "Example Sports Network", "USD 12,500.00", "approval threshold",
		"<@U0RITA004>", "<!date^1796101200^", `"url":"` + reviewURL + `"`, `"unfurl_links":false`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("message lacks %q", want)
		}
	}
	if strings.Contains(strings.ToLower(string(b)), "token") {
		t.Error("message mentions a token")
	}
}

func TestRequestMessageEscapes(t *testing.T) {
	t.Parallel()
	a := sampleApproval()
	a.Summary = "<!channel> buy now <https://evil.example|click here> & <script>"
	a.Seller = "<@U0EVIL> Seller"
	a.ReasonText = "<!here>"
	a.Requester = "mallory <!everyone>"
	a.OperationID = "<!subteam^S1>"
	a.Amount.Currency = "<!here>"
	m, err := RequestMessage(a, []Review{{Approver: "eve <!channel>", URL: reviewURL}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := marshal(m)
	s := string(b)
	for _, bad := range []string{"<!channel", "<!here", "<!HERE", "<!everyone", "<!subteam", "<https://evil", "<@U0EVIL", "<script"} {
		if strings.Contains(s, bad) {
			t.Errorf("unescaped %q in %s", bad, s)
		}
	}
	for _, want := range []string{"&lt;!channel&gt; buy now &lt;https://evil.example|click here&gt; &amp; &lt;script&gt;", "&lt;@U0EVIL&gt;", "mallory &lt;!everyone&gt;"} {
		if !strings.Contains(s, want) {
			t.Errorf("escaped text %q missing", want)
		}
	}
}

func TestRequestMessageLimits(t *testing.T) {
	t.Parallel()
	a := sampleApproval()
	a.Summary = strings.Repeat("&", 10000)
	a.Seller = strings.Repeat("<", 5000)
	a.ReasonText = strings.Repeat("é", 5000)
	m, err := RequestMessage(a, []Review{{Approver: "U0ALICE01", URL: reviewURL}})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range m.Blocks {
		if b.Text != nil && len([]rune(b.Text.Text)) > 3000 {
			t.Errorf("block %d text is %d runes", i, len([]rune(b.Text.Text)))
		}
		for _, f := range b.Fields {
			if len([]rune(f.Text)) > 2000 {
				t.Errorf("block %d field is %d runes", i, len([]rune(f.Text)))
			}
		}
		if b.Type == "header" && len([]rune(b.Text.Text)) > 150 {
			t.Errorf("header too long")
		}
	}
	if len([]rune(m.Text)) > 4000 {
		t.Errorf("fallback text is %d runes", len([]rune(m.Text)))
	}
}

func TestRequestMessageRefuses(t *testing.T) {
	t.Parallel()
	many := make([]Review, MaxReviews+1)
	for i := range many {
		many[i] = Review{Approver: "U0ALICE01", URL: reviewURL}
	}
	tests := []struct {
		name    string
		reviews []Review
	}{
		{"no reviews", nil},
		{"too many reviews", many},
		{"relative url", []Review{{Approver: "U1", URL: "/v1/approvals/x"}}},
		{"javascript url", []Review{{Approver: "U1", URL: "javascript:alert(1)"}}},
		{"no approver", []Review{{URL: reviewURL}}},
		{"huge url", []Review{{Approver: "U1", URL: reviewURL + strings.Repeat("a", 3000)}}},
	}
	for _, tt := range tests {
		if _, err := RequestMessage(sampleApproval(), tt.reviews); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

func TestStatusMessageGolden(t *testing.T) {
	t.Parallel()
	approved := sampleApproval()
	approved.Status, approved.DecidedBy, approved.DecidedAt, approved.Comment = approvalcore.StatusApproved, "U0BOB0002", t0.Add(2*time.Hour), "Fits the plan.\nGo."
	rejected := sampleApproval()
	rejected.Status, rejected.DecidedBy, rejected.DecidedAt = approvalcore.StatusRejected, "cfo@example.com", t0.Add(3*time.Hour)
	expired := sampleApproval()
	expired.Status = approvalcore.StatusExpired
	for name, a := range map[string]approvalcore.Approval{"approved": approved, "rejected": rejected, "expired": expired} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, err := StatusMessage(a)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := marshal(m)
			if strings.Contains(string(b), `"button"`) || strings.Contains(string(b), "sig=") {
				t.Error("status message still carries a review link")
			}
			goldenJSON(t, "status_"+name+".golden.json", m)
		})
	}
	if _, err := StatusMessage(sampleApproval()); err == nil {
		t.Error("pending approval accepted")
	}
	broken := sampleApproval()
	broken.Status = approvalcore.StatusApproved
	if _, err := StatusMessage(broken); err == nil {
		t.Error("decided approval with no decider accepted")
	}
}
