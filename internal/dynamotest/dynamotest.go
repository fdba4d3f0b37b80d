// Package dynamotest starts an in-process DynamoDB stand-in (kumo) for tests and creates the
// ledger table in it from ledger.TableSchema, so every package's tests use the same table as the
// CDK stack and the local stack.
package dynamotest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/sivchari/kumo"

	"github.com/buyflow/buyflow/internal/ledger"
)

var (
	seq atomic.Int64
	// server is shared by every Start in the process: kumo servers share their state anyway, and
	// kumo.NewServer is not safe to call concurrently (it rewires package-level services).
	server = sync.OnceValue(kumo.NewServer)
)

// Start starts the process's kumo server in-process (once), returns a DynamoDB client pointed at it (static dummy
// credentials, region us-east-1, [ledger.EmulatorCompat]) and the name of a freshly created ledger table, unique to this
// call (all kumo servers in one process share state). During the second run of [RunBoth] the client and
// table are moto's instead. The table is deleted when the test ends; the
// server lives until the process exits. Do not call kumo.NewServer elsewhere in the same test
// binary while tests run in parallel.
func Start(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	endpoint := ""
	if Current() == Moto {
		endpoint, _ = motoURL.Load().(string)
	} else {
		endpoint = server().URL
	}
	client := clientOf(endpoint)
	name := fmt.Sprintf("ledger-%d-%d", time.Now().UnixNano(), seq.Add(1))
	if err := CreateTable(context.Background(), client, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Best effort: a leftover table only costs memory in the shared server.
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return client, name
}

// CreateTable creates the ledger table name through client, from ledger.TableSchema and with
// its time to live, as Start does: for a table its caller names and deletes (one made outside
// a test, or one other processes are pointed at). name must be new: a table of that name
// already there is this call's own, created by an attempt whose response was lost (a loaded
// moto answered the SDK's retry "Table already exists").
func CreateTable(ctx context.Context, client *dynamodb.Client, name string) error {
	var inUse *types.ResourceInUseException
	if _, err := client.CreateTable(ctx, ledger.TableSchema(name)); err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamotest: create table %s: %w", name, err)
	}
	if _, err := client.UpdateTimeToLive(ctx, ledger.TimeToLive(name)); err != nil {
		return fmt.Errorf("dynamotest: enable ttl on %s: %w", name, err)
	}
	return nil
}

// region and credentials are what every client of a stand-in is given: static dummy keys.
const region = "us-east-1"

var dummyCredentials = credentials.NewStaticCredentialsProvider("test", "test", "")

// clientOf is a DynamoDB client of the stand-in at endpoint: static dummy credentials, region
// us-east-1, ledger.EmulatorCompat.
func clientOf(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  dummyCredentials,
	}, ledger.EmulatorCompat)
}

// AWSConfig starts the process's kumo server (once) and returns an AWS configuration for it:
// region us-east-1, static dummy credentials and the server's URL as the base endpoint, for
// clients of what kumo serves on that URL (DynamoDB, Secrets Manager, SSM, ...). It is always
// kumo's, also during the second run of [RunBoth]; a DynamoDB client made from it wants
// ledger.EmulatorCompat, as [Start]'s has.
func AWSConfig() aws.Config {
	return aws.Config{Region: region, BaseEndpoint: aws.String(Endpoint()), Credentials: dummyCredentials}
}

// Endpoint starts the process's kumo server (once) and returns its URL, for tests that run
// other processes against it (kumo serves DynamoDB, Secrets Manager and more on that one URL).
// Tables such callers create are theirs to name uniquely and to delete.
func Endpoint() string { return server().URL }
