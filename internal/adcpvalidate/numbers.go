package adcpvalidate

import (
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/jsonnum"
)

// boundNumbers refuses, as a validation error at its field, a number in body that
// github.com/santhosh-tekuri/jsonschema v6.0.3 cannot compare: for 1e10000000 it dereferences
// the nil *big.Rat that math/big returns and panics (there is no later release). jsonnum's
// bounds sit far inside what the library handles.
func boundNumbers(tool, schema string, body []byte) error {
	var ne *jsonnum.Error
	if err := jsonnum.Check(body); errors.As(err, &ne) {
		return &adcp.ValidationError{Tool: tool, Schema: schema, Pointer: ne.Pointer, Reason: ne.Err.Error(),
			Issues: []adcp.Issue{{Pointer: ne.Pointer, Reason: ne.Err.Error()}}}
	}
	return nil
}

// validateRecovering runs the schema library, turning a panic inside it (a defect of the
// library on some input nobody has found yet) into an error instead of the process's end.
func validateRecovering(s *jsonschema.Schema, inst any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("adcp: the schema validator failed on this input: %v", r)
		}
	}()
	return s.Validate(inst)
}
