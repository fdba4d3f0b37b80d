package breaker_test

import (
	"os"
	"testing"

	"github.com/buyflow/buyflow/internal/dynamotest"
)

// The gate's tests run against kumo and against moto's DynamoDB (dynamotest.RunBoth), as the
// ledger's do: the breaker is only as good as the conditional writes under it.
func TestMain(m *testing.M) {
	os.Exit(dynamotest.RunBoth(m))
}
