package modify

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/workflow"
)

var now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

var (
	validatorOnce sync.Once
	schemaCheck   *adcpvalidate.Validator
	validatorErr  error
)

// validator is the AdCP 3.1.19 schema validator over the vendored schemas.
func validator(t testing.TB) *adcpvalidate.Validator {
	t.Helper()
	validatorOnce.Do(func() {
		fsys, err := adcpschemas.FS()
		if err != nil {
			validatorErr = err
			return
		}
		schemaCheck, validatorErr = adcpvalidate.NewValidator(fsys)
	})
	if validatorErr != nil {
		t.Fatal(validatorErr)
	}
	return schemaCheck
}

func usd(t testing.TB, s string) money.Amount {
	t.Helper()
	a, err := money.Parse(s, "USD")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func placed(t testing.TB) Buy {
	return Buy{OperationID: "op-1", Status: workflow.StatusCompleted, MediaBuyID: "mb-9", Currency: "USD",
		Account: adcp.AccountRef{AccountID: "acct-1"}, Revision: 3, State: StateActive,
		Packages: []Package{{ID: "pkg-a", Budget: usd(t, "15000")}, {ID: "pkg-b", Budget: usd(t, "5000.50")}}}
}

func TestAdmitRefusesWhatTheBuyCannotTake(t *testing.T) {
	pause := Change{Kind: KindPause}
	cases := []struct {
		name string
		edit func(*Buy)
		c    Change
		code string
	}{
		{"not placed yet", func(b *Buy) { b.Status, b.MediaBuyID = workflow.StatusAwaitingApproval, "" }, pause, CodeNotPlaced},
		{"failed buy", func(b *Buy) { b.Status = workflow.StatusFailed }, pause, CodeNotPlaced},
		{"change in flight", func(b *Buy) { b.ChangeInFlight = "chg-1" }, pause, CodeChangeInFlight},
		{"resume canceled", func(b *Buy) { b.State = StateCanceled }, Change{Kind: KindResume}, CodeCanceled},
		{"budget after compensation", func(b *Buy) { b.Status = workflow.StatusCanceled }, Change{Kind: KindBudget, Total: "1"}, CodeCanceled},
		{"pause paused", func(b *Buy) { b.State = StatePaused }, pause, CodeAlreadyInState},
		{"resume active", func(*Buy) {}, Change{Kind: KindResume}, CodeAlreadyInState},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := placed(t)
			tc.edit(&b)
			err := Admit(b, tc.c)
			var ce *ConflictError
			if !errors.As(err, &ce) || ce.Code != tc.code || !errors.Is(err, ErrConflict) || ce.Message == "" {
				t.Fatalf("Admit = %v, want conflict %s", err, tc.code)
			}
		})
	}
	if err := Admit(placed(t), pause); err != nil {
		t.Fatalf("a placed active buy refused a pause: %v", err)
	}
}

