package buyerstoryboards

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/adcptest"
)

// CheckKinds are the check kinds the runner grades: every one the contract registers.
var CheckKinds = []string{
	"request_field_present", "request_field_in", "request_field_format", "request_field_value",
	"retry_delay", "response_handled", "task_called", "task_not_called_before",
	"output_contains", "output_field_present",
}

// Results of a step or a check.
const (
	Pass          = "pass"
	Fail          = "fail"
	NotApplicable = "not applicable"
)

// Call is one tool call the fixture seller recorded, decoded.
type Call struct {
	Tool      string
	Args      map[string]any
	Time      time.Time
	Fault     string // an injected answer: "scenario", "http_401", "http_503", …
	ErrorCode string
	Result    map[string]any
}

// Calls decodes a seller's log.
func Calls(log []adcptest.Call) []Call {
	out := make([]Call, 0, len(log))
	for _, c := range log {
		d := Call{Tool: c.Tool, Time: c.Time, Fault: c.Fault, ErrorCode: c.ErrorCode}
		_ = json.Unmarshal(c.Arguments, &d.Args)
		_ = json.Unmarshal(c.Result, &d.Result)
		out = append(out, d)
	}
	return out
}

// Failed reports whether the call was answered with an error (a tool error or an HTTP one).
func (c Call) Failed() bool { return c.ErrorCode != "" || strings.HasPrefix(c.Fault, "http_") }

// Key is the call's idempotency_key.
func (c Call) Key() string { s, _ := c.Args["idempotency_key"].(string); return s }

// Observation is what one step is graded on: the run's calls in order, the index of the call
// that is the step's request (-1: none), and buyflow's output for the output checks.
type Observation struct {
	Calls  []Call
	Index  int
	Output map[string]any
}

// CheckResult is one graded check.
type CheckResult struct {
	Check  string
	Result string
	Detail string
}

// Grade grades one check on o.
func Grade(v Validation, o Observation) CheckResult {
	r := CheckResult{Check: v.Check}
	ok, detail := grade(v, o)
	r.Result, r.Detail = Fail, detail
	if ok {
		r.Result = Pass
	}
	return r
}

func grade(v Validation, o Observation) (bool, string) {
	req := func() (Call, bool) {
		if o.Index < 0 || o.Index >= len(o.Calls) {
			return Call{}, false
		}
		return o.Calls[o.Index], true
	}
	switch v.Check {
	case "request_field_present", "request_field_in", "request_field_format", "request_field_value":
		c, ok := req()
		if !ok {
			return false, "buyflow made no such request"
		}
		vals := Lookup(c.Args, v.Path)
		if len(vals) == 0 || vals[0] == nil {
			return false, fmt.Sprintf("the %s request has no %s", c.Tool, v.Path)
		}
		got := vals[0]
		switch v.Check {
		case "request_field_in":
			for _, a := range v.Allowed {
				if reflect.DeepEqual(normal(a), normal(got)) {
					return true, fmt.Sprintf("%s = %v", v.Path, got)
				}
			}
			return false, fmt.Sprintf("%s = %v, not in %v", v.Path, got, v.Allowed)
		case "request_field_format":
			if ok, why := format(v.Format, got); !ok {
				return false, fmt.Sprintf("%s = %v: %s", v.Path, got, why)
			}
		case "request_field_value":
			if !reflect.DeepEqual(normal(v.Value), normal(got)) {
				return false, fmt.Sprintf("%s = %v, want %v", v.Path, got, v.Value)
			}
		}
		return true, fmt.Sprintf("%s = %v", v.Path, clip(got))
	case "retry_delay":
		// Between a failed attempt and its retry: the step's request is either (the storyboards
		// grade it on the failing step, as buyer_recovery's rate_limited, or on the retry, as
		// buyer_activation's create_buy_retry).
		c, ok := req()
		if !ok {
			return false, "buyflow made no such request"
		}
		failed, retry := -1, -1
		if c.Failed() {
			failed = o.Index
			for i := o.Index + 1; i < len(o.Calls); i++ {
				if o.Calls[i].Tool == c.Tool {
					retry = i
					break
				}
			}
		} else {
			retry = o.Index
			for i := o.Index - 1; i >= 0; i-- {
				if p := o.Calls[i]; p.Tool == c.Tool && p.Failed() {
					failed = i
					break
				}
			}
		}
		if failed < 0 || retry < 0 {
			return false, "no failed attempt of " + c.Tool + " followed by a retry"
		}
		d := o.Calls[retry].Time.Sub(o.Calls[failed].Time)
		if d.Seconds() < v.MinSeconds {
			return false, fmt.Sprintf("retried %s sooner than %g s after the failure", c.Tool, v.MinSeconds)
		}
		return true, fmt.Sprintf("retried after %.3f s", d.Seconds())
	case "response_handled":
		c, ok := req()
		if !ok {
			return false, "buyflow made no such request"
		}
		return handled(v.ResponseType, c, o.Calls[o.Index+1:])
	case "task_called":
		for _, c := range o.Calls {
			if c.Tool == v.Task {
				return true, v.Task + " called"
			}
		}
		return false, v.Task + " never called"
	case "task_not_called_before":
		for _, c := range o.Calls {
			switch c.Tool {
			case v.Before:
				return true, v.Before + " came first"
			case v.Task:
				return false, v.Task + " called before " + v.Before
			}
		}
		return true, v.Task + " never called"
	case "output_contains":
		if _, ok := o.Output[v.Field]; ok {
			return true, v.Field + " in buyflow's output"
		}
		return false, "buyflow's output has no " + v.Field
	case "output_field_present":
		if vals := Lookup(o.Output, v.Path); len(vals) > 0 && vals[0] != nil {
			return true, fmt.Sprintf("%s = %v", v.Path, clip(vals[0]))
		}
		return false, "buyflow's output has no " + v.Path
	}
	return false, "unknown check kind " + v.Check
}

