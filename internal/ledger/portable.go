package ledger

import (
	"context"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// EmulatorCompat is the DynamoDB client option that rewrites every request (PutItem, UpdateItem,
// DeleteItem, GetItem, Query, Scan, TransactWriteItems) to a copy whose expressions mean the
// same to DynamoDB but are also evaluated correctly by kumo v0.33.1, the emulator of the local
// stack and the tests. It works around two kumo defects hit by what feature/dynamodb/expression
// builds:
//
//   - kumo recognizes an update clause keyword (SET, REMOVE, ADD, DELETE) only after a space, but
//     the builder separates clauses with "\n": "REMOVE #0\nSET #1 = :0" is silently mis-applied
//     (neither clause takes effect, and the write still succeeds). Whitespace runs become one
//     space.
//   - kumo substitutes name placeholders with strings.ReplaceAll in map order, so with 11 or more
//     names "#1" may clobber "#10". Placeholders are renamed to prefix-free "#<n>_".
//
// The caller's input and maps are not modified; applying it twice is harmless. It is installed
// once, on the client of an emulator endpoint (functions/internal/wire when AWS_ENDPOINT_URL is
// set, internal/dynamotest, the local stack): requests to DynamoDB itself go out as built.
func EmulatorCompat(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("EmulatorCompat",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				in.Parameters = rewrite(in.Parameters)
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

var placeholder = regexp.MustCompile(`#[A-Za-z0-9_]+`)

// fixer renames placeholders into a fresh names map; the caller's maps are not modified.
type fixer struct{ names map[string]string }

func newFixer(names map[string]string) *fixer {
	if names == nil {
		return nil
	}
	renamed := true
	for k := range names {
		renamed = renamed && strings.HasSuffix(k, "_")
	}
	if renamed { // already portable
		return &fixer{}
	}
	out := make(map[string]string, len(names))
	for k, v := range names {
		out[k+"_"] = v
	}
	return &fixer{names: out}
}

func (f *fixer) expr(p *string) *string {
	if p == nil {
		return nil
	}
	s := strings.Join(strings.Fields(*p), " ")
	if f != nil && f.names != nil {
		s = placeholder.ReplaceAllStringFunc(s, func(m string) string {
			if _, ok := f.names[m+"_"]; ok {
				return m + "_"
			}
			return m
		})
	}
	return &s
}

func (f *fixer) namesMap(orig map[string]string) map[string]string {
	if f == nil || f.names == nil {
		return orig
	}
	return f.names
}

func rewrite(params any) any {
	switch v := params.(type) {
	case *dynamodb.PutItemInput:
		c := *v
		return fix(&c, &c.ExpressionAttributeNames, &c.ConditionExpression)
	case *dynamodb.UpdateItemInput:
		c := *v
		return fix(&c, &c.ExpressionAttributeNames, &c.ConditionExpression, &c.UpdateExpression)
	case *dynamodb.DeleteItemInput:
		c := *v
		return fix(&c, &c.ExpressionAttributeNames, &c.ConditionExpression)
	case *dynamodb.GetItemInput:
		c := *v
		return fix(&c, &c.ExpressionAttributeNames, &c.ProjectionExpression)
	case *dynamodb.QueryInput:
		c := *v
		return fix(&c, &c.ExpressionAttributeNames, &c.KeyConditionExpression, &c.FilterExpression, &c.ProjectionExpression)
	case *dynamodb.ScanInput:
		c := *v
		return fix(&c, &c.ExpressionAttributeNames, &c.FilterExpression, &c.ProjectionExpression)
	case *dynamodb.TransactWriteItemsInput:
		c := *v
		c.TransactItems = make([]types.TransactWriteItem, len(v.TransactItems))
		for i, it := range v.TransactItems {
			c.TransactItems[i] = rewriteTransactItem(it)
		}
		return &c
	}
	return params
}

func rewriteTransactItem(it types.TransactWriteItem) types.TransactWriteItem {
	switch {
	case it.Put != nil:
		p := *it.Put
		it.Put = fix(&p, &p.ExpressionAttributeNames, &p.ConditionExpression)
	case it.Update != nil:
		u := *it.Update
		it.Update = fix(&u, &u.ExpressionAttributeNames, &u.ConditionExpression, &u.UpdateExpression)
	case it.Delete != nil:
		d := *it.Delete
		it.Delete = fix(&d, &d.ExpressionAttributeNames, &d.ConditionExpression)
	case it.ConditionCheck != nil:
		cc := *it.ConditionCheck
		it.ConditionCheck = fix(&cc, &cc.ExpressionAttributeNames, &cc.ConditionExpression)
	}
	return it
}

// fix rewrites, in c (a copy of a request or of a transaction's item), the expressions exprs and
// the names map they share, and returns c.
func fix[T any](c *T, names *map[string]string, exprs ...**string) *T {
	f := newFixer(*names)
	for _, e := range exprs {
		*e = f.expr(*e)
	}
	*names = f.namesMap(*names)
	return c
}
