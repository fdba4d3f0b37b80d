package approvalpolicy_test

import (
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/money"
)

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		json    string
		wantErr []string
	}{
		{"full", `{"threshold":"10000.00","currency":"usd","approvers":["U1","U2"],"escalation_approvers":["U9"],"on_timeout":"escalate","escalation_timeout_seconds":600,"link_ttl_seconds":3600}`, nil},
		{"no threshold", `{"approvers":["U1"]}`, nil},
		{"not json", `{`, []string{"not a JSON object"}},
		{"unknown field", `{"approvers":["U1"],"treshold":"1"}`, []string{"treshold"}},
		{"everything wrong", `{"threshold":"1e6","currency":"dollars","approvers":[],"on_timeout":"later","link_ttl_seconds":-1}`,
			[]string{"threshold", "currency", "approvers must list", `on_timeout "later"`, "link_ttl_seconds"}},
		{"escalate without group", `{"approvers":["U1"],"on_timeout":"escalate"}`, []string{"escalation_approvers"}},
		{"repeated approver", `{"approvers":["U1","U1"]}`, []string{"repeats"}},
		{"negative threshold", `{"threshold":"-5","currency":"USD","approvers":["U1"]}`, []string{"threshold"}},
		{"threshold in a currency that does not exist", `{"threshold":"10000","currency":"ZZZ","approvers":["U1"]}`, []string{"currency"}},
		{"change thresholds", `{"threshold":"10000","currency":"USD","approvers":["U1"],"change_increase_threshold":"500.50","change_any_threshold":"250000"}`, nil},
		{"change thresholds wrong", `{"approvers":["U1"],"change_increase_threshold":"lots","change_any_threshold":"5"}`,
			[]string{`change_increase_threshold "lots"`, "change_any_threshold needs currency"}},
		// modify compares changes in the currency's minor units: a finer threshold used to pass
		// here and then stop the modify function at its cold start.
		{"change threshold finer than a cent", `{"threshold":"10000","currency":"USD","approvers":["U1"],"change_increase_threshold":"500.505"}`,
			[]string{`change_increase_threshold "500.505" has more decimals than USD has minor units`}},
		{"threshold finer than a yen, inherited by changes", `{"threshold":"10000.5","currency":"JPY","approvers":["U1"]}`,
			[]string{`change_increase_threshold "10000.5" (taken from threshold)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := approvalpolicy.Parse([]byte(tc.json))
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if p.OnTimeout == "" {
					t.Error("on_timeout has no default")
				}
				return
			}
			if err == nil {
				t.Fatalf("parsed %+v", p)
			}
			if !strings.HasPrefix(err.Error(), "approvalpolicy: ") {
				t.Errorf("error %q does not name its package", err)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// A change's increase threshold is the buy's threshold unless the policy names its own.
func TestChangeIncreaseThresholdDefaultsToTheBuysThreshold(t *testing.T) {
	t.Parallel()
	p, err := approvalpolicy.Parse([]byte(`{"threshold":"10000.00","currency":"USD","approvers":["U1"]}`))
	if err != nil || p.ChangeIncreaseThreshold != "10000.00" || p.ChangeAnyThreshold != "" {
		t.Fatalf("%+v %v", p, err)
	}
	p, err = approvalpolicy.Parse([]byte(`{"threshold":"10000.00","currency":"USD","approvers":["U1"],"change_increase_threshold":"0"}`))
	if err != nil || p.ChangeIncreaseThreshold != "0" {
		t.Fatalf("an explicit zero (every increase asks a person): %+v %v", p, err)
	}
}

func TestPolicyNeeds(t *testing.T) {
	t.Parallel()
	p, err := approvalpolicy.Parse([]byte(`{"threshold":"10000.00","currency":"USD","approvers":["U1"]}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		budget, currency string
		want             bool
		why              string
	}{
		{"9999.99", "USD", false, ""},
		{"10000", "USD", true, "at or over"},
		{"10000.000001", "usd", true, "at or over"},
		{"250000.00", "USD", true, "at or over"},
		{"5.00", "EUR", true, "in EUR"},
		{"", "USD", true, "cannot be compared"},
		{"1,000.00", "USD", true, "cannot be compared"},
	}
	for _, tc := range cases {
		got, why := p.Needs(tc.budget, tc.currency)
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("Needs(%q %q) = %v %q, want %v with %q", tc.budget, tc.currency, got, why, tc.want, tc.why)
		}
	}
	none, _ := approvalpolicy.Parse([]byte(`{"approvers":["U1"]}`))
	if got, _ := none.Needs("1000000000.00", "USD"); got {
		t.Error("a policy without a threshold asked for approval by amount")
	}
}

// A campaign's total is held to the threshold a single buy of that amount is, in the sentence
// a person reads, and fails closed the same way.
func TestPolicyNeedsCampaign(t *testing.T) {
	t.Parallel()
	p, err := approvalpolicy.Parse([]byte(`{"threshold":"10000.00","currency":"USD","approvers":["U1"]}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		total money.Amount
		want  bool
		why   string
	}{
		{money.Amount{Minor: 999999, Currency: "USD"}, false, ""},
		{money.Amount{Minor: 1000000, Currency: "USD"}, true, "the campaign's total 10000.00 USD is at or over the approval threshold 10000.00 USD"},
		{money.Amount{Minor: 5400000, Currency: "USD"}, true, "the campaign's total 54000.00 USD is at or over the approval threshold 10000.00 USD"},
		{money.Amount{Minor: 100, Currency: "EUR"}, true, "the campaign's total is in EUR but the approval threshold is in USD"},
		{money.Amount{Minor: 100, Currency: "JPY"}, true, "in JPY"},
		{money.Amount{Minor: -1, Currency: "USD"}, true, "cannot be compared"},
	}
	for _, tc := range cases {
		got, why := p.NeedsCampaign(tc.total)
		if got != tc.want || why != tc.why && !strings.Contains(why, tc.why) || tc.want != (why != "") {
			t.Errorf("NeedsCampaign(%+v) = %v %q, want %v with %q", tc.total, got, why, tc.want, tc.why)
		}
	}
	none, _ := approvalpolicy.Parse([]byte(`{"approvers":["U1"]}`))
	if got, _ := none.NeedsCampaign(money.Amount{Minor: 1e15, Currency: "USD"}); got {
		t.Error("a policy without a threshold asked for a campaign's approval by amount")
	}
}
