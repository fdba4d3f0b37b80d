package adcp

// SetTestValidator lets the external test package, which may import internal/adcpvalidate,
// give this package's tests their validator.
func SetTestValidator(v RequestValidator) { testValidators = v }
