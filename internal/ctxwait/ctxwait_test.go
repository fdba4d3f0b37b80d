package ctxwait

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepWaitsItsDurationOrItsContext(t *testing.T) {
	start := time.Now()
	if err := Sleep(context.Background(), 20*time.Millisecond); err != nil || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("Sleep(20ms) = %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Minute {
		t.Fatalf("Sleep on a done context = %v after %v; want context.Canceled at once", err, time.Since(start))
	}
}
