package buyerstoryboards

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

func call(tool string, at time.Duration, args map[string]any) Call {
	return Call{Tool: tool, Args: args, Time: time.Unix(0, 0).Add(at)}
}

// Each check kind fails on what the storyboards call wrong, so a pass in the table means the
// check looked.
func TestChecksFailOnWhatTheyRefuse(t *testing.T) {
	key := "2f0c9d1e-6a7b-4c8d-9e0f-1a2b3c4d5e6f"
	failed := call("create_media_buy", 0, map[string]any{"idempotency_key": key})
	failed.Fault, failed.ErrorCode = "scenario", "RATE_LIMITED"
	failed.Result = map[string]any{"adcp_error": map[string]any{"recovery": "transient"}}
	conflict := failed
	conflict.ErrorCode = "IDEMPOTENCY_CONFLICT"
	conflict.Result = map[string]any{"adcp_error": map[string]any{"recovery": "correctable"}}
	submitted := call("create_media_buy", 0, map[string]any{})
	submitted.Result = map[string]any{"status": "submitted", "task_id": "t1"}
	cases := []struct {
		name string
		v    Validation
		o    Observation
		want string
	}{
		{"uuid v4", Validation{Check: "request_field_format", Path: "idempotency_key", Format: "uuid_v4"},
			Observation{Calls: []Call{call("create_media_buy", 0, map[string]any{"idempotency_key": key})}}, Pass},
		{"not uuid v4", Validation{Check: "request_field_format", Path: "idempotency_key", Format: "uuid_v4"},
			Observation{Calls: []Call{call("create_media_buy", 0, map[string]any{"idempotency_key": "k-1"})}}, Fail},
		{"field absent", Validation{Check: "request_field_present", Path: "packages[0].product_id"},
			Observation{Calls: []Call{call("create_media_buy", 0, map[string]any{"packages": []any{map[string]any{}}})}}, Fail},
		{"field present", Validation{Check: "request_field_present", Path: "packages[0].product_id"},
			Observation{Calls: []Call{call("create_media_buy", 0, map[string]any{"packages": []any{map[string]any{"product_id": "p"}}})}}, Pass},
		{"version not advertised", Validation{Check: "request_field_in", Path: "adcp_version", Allowed: []any{"3.1"}},
			Observation{Calls: []Call{call("create_media_buy", 0, map[string]any{"adcp_version": "3.2"})}}, Fail},
		{"value", Validation{Check: "request_field_value", Path: "a", Value: 2},
			Observation{Calls: []Call{call("x", 0, map[string]any{"a": 2.0})}}, Pass},
		{"retry too soon", Validation{Check: "retry_delay", MinSeconds: 10},
			Observation{Calls: []Call{failed, call("create_media_buy", 9*time.Second, map[string]any{"idempotency_key": key})}}, Fail},
		{"retry late enough", Validation{Check: "retry_delay", MinSeconds: 10},
			Observation{Calls: []Call{failed, call("create_media_buy", 10*time.Second, map[string]any{"idempotency_key": key})}, Index: 1}, Pass},
		{"transient retried with a new key", Validation{Check: "response_handled", ResponseType: "error"},
			Observation{Calls: []Call{failed, call("create_media_buy", time.Second, map[string]any{"idempotency_key": "other"})}}, Fail},
		{"transient retried with the key", Validation{Check: "response_handled", ResponseType: "error"},
			Observation{Calls: []Call{failed, call("create_media_buy", time.Second, map[string]any{"idempotency_key": key})}}, Pass},
		{"conflict retried with the key", Validation{Check: "response_handled", ResponseType: "error"},
			Observation{Calls: []Call{conflict, call("create_media_buy", time.Second, map[string]any{"idempotency_key": key})}}, Fail},
		{"conflict retried with a fresh key", Validation{Check: "response_handled", ResponseType: "error"},
			Observation{Calls: []Call{conflict, call("create_media_buy", time.Second, map[string]any{"idempotency_key": "fresh"})}}, Pass},
		{"no error to handle", Validation{Check: "response_handled", ResponseType: "error"},
			Observation{Calls: []Call{call("create_media_buy", 0, nil)}}, Fail},
		{"submitted never polled", Validation{Check: "response_handled", ResponseType: "submitted"},
			Observation{Calls: []Call{submitted, call("get_task_status", time.Second, map[string]any{"task_id": "t2"})}}, Fail},
		{"submitted polled", Validation{Check: "response_handled", ResponseType: "submitted"},
			Observation{Calls: []Call{submitted, call("get_task_status", time.Second, map[string]any{"task_id": "t1"})}}, Pass},
		{"domain task before capabilities", Validation{Check: "task_not_called_before", Task: "get_products", Before: "get_adcp_capabilities"},
			Observation{Calls: []Call{call("get_products", 0, nil), call("get_adcp_capabilities", 0, nil)}, Index: -1}, Fail},
		{"capabilities never read", Validation{Check: "task_called", Task: "get_adcp_capabilities"},
			Observation{Calls: []Call{call("create_media_buy", 0, nil)}, Index: -1}, Fail},
		{"output lacks field", Validation{Check: "output_field_present", Path: "candidates[*].seller_id"},
			Observation{Index: -1, Output: map[string]any{"candidates": []any{map[string]any{"x": 1}}}}, Fail},
		{"output has field", Validation{Check: "output_field_present", Path: "candidates[*].seller_id"},
			Observation{Index: -1, Output: map[string]any{"candidates": []any{map[string]any{"seller_id": "a"}}}}, Pass},
		{"unknown kind", Validation{Check: "request_header_present"}, Observation{Index: -1}, Fail},
	}
	for _, c := range cases {
		if got := Grade(c.v, c.o); got.Result != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got.Result, got.Detail, c.want)
		}
	}
}