// validate checks the planned arguments as the seller would receive them against the
// vendored AdCP 3.1.19 update_media_buy schema.
func validate(t *testing.T, p Planned) map[string]any {
	t.Helper()
	in, err := adcp.NewIntent(adcp.ToolUpdateMediaBuy, p.Args, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := validator(t).ValidateRequest(adcp.ToolUpdateMediaBuy, in.Body); err != nil {
		t.Fatalf("update_media_buy arguments fail the 3.1.19 schema: %v\n%s", err, in.Body)
	}
	var m map[string]any
	if err := json.Unmarshal(in.Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPlanBudgetPerPackageIsExactAndValid(t *testing.T) {
	c, err := ParsePatch([]byte(`{"budget":{"packages":[{"package_id":"pkg-b","budget":7000.25}]},"reason":"Q1 push"}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Plan(placed(t), c, "chg-1", now)
	if err != nil {
		t.Fatal(err)
	}
	if p.Before.Decimal() != "20000.50" || p.After.Decimal() != "22000.25" || p.Increase().Decimal() != "1999.75" {
		t.Fatalf("before %s after %s increase %s", p.Before.Decimal(), p.After.Decimal(), p.Increase().Decimal())
	}
	m := validate(t, p)
	pk := m["packages"].([]any)
	if len(pk) != 1 || pk[0].(map[string]any)["package_id"] != "pkg-b" || pk[0].(map[string]any)["budget"].(float64) != 7000.25 {
		t.Fatalf("packages = %v", m["packages"])
	}
	if m["media_buy_id"] != "mb-9" || m["revision"].(float64) != 3 {
		t.Fatalf("arguments = %v", m)
	}
	if !strings.Contains(p.Summary, "20000.50 USD → 22000.25 USD") {
		t.Fatalf("summary %q", p.Summary)
	}
}

func TestPlanRefusesWhatTheBuyDoesNotHave(t *testing.T) {
	cases := map[string]struct{ body, code string }{
		"total of two packages": {`{"budget":{"total":30000}}`, "total_needs_packages"},
		"unknown package":       {`{"budget":{"packages":[{"package_id":"pkg-z","budget":1}]}}`, "unknown_package"},
		"too precise":           {`{"budget":{"packages":[{"package_id":"pkg-a","budget":1.001}]}}`, "invalid_budget"},
		"negative":              {`{"budget":{"packages":[{"package_id":"pkg-a","budget":-5}]}}`, "invalid_budget"},
		"end in the past":       {`{"end_time":"2020-01-01T00:00:00Z"}`, "end_time_in_past"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := ParsePatch([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Plan(placed(t), c, "chg-1", now)
			var re *RequestError
			if !errors.As(err, &re) || re.Code != tc.code || re.Status != 422 {
				t.Fatalf("Plan = %v, want 422 %s", err, tc.code)
			}
		})
	}
}

func TestPlanOnePackageTotalPauseResumeCancelEndTime(t *testing.T) {
	one := placed(t)
	one.Packages = one.Packages[:1]
	cases := []struct {
		body   string
		cancel bool
		check  func(t *testing.T, p Planned, m map[string]any)
	}{
		{body: `{"budget":{"total":18000}}`, check: func(t *testing.T, p Planned, m map[string]any) {
			if p.After.Decimal() != "18000.00" || p.Increase().Decimal() != "3000.00" {
				t.Fatalf("after %s", p.After.Decimal())
			}
		}},
		{body: `{"paused":true}`, check: func(t *testing.T, p Planned, m map[string]any) {
			if m["paused"] != true || p.State != StatePaused || p.After != p.Before {
				t.Fatalf("pause: %v %s", m, p.State)
			}
		}},
		{body: `{"paused":false}`, check: func(t *testing.T, p Planned, m map[string]any) {
			if m["paused"] != false || p.State != StateActive {
				t.Fatalf("resume: %v %s", m, p.State)
			}
		}},
		{body: `{"end_time":"2027-03-31T23:59:59+02:00"}`, check: func(t *testing.T, p Planned, m map[string]any) {
			if m["end_time"] != "2027-03-31T21:59:59Z" {
				t.Fatalf("end_time %v", m["end_time"])
			}
		}},
		{body: `{"reason":"brand safety incident"}`, cancel: true, check: func(t *testing.T, p Planned, m map[string]any) {
			if m["canceled"] != true || m["cancellation_reason"] != "brand safety incident" || p.State != StateCanceled {
				t.Fatalf("cancel: %v", m)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.body, func(t *testing.T) {
			parse := ParsePatch
			if tc.cancel {
				parse = ParseCancel
			}
			c, err := parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Plan(one, c, "chg-1", now)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, p, validate(t, p))
		})
	}
}

func TestNeedsApprovalOnlyForAnIncreaseOverTheThreshold(t *testing.T) {
	b := placed(t)
	threshold := usd(t, "1000")
	for body, want := range map[string]bool{
		`{"budget":{"packages":[{"package_id":"pkg-a","budget":16000}]}}`:    false, // +1000: at the threshold
		`{"budget":{"packages":[{"package_id":"pkg-a","budget":16000.01}]}}`: true,
		`{"budget":{"packages":[{"package_id":"pkg-a","budget":1}]}}`:        false, // a decrease
		`{"paused":true}`: false,
	} {
		c, err := ParsePatch([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Plan(b, c, "chg-1", now)
		if err != nil {
			t.Fatal(err)
		}
		if got, why := (Policy{Increase: &threshold}).Needs(p); got != want || (got && why == "") {
			t.Errorf("%s: Needs = %v %q, want %v", body, got, why, want)
		}
		if got, _ := (Policy{}).Needs(p); got {
			t.Errorf("%s: the zero policy asks a person", body)
		}
	}
}

func TestPolicyForAnyChangeToALargeBuy(t *testing.T) {
	b := placed(t) // 20,000.50 USD over two packages
	for _, tc := range []struct {
		any, currency string
		body          string
		want          bool
	}{
		{"20000.50", "USD", `{"paused":true}`, true}, // at the amount: every change needs a person
		{"20000.51", "USD", `{"paused":true}`, false},
		{"20000.51", "USD", `{"budget":{"packages":[{"package_id":"pkg-a","budget":15000.01}]}}`, true}, // the budget after counts
		{"20000.51", "USD", `{"budget":{"packages":[{"package_id":"pkg-a","budget":1}]}}`, false},
		{"1.00", "EUR", `{"paused":true}`, true}, // another currency: fail closed
	} {
		pol, err := NewPolicy("", tc.any, tc.currency)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParsePatch([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Plan(b, c, "chg-1", now)
		if err != nil {
			t.Fatal(err)
		}
		if got, why := pol.Needs(p); got != tc.want || (got && why == "") {
			t.Errorf("any %s %s, %s: Needs = %v %q, want %v", tc.any, tc.currency, tc.body, got, why, tc.want)
		}
	}
	if _, err := NewPolicy("ten", "", "USD"); err == nil {
		t.Error("NewPolicy accepted an increase threshold that is not money")
	}
}

// Every approval policy the configuration accepts (approvalpolicy.Parse, which config and the
// CDK stack run) must give modify a policy: otherwise a deploy succeeds and the modify function
// stops at its cold start. Parse refusing what NewPolicy would refuse is the other half.
func TestNewPolicyTakesEveryParsedPolicy(t *testing.T) {
	for _, currency := range []string{"USD", "JPY", "KWD"} {
		for _, th := range []string{"0", "10000", "500.5", "500.50", "500.505", "500.5055", "1.000000"} {
			for _, raw := range []string{
				`{"threshold":%q,"currency":%q,"approvers":["U1"]}`,
				`{"threshold":"1","currency":%[2]q,"approvers":["U1"],"change_increase_threshold":%[1]q}`,
				`{"threshold":"1","currency":%[2]q,"approvers":["U1"],"change_any_threshold":%[1]q}`,
			} {
				js := fmt.Sprintf(raw, th, currency)
				p, err := approvalpolicy.Parse([]byte(js))
				if err != nil {
					continue
				}
				if _, err := NewPolicy(p.ChangeIncreaseThreshold, p.ChangeAnyThreshold, p.Currency); err != nil {
					t.Errorf("%s: approvalpolicy.Parse accepts it but NewPolicy refuses it: %v", js, err)
				}
			}
		}
	}
}

// A buy without packages (placed with packages: []) or whose package budgets are not known
// cannot take a budget change: Plan refuses it with a code and says why, and every other change
// is planned against the buy's recorded total, so a threshold on a large buy still holds.
func TestPlanABuyWithoutPackagesOrTheirBudgets(t *testing.T) {
	bare := placed(t)
	bare.Packages, bare.Budget = nil, usd(t, "20000.50")
	unknown := placed(t)
	unknown.Packages, unknown.Budget = []Package{{ID: "pkg-a"}}, usd(t, "20000.50")
	for name, tc := range map[string]struct {
		b          Buy
		body, code string
	}{
		"total, no packages":         {bare, `{"budget":{"total":30000}}`, codeNoPackages},
		"package, no packages":       {bare, `{"budget":{"packages":[{"package_id":"pkg-a","budget":1}]}}`, codeNoPackages},
		"total, budget not known":    {unknown, `{"budget":{"total":30000}}`, "package_budget_unknown"},
		"package, budgets not known": {unknown, `{"budget":{"packages":[{"package_id":"pkg-a","budget":1}]}}`, "package_budget_unknown"},
	} {
		c, err := ParsePatch([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Plan(tc.b, c, "chg-1", now)
		var re *RequestError
		if !errors.As(err, &re) || re.Code != tc.code || re.Status != 422 || !strings.Contains(re.Message, bare.OperationID) {
			t.Errorf("%s: Plan = %v, want 422 %s naming the buy", name, err, tc.code)
		}
	}
	pol, err := NewPolicy("", "20000.50", "USD")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []Buy{bare, unknown} {
		p, err := Plan(b, Change{Kind: KindPause}, "chg-1", now)
		if err != nil {
			t.Fatal(err)
		}
		if p.Before.Decimal() != "20000.50" || p.After.Decimal() != "20000.50" {
			t.Errorf("a pause of %v: before %s after %s, want the recorded 20000.50", b.Packages, p.Before.Decimal(), p.After.Decimal())
		}
		if need, _ := pol.Needs(p); !need {
			t.Errorf("a pause of a 20,000.50 buy with packages %v passed the threshold for any change", b.Packages)
		}
	}
}

// An unlisted buy is planned from buyflow's record, whose revision is buyflow's count, not the
// seller's: it is not sent.
func TestPlanOfAnUnlistedBuySendsNoRevision(t *testing.T) {
	b := placed(t)
	b.Unlisted = true
	p, err := Plan(b, Change{Kind: KindCancel, Reason: "withdrawn"}, "chg-1", now)
	if err != nil {
		t.Fatal(err)
	}
	if m := validate(t, p); m["revision"] != nil || m["canceled"] != true {
		t.Fatalf("the cancellation of an unlisted buy sends %v", m)
	}
}