// handled grades the buyer's next action after the answer to c (the check kind
// response_handled): after submitted, a poll with the task_id (or a webhook registered on the
// request); after an error, what its class calls for: a transient error (HTTP 5xx, 401 with a
// fresh token, RATE_LIMITED, SERVICE_UNAVAILABLE) the same request with the same
// idempotency_key, IDEMPOTENCY_CONFLICT a fresh key, any other error no resend of the same key.
func handled(want string, c Call, after []Call) (bool, string) {
	switch want {
	case "submitted":
		status, _ := c.Result["status"].(string)
		task, _ := c.Result["task_id"].(string)
		if status != "submitted" || task == "" {
			return false, fmt.Sprintf("the answer was %q (task %q), not submitted", status, task)
		}
		for _, n := range after {
			if (n.Tool == "get_task_status" || n.Tool == "tasks/get") && n.Args["task_id"] == task {
				return true, n.Tool + " with task_id " + task
			}
		}
		if pc, _ := c.Args["push_notification_config"].(map[string]any); pc != nil && pc["url"] != nil {
			return true, "a webhook was registered on the request"
		}
		return false, "no poll with task_id " + task + " and no webhook"
	case "error":
		if !c.Failed() {
			return false, "the answer was not an error (the scenario did not fire)"
		}
		code := c.ErrorCode
		var next *Call
		for i := range after {
			if after[i].Tool == c.Tool {
				next = &after[i]
				break
			}
		}
		switch {
		case code == "IDEMPOTENCY_CONFLICT":
			if next == nil {
				return false, "IDEMPOTENCY_CONFLICT: no retry with a fresh idempotency_key"
			}
			if next.Key() == c.Key() {
				return false, "IDEMPOTENCY_CONFLICT: retried with the same idempotency_key"
			}
			return true, "retried with a fresh idempotency_key"
		case transient(c):
			if next == nil {
				return false, code + ": no retry"
			}
			if next.Key() != c.Key() {
				return false, code + ": retried with another idempotency_key"
			}
			return true, fmt.Sprintf("%s: retried with the same idempotency_key (%s)", code, c.Fault)
		default:
			if next != nil && next.Key() == c.Key() {
				return false, code + ": resent the refused request"
			}
			return true, code + ": not resent"
		}
	}
	return false, "unknown response_type " + want
}

// transient reports whether the error answering c is one to retry unchanged: an HTTP 5xx or
// 429, a 401 (the buyer re-authenticates and resends), or a transient AdCP error.
func transient(c Call) bool {
	if st, ok := strings.CutPrefix(c.Fault, "http_"); ok {
		n, _ := strconv.Atoi(st)
		return n == 401 || n == 429 || n >= 500
	}
	e, _ := c.Result["adcp_error"].(map[string]any)
	return e["recovery"] == "transient"
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// format checks a value against a named format of the check kind request_field_format.
func format(name string, v any) (bool, string) {
	s, ok := v.(string)
	if !ok {
		return false, "not a string"
	}
	switch name {
	case "uuid_v4":
		return uuidV4.MatchString(s), "not a lower-case UUID v4"
	case "iso8601":
		_, err := time.Parse(time.RFC3339, s)
		return err == nil, "not an RFC 3339 date-time"
	case "url":
		u, err := url.Parse(s)
		return err == nil && u.Scheme != "" && u.Host != "", "not an absolute URL"
	}
	return false, "unknown format " + name
}

// Lookup resolves a dot path with [n] and [*] segments ("packages[0].product_id",
// "candidates[*].delivery_type") and returns every value it reaches.
func Lookup(root any, p string) []any {
	cur := []any{root}
	for _, seg := range strings.Split(p, ".") {
		name, rest, _ := strings.Cut(seg, "[")
		var next []any
		for _, v := range cur {
			if name != "" {
				m, _ := v.(map[string]any)
				x, ok := m[name]
				if !ok {
					continue
				}
				v = x
			}
			next = append(next, v)
		}
		for rest != "" {
			idx, tail, _ := strings.Cut(rest, "]")
			rest = strings.TrimPrefix(tail, "[")
			var sub []any
			for _, v := range next {
				arr, _ := v.([]any)
				if idx == "*" {
					sub = append(sub, arr...)
				} else if n, err := strconv.Atoi(idx); err == nil && n >= 0 && n < len(arr) {
					sub = append(sub, arr[n])
				}
			}
			next = sub
		}
		cur = next
	}
	return cur
}

// normal makes YAML and JSON numbers comparable.
func normal(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	}
	return v
}

func clip(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
