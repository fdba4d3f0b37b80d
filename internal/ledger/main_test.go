package ledger_test

import (
	"os"
	"testing"

	"github.com/buyflow/buyflow/internal/dynamotest"
)

// The ledger's tests run twice: against kumo, and against moto's DynamoDB, which validates
// expressions as AWS does and returns ALL_OLD on a failed condition (dynamotest.RunBoth).
func TestMain(m *testing.M) {
	os.Exit(dynamotest.RunBoth(m))
}

// motoNotIsolated is why the races (N writers, one winner) run on kumo only. Measured with
// moto 5.2.1 under this suite's load: 2 winners of 50 conditional claims, and three
// transactions conditioned on version 1 all succeeding; AWS (and kumo) let exactly one win.
const motoNotIsolated = "moto does not isolate concurrent conditional writes (several writers win a race AWS lets one win)"
