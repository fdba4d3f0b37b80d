package ledger

// PortableInput is the rewrite EmulatorCompat applies, for the test of its properties.
var PortableInput = rewrite
