package agents_test

import (
	"os"
	"testing"

	"github.com/buyflow/buyflow/internal/dynamotest"
)

func TestMain(m *testing.M) {
	os.Exit(dynamotest.RunBoth(m))
}
