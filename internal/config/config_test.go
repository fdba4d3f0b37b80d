package config

import (
	"strings"
	"testing"
)

func TestReportsEveryProblemTogether(t *testing.T) {
	vars := map[string]string{"SET": " value ", "BAD_JSON": "{nope", "UNKNOWN_FIELD": `{"b":1}`, "GOOD_JSON": `{"a":2}`}
	e := New(func(k string) string { return vars[k] })
	if e.Required("SET") != "value" || e.Optional("MISSING_OPT", "d") != "d" {
		t.Fatal("values wrong")
	}
	e.Required("MISSING_A")
	e.Required("MISSING_B")
	var v struct{ A int }
	e.JSON("BAD_JSON", true, &v)
	e.JSON("UNKNOWN_FIELD", false, &v)
	e.JSON("GOOD_JSON", true, &v)
	e.JSON("ABSENT_JSON", false, &v)
	if v.A != 2 {
		t.Fatalf("decoded %+v", v)
	}
	err := e.Err()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"MISSING_A is not set", "MISSING_B is not set", "BAD_JSON is not valid", "UNKNOWN_FIELD is not valid"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q missing from %q", want, err)
		}
	}
	if strings.Contains(err.Error(), "ABSENT_JSON") || strings.Contains(err.Error(), "GOOD_JSON") {
		t.Errorf("unexpected problem in %q", err)
	}
	if New(func(string) string { return "x" }).Err() != nil {
		t.Fatal("error without problems")
	}
}
