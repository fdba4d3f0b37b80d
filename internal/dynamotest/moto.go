package dynamotest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/buyflow/buyflow/internal/motoserver"
)

// Backend names a DynamoDB stand-in that Start creates tables in.
type Backend string

// The stand-ins. Kumo runs in-process and is fast; moto's DynamoDB (moto_server, a Python
// program) validates expressions as AWS does (unaliased reserved words, unused or undefined
// placeholders, overlapping paths, newline-separated clauses) and returns ALL_OLD on a failed
// condition, which kumo does not.
const (
	Kumo Backend = "kumo"
	Moto Backend = "moto"
)

var backend atomic.Value // Backend; Kumo unless RunBoth switched it

// Current returns the backend Start uses now.
func Current() Backend {
	if b, ok := backend.Load().(Backend); ok {
		return b
	}
	return Kumo
}

// RunBoth runs a package's tests twice, from its TestMain: against kumo, then against moto's
// DynamoDB on a free loopback port. Without moto_server on PATH the second run is skipped with
// one line, unless CI=true, where it is a failure (CI's machine has moto). It returns the exit
// code for os.Exit.
func RunBoth(m *testing.M) int {
	code := m.Run()
	if err := motoserver.Available(); err != nil {
		if MotoRequired() {
			fmt.Fprintf(os.Stderr, "dynamotest: %v; CI requires it\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "dynamotest: SKIP the second run against moto's DynamoDB: %v\n", err)
		return code
	}
	srv, err := motoserver.Start(motoserver.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "dynamotest:", err)
		return 1
	}
	defer srv.Stop()
	fmt.Fprintf(os.Stderr, "dynamotest: the same tests again, against moto's DynamoDB at %s\n", srv.URL)
	motoURL.Store(srv.URL)
	backend.Store(Moto)
	defer backend.Store(Kumo)
	if c := m.Run(); c != 0 {
		fmt.Fprintln(os.Stderr, "dynamotest: FAIL against moto's DynamoDB (the run above)")
		return c
	}
	return code
}

var motoURL atomic.Value // string

// MotoRequired reports whether a missing moto_server is a failure rather than a skip: on CI
// (CI=true), whose machine has moto.
func MotoRequired() bool { return os.Getenv("CI") == "true" }

// SkipOnMoto skips t during the moto run of [RunBoth], for a behaviour of AWS that moto does
// not reproduce (why says which).
func SkipOnMoto(t testing.TB, why string) {
	t.Helper()
	if Current() == Moto {
		t.Skip("not on moto's DynamoDB: " + why)
	}
}

// MotoServer starts a moto_server of t's own (every moto service, SQS and KMS included; KMS
// mended as motoserver says) and returns its URL; it stops with t. Without moto_server on
// PATH t is skipped, unless CI=true.
func MotoServer(t testing.TB) string {
	t.Helper()
	return motoServer(t, motoserver.Options{})
}

// StockMotoServer is MotoServer with moto as shipped (motoserver.Options.Stock).
func StockMotoServer(t testing.TB) string {
	t.Helper()
	return motoServer(t, motoserver.Options{Stock: true})
}

func motoServer(t testing.TB, o motoserver.Options) string {
	t.Helper()
	if err := motoserver.Available(); err != nil {
		if MotoRequired() {
			t.Fatalf("%v; CI requires it", err)
		}
		t.Skip(err)
	}
	srv, err := motoserver.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv.URL
}
