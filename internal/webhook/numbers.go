package webhook

import (
	"errors"

	"github.com/buyflow/buyflow/internal/jsonnum"
)

// boundNumbers refuses a delivery holding a number over jsonnum's bounds before anything
// decodes it (the result it carries is later read by the AdCP decoders and may reach the
// schema library, which panics on some of them).
func boundNumbers(body []byte) error {
	var ne *jsonnum.Error
	if err := jsonnum.Check(body); errors.As(err, &ne) {
		return &DeliveryError{Field: ne.Pointer, Reason: ne.Err.Error()}
	}
	return nil
}
