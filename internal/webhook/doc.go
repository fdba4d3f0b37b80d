// Package webhook authenticates inbound AdCP seller webhooks.
//
// Full invariants are documented below the API; see Verifier.
package webhook
