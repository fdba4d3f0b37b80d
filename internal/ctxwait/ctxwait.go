// Package ctxwait waits for a while or until a context is done, whichever comes first: the
// pause of a retry or of a poll that must not outlive its caller's deadline.
package ctxwait

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx is done, when it returns ctx's error. The timer is stopped
// either way, so a cancelled wait leaves nothing behind.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
