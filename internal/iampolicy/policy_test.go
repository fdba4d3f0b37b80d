package iampolicy

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		p, v string
		want bool
	}{
		{"*", "", true},
		{"*", "arn:aws:dynamodb:us-east-1:1:table/t", true},
		{"arn:aws:secretsmanager:r:a:secret:Buyflow/agents/*", "arn:aws:secretsmanager:r:a:secret:Buyflow/agents/seller-AbCdEf", true},
		{"arn:aws:secretsmanager:r:a:secret:Buyflow/agents/*", "arn:aws:secretsmanager:r:a:secret:Buyflow/slack-AbCdEf", false},
		{"arn:aws:states:r:a:execution:Buyflow-MediaBuy:*", "arn:aws:states:r:a:execution:Buyflow-MediaBuy:op1", true},
		{"arn:aws:states:r:a:execution:Buyflow-MediaBuy:*", "arn:aws:states:r:a:execution:Buyflow-Campaign:op1", false},
		{"table/t", "table/t/index/gsi1", false},
		{"table/t*", "table/t/index/gsi1", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"*a*b*", "xxaxxbxx", true},
		{"*a*b*", "xxbxxaxx", false},
	} {
		if got := Match(c.p, c.v); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.p, c.v, got, c.want)
		}
	}
}

func TestEvaluate(t *testing.T) {
	table := "arn:aws:dynamodb:us-east-1:123456789012:table/Ledger"
	p := Policy{
		{Effect: "Allow", Action: []string{"dynamodb:GetItem", "dynamodb:PutItem"}, Resource: []string{table, table + "/index/*"}, Source: "ddb"},
		{Effect: "Allow", Action: []string{"states:SendTask*"}, Resource: []string{"*"}, Source: "tokens"},
		{Effect: "Allow", NotAction: []string{"iam:*", "dynamodb:DeleteTable"}, Resource: []string{"arn:aws:events:*"}, Source: "notaction"},
		{Effect: "Deny", Action: []string{"dynamodb:PutItem"}, Resource: []string{table}, Condition: map[string]map[string][]string{
			"StringEquals": {"aws:RequestTag/env": {"prod"}},
		}, Source: "deny-prod"},
		{Effect: "Allow", Action: []string{"secretsmanager:GetSecretValue"}, Resource: []string{"*"}, Condition: map[string]map[string][]string{
			"StringLike": {"secretsmanager:SecretId": {"Buyflow/*"}},
		}, Source: "cond"},
	}
	for _, c := range []struct {
		name string
		r    Request
		want string // deciding statement; "" for an implicit deny
		ok   bool
	}{
		{"allowed action on the table", Request{Action: "dynamodb:GetItem", Resource: table}, "ddb", true},
		{"actions are case-insensitive", Request{Action: "DynamoDB:getitem", Resource: table}, "ddb", true},
		{"an index through the wildcard", Request{Action: "dynamodb:GetItem", Resource: table + "/index/gsi1"}, "ddb", true},
		{"an action not granted", Request{Action: "dynamodb:Scan", Resource: table}, "", false},
		{"another table", Request{Action: "dynamodb:GetItem", Resource: table + "2"}, "", false},
		{"resources are case-sensitive", Request{Action: "dynamodb:GetItem", Resource: strings.ToLower(table)}, "", false},
		{"wildcard action", Request{Action: "states:SendTaskSuccess", Resource: "*"}, "tokens", true},
		{"NotAction allows the rest", Request{Action: "events:PutEvents", Resource: "arn:aws:events:r:a:event-bus/b"}, "notaction", true},
		{"NotAction excludes", Request{Action: "iam:PassRole", Resource: "arn:aws:events:r:a:x"}, "", false},
		{"Deny wins over Allow", Request{Action: "dynamodb:PutItem", Resource: table, Context: map[string][]string{"aws:RequestTag/env": {"prod"}}}, "deny-prod", false},
		{"the Deny's condition does not hold", Request{Action: "dynamodb:PutItem", Resource: table, Context: map[string][]string{"aws:RequestTag/env": {"dev"}}}, "ddb", true},
		{"condition holds", Request{Action: "secretsmanager:GetSecretValue", Resource: "x", Context: map[string][]string{"secretsmanager:SecretId": {"Buyflow/slack"}}}, "cond", true},
		{"condition fails", Request{Action: "secretsmanager:GetSecretValue", Resource: "x", Context: map[string][]string{"secretsmanager:SecretId": {"Other/slack"}}}, "", false},
		{"condition key absent", Request{Action: "secretsmanager:GetSecretValue", Resource: "x"}, "", false},
	} {
		d := p.Evaluate(c.r)
		got := ""
		if d.Statement != nil {
			got = d.Statement.Source
		}
		if d.Allowed != c.ok || got != c.want {
			t.Errorf("%s: allowed %v by %q, want %v by %q", c.name, d.Allowed, got, c.ok, c.want)
		}
	}
}

func TestConditionOperators(t *testing.T) {
	for _, c := range []struct {
		op         string
		have, want []string
		holds      bool
	}{
		{"StringNotEquals", []string{"a"}, []string{"b"}, true},
		{"StringNotEquals", []string{"a"}, []string{"a", "b"}, false},
		{"StringEqualsIgnoreCase", []string{"ABC"}, []string{"abc"}, true},
		{"ArnLike", []string{"arn:aws:s3:::b/k"}, []string{"arn:aws:s3:::b/*"}, true},
		{"ArnNotLike", []string{"arn:aws:s3:::b/k"}, []string{"arn:aws:s3:::b/*"}, false},
		{"Bool", []string{"true"}, []string{"true"}, true},
		{"StringEqualsIfExists", nil, []string{"x"}, true},
		{"StringEquals", nil, []string{"x"}, false},
		{"Null", nil, []string{"true"}, true},
		{"Null", []string{"v"}, []string{"true"}, false},
		{"Null", []string{"v"}, []string{"false"}, true},
	} {
		if got := conditionHolds(c.op, c.have, c.want); got != c.holds {
			t.Errorf("%s %v %v = %v, want %v", c.op, c.have, c.want, got, c.holds)
		}
	}
	for _, op := range []string{"NumericLessThan", "ForAnyValue:StringEquals", "DateGreaterThan"} {
		if checkOperator(op) == nil {
			t.Errorf("operator %s accepted, but Evaluate cannot decide it", op)
		}
	}
}
