package modify

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParsePatchRefusesBadInputWithACode(t *testing.T) {
	cases := map[string]struct {
		body   string
		status int
		code   string
		field  string
	}{
		"not json":          {`{"paused":`, 400, "invalid_json", ""},
		"array":             {`[]`, 400, "invalid_type", "/"},
		"two values":        {`{"paused":true} {}`, 400, "invalid_json", ""},
		"unknown field":     {`{"paused":true,"canceled":true}`, 400, "unknown_field", "/canceled"},
		"wrong type":        {`{"paused":"yes"}`, 400, "invalid_type", "/paused"},
		"nothing":           {`{}`, 422, "no_change", ""},
		"reason only":       {`{"reason":"x"}`, 422, "no_change", ""},
		"two changes":       {`{"paused":true,"end_time":"2027-01-01T00:00:00Z"}`, 422, "several_changes", ""},
		"total and pkgs":    {`{"budget":{"total":1,"packages":[{"package_id":"a","budget":1}]}}`, 422, "ambiguous_budget", "/budget"},
		"empty budget":      {`{"budget":{}}`, 422, "empty_budget", "/budget"},
		"empty package id":  {`{"budget":{"packages":[{"package_id":" ","budget":1}]}}`, 422, "invalid_package_id", "/budget/packages/0/package_id"},
		"duplicate package": {`{"budget":{"packages":[{"package_id":"a","budget":1},{"package_id":"a","budget":2}]}}`, 422, "duplicate_package", "/budget/packages/1/package_id"},
		"missing budget":    {`{"budget":{"packages":[{"package_id":"a"}]}}`, 422, "invalid_budget", "/budget/packages/0/budget"},
		"bad end time":      {`{"end_time":"next tuesday"}`, 422, "invalid_end_time", "/end_time"},
		"long reason":       {`{"paused":true,"reason":"` + strings.Repeat("é", MaxReasonChars+1) + `"}`, 422, "invalid_reason", "/reason"},
		"huge":              {`{"reason":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, 413, "body_too_large", ""},
		"not utf8":          {"{\"reason\":\"\xff\"}", 400, "invalid_json", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePatch([]byte(tc.body))
			var re *RequestError
			if !errors.As(err, &re) || re.Status != tc.status || re.Code != tc.code || re.Field != tc.field || re.Message == "" {
				t.Fatalf("ParsePatch = %#v, want %d %s at %q", err, tc.status, tc.code, tc.field)
			}
		})
	}
}

func TestParsePatchReadsEachKind(t *testing.T) {
	for body, kind := range map[string]Kind{
		`{"budget":{"total":25000}}`:                                       KindBudget,
		`{"budget":{"packages":[{"package_id":"p1","budget":"12000.5"}]}}`: KindBudget,
		`{"end_time":"2027-01-31T23:59:59Z"}`:                              KindEndTime,
		`{"paused":true,"reason":"creative refresh"}`:                      KindPause,
		`{"paused":false}`:                                                 KindResume,
	} {
		c, err := ParsePatch([]byte(body))
		if err != nil || c.Kind != kind {
			t.Errorf("%s: %+v %v, want %s", body, c, err, kind)
		}
	}
}

func TestParseCancelNeedsAReason(t *testing.T) {
	for _, body := range []string{`{}`, `{"reason":"   "}`} {
		_, err := ParseCancel([]byte(body))
		var re *RequestError
		if !errors.As(err, &re) || re.Code != "reason_required" {
			t.Errorf("%s: %v", body, err)
		}
	}
	c, err := ParseCancel([]byte(`{"reason":" campaign ended early "}`))
	if err != nil || c.Kind != KindCancel || c.Reason != "campaign ended early" {
		t.Fatalf("%+v %v", c, err)
	}
}

// FuzzParsePatch feeds change bodies to the parser and the planner. Neither may panic; a
// refusal is a 4xx *RequestError with a code and a message; an accepted change plans against a
// placed buy to arguments whose budget after the change equals the sum of its packages.
func FuzzParsePatch(f *testing.F) {
	for _, s := range []string{
		`{"budget":{"total":25000}}`, `{"budget":{"packages":[{"package_id":"pkg-a","budget":1e3}]}}`,
		`{"budget":{"packages":[{"package_id":"pkg-b","budget":1e10000000}]}}`, `{"end_time":"2027-01-31T23:59:59Z"}`,
		`{"paused":true,"reason":"x"}`, `{"paused":false}`, `{"reason":"stop"}`, `null`, `{"budget":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, parse := range []func([]byte) (Change, error){ParsePatch, ParseCancel} {
			c, err := parse(body)
			if err != nil {
				var re *RequestError
				if !errors.As(err, &re) || re.Status < 400 || re.Status > 499 || re.Code == "" || re.Message == "" {
					t.Fatalf("refusal %v is not a 4xx RequestError", err)
				}
				continue
			}
			b := placed(t)
			p, err := Plan(b, c, "chg-1", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			if err != nil {
				var re *RequestError
				if !errors.As(err, &re) || re.Status != 422 || re.Code == "" {
					t.Fatalf("plan refusal %v is not a 422 RequestError", err)
				}
				continue
			}
			if sum := (Buy{Currency: "USD", Packages: p.Packages}).Total(); sum != p.After || p.Before != b.Total() {
				t.Fatalf("after %v is not the sum of the packages %v", p.After, sum)
			}
		}
	})
}