// The runner refuses a storyboard it cannot grade whole: a check kind the contract does not
// register, or a declared scenario no step is bound to.
func TestLoadRefusesWhatItCannotGrade(t *testing.T) {
	contract, err := os.ReadFile("testdata/universal/buyer-fixture-publisher.yaml")
	if err != nil {
		t.Fatal(err)
	}
	board := func(check string) []byte {
		return []byte("id: sb\nphases:\n  - id: p\n    steps:\n      - id: s\n        validations:\n          - check: " + check + "\n")
	}
	fsys := fstest.MapFS{
		"universal/buyer-fixture-publisher.yaml": {Data: contract},
		"specialisms/sb/index.yaml":              {Data: board("task_called")},
	}
	if _, boards, err := Load(fsys); err != nil || len(boards) != 1 {
		t.Fatalf("a known kind: %v", err)
	}
	fsys["specialisms/sb/index.yaml"] = &fstest.MapFile{Data: board("request_header_present")}
	if _, _, err := Load(fsys); err == nil || !strings.Contains(err.Error(), "request_header_present") {
		t.Errorf("an unknown kind: err = %v", err)
	}
	fsys["universal/buyer-fixture-publisher.yaml"] = &fstest.MapFile{Data: append(contract, "\n  brand_new_kind:\n    description: x\n"...)}
	fsys["specialisms/sb/index.yaml"] = &fstest.MapFile{Data: board("task_called")}
	if _, _, err := Load(fsys); err == nil || !strings.Contains(err.Error(), "brand_new_kind") {
		t.Errorf("a kind the contract registers and the runner cannot grade: err = %v", err)
	}
	sb, err := Parse([]byte("id: sb\nfixtures:\n  fixture_publisher:\n    scenarios:\n      brand_new_scenario:\n        error_code: X\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Seller(sb); err == nil || !strings.Contains(err.Error(), "brand_new_scenario") {
		t.Errorf("an unbound scenario: err = %v", err)
	}
}

// The storyboards come from upstream: a malformed one is an error, never a panic.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"specialisms/buyer-activation/index.yaml", "specialisms/buyer-recovery/index.yaml"} {
		b, err := os.ReadFile("testdata/" + p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("id: x\nphases: [{id: p, steps: [{id: s, validations: [{check: ''}]}]}]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sb, err := Parse(b)
		if err != nil {
			return
		}
		for _, p := range sb.Phases {
			for _, st := range p.Steps {
				_ = st.KeyAlias()
				for _, v := range st.Validations {
					_ = Grade(v, Observation{Index: 0, Calls: []Call{{Tool: st.Task, Args: st.SampleRequest}}})
				}
			}
		}
		_, _ = Seller(sb)
	})
}
