package dynamotest

import (
	"context"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// KumoCompat is a client option that rewrites requests so that kumo v0.33.1 evaluates them as
// DynamoDB does; AWS accepts the rewritten requests unchanged in meaning. It works around two
// kumo defects hit by expressions that feature/dynamodb/expression builds:
//
//   - kumo only recognizes an update clause keyword (SET, REMOVE, ADD, DELETE) preceded by a
//     space, but the builder separates clauses with "\n": "REMOVE #0\nSET #1 = :0" is silently
//     mis-applied (neither clause takes effect). Newlines become spaces.
//   - kumo substitutes name placeholders with strings.ReplaceAll in map order, so with 11 or more
//     names "#1" may clobber "#10". Placeholders are renamed to prefix-free "#<n>_".
//
// Pass it to dynamodb.New or dynamodb.NewFromConfig when the endpoint is kumo (the local stack
// should do the same).
func KumoCompat(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("KumoCompat",
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
	if f != nil {
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
	if f == nil {
		return orig
	}
	return f.names
}

func rewrite(params any) any {
	switch v := params.(type) {
	case *dynamodb.PutItemInput:
		c := *v
		f := newFixer(c.ExpressionAttributeNames)
		c.ConditionExpression = f.expr(c.ConditionExpression)
		c.ExpressionAttributeNames = f.namesMap(c.ExpressionAttributeNames)
		return &c
	case *dynamodb.UpdateItemInput:
		c := *v
		f := newFixer(c.ExpressionAttributeNames)
		c.ConditionExpression = f.expr(c.ConditionExpression)
		c.UpdateExpression = f.expr(c.UpdateExpression)
		c.ExpressionAttributeNames = f.namesMap(c.ExpressionAttributeNames)
		return &c
	case *dynamodb.DeleteItemInput:
		c := *v
		f := newFixer(c.ExpressionAttributeNames)
		c.ConditionExpression = f.expr(c.ConditionExpression)
		c.ExpressionAttributeNames = f.namesMap(c.ExpressionAttributeNames)
		return &c
	case *dynamodb.GetItemInput:
		c := *v
		f := newFixer(c.ExpressionAttributeNames)
		c.ProjectionExpression = f.expr(c.ProjectionExpression)
		c.ExpressionAttributeNames = f.namesMap(c.ExpressionAttributeNames)
		return &c
	case *dynamodb.QueryInput:
		c := *v
		f := newFixer(c.ExpressionAttributeNames)
		c.KeyConditionExpression = f.expr(c.KeyConditionExpression)
		c.FilterExpression = f.expr(c.FilterExpression)
		c.ProjectionExpression = f.expr(c.ProjectionExpression)
		c.ExpressionAttributeNames = f.namesMap(c.ExpressionAttributeNames)
		return &c
	case *dynamodb.ScanInput:
		c := *v
		f := newFixer(c.ExpressionAttributeNames)
		c.FilterExpression = f.expr(c.FilterExpression)
		c.ProjectionExpression = f.expr(c.ProjectionExpression)
		c.ExpressionAttributeNames = f.namesMap(c.ExpressionAttributeNames)
		return &c
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
		f := newFixer(p.ExpressionAttributeNames)
		p.ConditionExpression = f.expr(p.ConditionExpression)
		p.ExpressionAttributeNames = f.namesMap(p.ExpressionAttributeNames)
		it.Put = &p
	case it.Update != nil:
		u := *it.Update
		f := newFixer(u.ExpressionAttributeNames)
		u.ConditionExpression = f.expr(u.ConditionExpression)
		u.UpdateExpression = f.expr(u.UpdateExpression)
		u.ExpressionAttributeNames = f.namesMap(u.ExpressionAttributeNames)
		it.Update = &u
	case it.Delete != nil:
		d := *it.Delete
		f := newFixer(d.ExpressionAttributeNames)
		d.ConditionExpression = f.expr(d.ConditionExpression)
		d.ExpressionAttributeNames = f.namesMap(d.ExpressionAttributeNames)
		it.Delete = &d
	case it.ConditionCheck != nil:
		cc := *it.ConditionCheck
		f := newFixer(cc.ExpressionAttributeNames)
		cc.ConditionExpression = f.expr(cc.ConditionExpression)
		cc.ExpressionAttributeNames = f.namesMap(cc.ExpressionAttributeNames)
		it.ConditionCheck = &cc
	}
	return it
}
