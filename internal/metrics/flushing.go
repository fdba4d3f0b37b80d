package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Flushing wraps a Lambda handler so that the metrics rec collected during one invocation are
// written (EMF lines) when it returns, on every path, errors and panics included. Every
// function's main wraps its handler with it.
//
// A panic in h is recovered (see Recovered) and returned as a *PanicError: the Lambda runtime
// would otherwise report it and end the process, and every request or task routed to that
// instance afterwards would wait for a cold start or fail.
func Flushing[In, Out any](rec *Recorder, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (out Out, err error) {
		defer func() {
			if err := rec.Flush(); err != nil {
				slog.WarnContext(ctx, "metrics not written", "err", err)
			}
		}()
		defer Recovered(ctx, rec, func(p *PanicError) { err = p })
		return h(ctx, in)
	}
}

// PanicError is a panic recovered at a handler's boundary. Step Functions sees its type name
// ("PanicError") as the error, which no Retry matches: a bug fails the step, it is not retried.
type PanicError struct {
	Value any
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("internal error: the handler panicked: %v", e.Value)
}

// Recovered, deferred at a handler's boundary, recovers a panic: it logs it with its stack,
// counts it as HandlerPanics and hands it to answer, which sets the handler's result. It does
// nothing when there is no panic.
func Recovered(ctx context.Context, rec *Recorder, answer func(*PanicError)) {
	v := recover()
	if v == nil {
		return
	}
	slog.ErrorContext(ctx, "handler panicked", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	rec.Count(handlerPanics, Dims{"Function": functionName()}, 1)
	answer(&PanicError{Value: v})
}

func functionName() string {
	if lambdacontext.FunctionName != "" {
		return lambdacontext.FunctionName
	}
	return "local"
}
