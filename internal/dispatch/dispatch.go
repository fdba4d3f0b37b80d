// Package dispatch is the one dispatcher of the Lambdas that serve several ASL tasks: a Table
// from the payload's "action" to a handler that decodes its own typed input. Every such Lambda
// answers alike: a payload that is not a JSON object, or that does not decode into the
// action's input, and an action the table does not hold are a workflow.InvalidInputError; every error comes back bare through
// workflow.TaskError, so its errorType is a name the ASL's Retry and Catch match.
package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/buyflow/buyflow/internal/workflow"
)

// Handler serves one action: it decodes the raw payload and acts on it.
type Handler func(ctx context.Context, raw json.RawMessage) (any, error)

// Table maps each action a Lambda serves to its handler.
type Table map[workflow.Action]Handler

// Of returns the Handler that decodes the payload into In and calls fn with it. A field In does
// not have is ignored: an execution started before a deploy keeps the payloads of its old
// definition, and a field the new code dropped must not fail a live buy.
func Of[In, Out any](fn func(context.Context, In) (Out, error)) Handler { return of(fn, false) }

// StrictOf is Of refusing a field In does not have, for a task whose input must be exactly its
// type (the campaign's tasks).
func StrictOf[In, Out any](fn func(context.Context, In) (Out, error)) Handler {
	return of(fn, true)
}

func of[In, Out any](fn func(context.Context, In) (Out, error), strict bool) Handler {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var in In
		dec := json.NewDecoder(bytes.NewReader(raw))
		if strict {
			dec.DisallowUnknownFields()
		}
		if err := dec.Decode(&in); err != nil {
			return nil, &workflow.InvalidInputError{Field: "payload", Reason: err.Error()}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// Handle is the Lambda handler: it runs the handler of the payload's action.
func (t Table) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var head struct {
		Action workflow.Action `json:"action"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, &workflow.InvalidInputError{Field: "payload", Reason: "not a JSON object: " + err.Error()}
	}
	h, ok := t[head.Action]
	if !ok {
		return nil, &workflow.InvalidInputError{Field: "action", Reason: fmt.Sprintf("%q is not one of %s", head.Action, t.names())}
	}
	out, err := h(ctx, raw)
	if err != nil {
		return nil, workflow.TaskError(err)
	}
	return out, nil
}

func (t Table) names() string {
	names := make([]string, 0, len(t))
	for a := range t {
		names = append(names, string(a))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
