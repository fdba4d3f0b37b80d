package wire

import (
	"testing"

	"github.com/buyflow/buyflow/internal/benchtest"
)

// TestWiringCostsNoInit: every function links this package and what it wires (the
// configuration and its approval policy, the ledger, the metrics). Their package inits run on
// every cold start before main, so they build nothing costly there: the approval policy's
// identity patterns once took 3,200 allocations (~1 ms of CPU) to compile at init.
func TestWiringCostsNoInit(t *testing.T) {
	benchtest.CheckInitAllocs(t, "github.com/buyflow/", benchtest.OwnInitAllocs)
}

// sdkInitAllocs is the most allocations one of the AWS SDK's packages linked here may make in
// its init: the DynamoDB client's endpoint table makes 687.
const sdkInitAllocs = 1000

// TestSDKCostsNoInit holds the AWS SDK's packages that every function links (the DynamoDB
// client and its types, the attribute value codec) to the same rule. From service/dynamodb
// v1.69 on, the SDK's schema-based serialization builds a schema of every shape of the API at
// init: 3,151 allocations, 2.5–2.9 ms of every cold start, and not faster per call. go.mod keeps
// the module and those that require it at the versions before it; this fails an upgrade that
// brings the cost back.
func TestSDKCostsNoInit(t *testing.T) {
	benchtest.CheckInitAllocs(t, "github.com/aws/", sdkInitAllocs)
}
