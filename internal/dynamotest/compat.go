package dynamotest

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/buyflow/buyflow/internal/ledger"
)

// KumoCompat is a client option that passes every request through ledger.PortableInput, so that
// code outside the ledger that builds expressions with feature/dynamodb/expression is evaluated
// by kumo as DynamoDB would (see PortableInput for the two kumo defects). The ledger's Store
// already does this itself; the option is for other callers of the same client. Start applies it.
func KumoCompat(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("KumoCompat",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				in.Parameters = ledger.PortableInput(in.Parameters)
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}
