// Package archtest guards the import graph: Lambdas never link CDK, leaf packages stay leaves,
// and the direction of dependencies in STYLE.md holds. It has tests only.
package archtest
