package registry_test

import (
	"os"
	"testing"

	"github.com/buyflow/buyflow/internal/dynamotest"
)

// The store's tests run against kumo and against moto's DynamoDB, which checks expressions as
// strictly as AWS (dynamotest.RunBoth).
func TestMain(m *testing.M) {
	os.Exit(dynamotest.RunBoth(m))
}
