// Package iampolicy (internal/iampolicy) evaluates identity-based IAM policies the way AWS does
// for one principal: an explicit Deny wins, then any Allow, else the call is implicitly denied.
// It reads the statements of a synthesized CloudFormation template (template.go), so the local
// stack can refuse each function's AWS calls exactly as the function's role would on AWS.
//
// What it models: Action/NotAction and Resource/NotResource with the * and ? wildcards (actions
// case-insensitively, resources case-sensitively), and the condition operators listed in
// operators. A condition operator it does not know is an error when the policy is read, never
// a silent Allow.
package iampolicy

import (
	"fmt"
	"strings"
)

// Statement is one policy statement with its values resolved to strings.
type Statement struct {
	Effect      string
	Action      []string
	NotAction   []string
	Resource    []string
	NotResource []string
	// Condition is operator → key → values.
	Condition map[string]map[string][]string
	// Source names where the statement comes from (policy logical id and index), for reports.
	Source string
}

// Policy is every statement that applies to one principal.
type Policy []Statement

// Request is one authorization question: may the principal do Action on Resource, with the
// request's condition keys in Context ("*" is the resource of actions that have no
// resource-level permissions).
type Request struct {
	Action   string
	Resource string
	Context  map[string][]string
}

// Decision is the answer to a Request: the statement that decided it (nil for an implicit deny).
type Decision struct {
	Allowed   bool
	Statement *Statement
}

// Evaluate decides r: an explicit Deny that matches wins over every Allow.
func (p Policy) Evaluate(r Request) Decision {
	var allow *Statement
	for i := range p {
		s := &p[i]
		if !s.matches(r) {
			continue
		}
		if s.Effect == "Deny" {
			return Decision{Statement: s}
		}
		if allow == nil {
			allow = s
		}
	}
	return Decision{Allowed: allow != nil, Statement: allow}
}

func (s *Statement) matches(r Request) bool {
	if len(s.Action) > 0 && !anyMatch(s.Action, r.Action, true) {
		return false
	}
	if len(s.NotAction) > 0 && anyMatch(s.NotAction, r.Action, true) {
		return false
	}
	if len(s.Resource) > 0 && !anyMatch(s.Resource, r.Resource, false) {
		return false
	}
	if len(s.NotResource) > 0 && anyMatch(s.NotResource, r.Resource, false) {
		return false
	}
	for op, keys := range s.Condition {
		for key, values := range keys {
			if !conditionHolds(op, r.Context[key], values) {
				return false
			}
		}
	}
	return true
}

func anyMatch(patterns []string, v string, fold bool) bool {
	for _, p := range patterns {
		if fold {
			if Match(strings.ToLower(p), strings.ToLower(v)) {
				return true
			}
		} else if Match(p, v) {
			return true
		}
	}
	return false
}

// Match reports whether v matches the IAM pattern p: * is any run of characters (also none,
// also across colons and slashes), ? exactly one.
func Match(p, v string) bool {
	// Iterative glob with backtracking to the last star: linear in practice, never exponential.
	pi, vi, star, mark := 0, 0, -1, 0
	for vi < len(v) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == v[vi]):
			pi++
			vi++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, vi
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			vi = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// operators are the condition operators the evaluator knows; each tests one context value
// against one policy value.
var operators = map[string]func(have, want string) bool{
	"StringEquals":              func(h, w string) bool { return h == w },
	"StringNotEquals":           func(h, w string) bool { return h == w },
	"StringEqualsIgnoreCase":    strings.EqualFold,
	"StringNotEqualsIgnoreCase": strings.EqualFold,
	"StringLike":                func(h, w string) bool { return Match(w, h) },
	"StringNotLike":             func(h, w string) bool { return Match(w, h) },
	"ArnEquals":                 func(h, w string) bool { return h == w },
	"ArnNotEquals":              func(h, w string) bool { return h == w },
	"ArnLike":                   func(h, w string) bool { return Match(w, h) },
	"ArnNotLike":                func(h, w string) bool { return Match(w, h) },
	"Bool":                      strings.EqualFold,
}

// negated operators hold when no context value matches any policy value.
func negated(op string) bool { return strings.Contains(op, "Not") }

// checkOperator returns an error for an operator Evaluate cannot decide.
func checkOperator(op string) error {
	base := strings.TrimSuffix(op, "IfExists")
	if i := strings.Index(base, ":"); i >= 0 {
		return fmt.Errorf("iampolicy: condition set operator %s is not supported", op)
	}
	if base == "Null" {
		return nil
	}
	if _, ok := operators[base]; !ok {
		return fmt.Errorf("iampolicy: condition operator %s is not supported", op)
	}
	return nil
}

// conditionHolds applies op to the context values have (several for a multi-valued key: any
// one matching is enough) and the policy values want (any one matching is enough).
func conditionHolds(op string, have, want []string) bool {
	base, ifExists := strings.CutSuffix(op, "IfExists")
	if base == "Null" {
		// Null: "true" holds when the key is absent, "false" when it is present.
		for _, w := range want {
			if strings.EqualFold(w, "true") == (len(have) == 0) {
				return true
			}
		}
		return false
	}
	if len(have) == 0 {
		return ifExists
	}
	test, ok := operators[base]
	if !ok {
		return false // checkOperator refused it when the policy was read
	}
	matched := false
	for _, h := range have {
		for _, w := range want {
			if test(h, w) {
				matched = true
			}
		}
	}
	if negated(base) {
		return !matched
	}
	return matched
}
