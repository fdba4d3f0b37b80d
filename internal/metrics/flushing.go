package metrics

import (
	"context"
	"log/slog"
)

// Flushing wraps a Lambda handler so that the metrics rec collected during one invocation are
// written (EMF lines) when it returns, on every path, errors included. Every function's main
// wraps its handler with it.
func Flushing[In, Out any](rec *Recorder, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		defer func() {
			if err := rec.Flush(); err != nil {
				slog.WarnContext(ctx, "metrics not written", "err", err)
			}
		}()
		return h(ctx, in)
	}
}
