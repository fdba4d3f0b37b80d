// Package archtest guards the import graph: Lambdas never link CDK, leaf packages stay leaves,
// and dependencies point from the Lambdas down to leaf packages, never back. It has tests only.
package archtest
