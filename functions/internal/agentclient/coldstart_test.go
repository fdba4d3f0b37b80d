package agentclient

import (
	"testing"

	"github.com/buyflow/buyflow/internal/benchtest"
)

// TestLinkingTheValidatorCostsNoInit: every function that calls agents links the JSON Schema
// library through the request validator. Upstream compiles every draft's metaschema in its
// package init (21,000 allocations, ~5 ms of CPU per cold start); the patched copy
// (third_party/jsonschema) compiles them on the first schema compiled, so its init allocates
// next to nothing. buyflow's own packages that such a function links stay as cheap.
func TestLinkingTheValidatorCostsNoInit(t *testing.T) {
	benchtest.CheckInitAllocs(t, "github.com/santhosh-tekuri/jsonschema/", 500)
	benchtest.CheckInitAllocs(t, "github.com/buyflow/", benchtest.OwnInitAllocs)
}
