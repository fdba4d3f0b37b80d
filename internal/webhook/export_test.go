package webhook

import (
	"context"
	"errors"
	"fmt"

	"github.com/buyflow/buyflow/internal/adcp"
)

// BuildVerifiers builds one verifier per agent of reg that has webhook settings, reading HMAC
// and bearer secrets once: what RegistryVerifiers does for one agent on its first webhook,
// here for a whole registry so the tests can check every verification mode at once. A secret is either the raw value or a JSON object
// {"current": "…", "previous": "…"} during a rotation. Every problem is reported together.
func BuildVerifiers(ctx context.Context, reg *adcp.Registry, sec Secrets, o VerifierOptions) (map[string]Verifier, error) {
	out := map[string]Verifier{}
	var errs []error
	for _, id := range reg.IDs() {
		a, err := reg.Agent(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v, err := buildVerifier(ctx, a, sec, o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v != nil {
			out[id] = v
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("webhook: build verifiers: %w", errors.Join(errs...))
	}
	return out, nil
}
