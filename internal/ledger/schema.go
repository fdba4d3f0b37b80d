package ledger

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute and index names of the ledger table. The CDK stack, the local stack and the tests
// all create the table from [TableSchema], which is built from these names.
const (
	// AttrPK is the partition key attribute (string).
	AttrPK = "pk"
	// AttrSK is the sort key attribute (string).
	AttrSK = "sk"
	// AttrTTL is the time-to-live attribute (number, Unix seconds). DynamoDB deletes lazily, so
	// every condition that depends on expiry checks its own expiry attribute too.
	AttrTTL = "ttl"

	// indexPending (gsi1) lists pending operations by status and last update, for reconciliation.
	// Sparse: only operations in a non-terminal status carry its keys.
	indexPending = "gsi1"
	// AttrGSI1PK is gsi1's partition key: "PENDING#<status>".
	AttrGSI1PK = "gsi1pk"
	// AttrGSI1SK is gsi1's sort key: "<updated_at RFC3339Nano UTC>#<tenant>#<operation id>".
	AttrGSI1SK = "gsi1sk"

	// indexTenant (gsi2) lists a tenant's operations by creation time.
	indexTenant = "gsi2"
	// attrGSI2PK is gsi2's partition key: "TENANT#<tenant>".
	attrGSI2PK = "gsi2pk"
	// attrGSI2SK is gsi2's sort key: "<created_at RFC3339Nano UTC>#<operation id>".
	attrGSI2SK = "gsi2sk"

	// indexSeller (gsi3) lists one seller's pending operations, for the sweep's per-seller
	// shards. Sparse like gsi1: only operations in a pending status carry its keys.
	indexSeller = "gsi3"
	// attrGSI3PK is gsi3's partition key: the operation's seller id.
	attrGSI3PK = "gsi3pk"
	// attrGSI3SK is gsi3's sort key: "<tenant>#<operation id>" (fixed for the operation's
	// life: a write that keeps the status leaves the index keys alone).
	attrGSI3SK = "gsi3sk"
)

// TableSchema returns the CreateTableInput of the ledger table named name: string keys pk/sk,
// on-demand billing, the three GSIs (projection ALL) and a stream of new and old images (the
// status events are published from it: a transition is an operation whose status differs
// between the two). The TTL attribute (AttrTTL) is not part of
// CreateTable; enable it with UpdateTimeToLive (the CDK stack sets TimeToLiveAttribute).
func TableSchema(name string) *dynamodb.CreateTableInput {
	str := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
	}
	key := func(hash, rng string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange},
		}
	}
	gsi := func(name, hash, rng string) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{
			IndexName:  aws.String(name),
			KeySchema:  key(hash, rng),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}
	}
	return &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			str(AttrPK), str(AttrSK), str(AttrGSI1PK), str(AttrGSI1SK), str(attrGSI2PK), str(attrGSI2SK), str(attrGSI3PK), str(attrGSI3SK),
		},
		KeySchema:   key(AttrPK, AttrSK),
		BillingMode: types.BillingModePayPerRequest,
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			gsi(indexPending, AttrGSI1PK, AttrGSI1SK),
			gsi(indexTenant, attrGSI2PK, attrGSI2SK),
			gsi(indexSeller, attrGSI3PK, attrGSI3SK),
		},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	}
}

// TimeToLive returns the UpdateTimeToLiveInput that enables TTL on AttrTTL for the table name.
func TimeToLive(name string) *dynamodb.UpdateTimeToLiveInput {
	return &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(AttrTTL),
			Enabled:       aws.Bool(true),
		},
	}
}
