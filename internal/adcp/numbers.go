package adcp

import (
	"errors"
	"fmt"

	"github.com/buyflow/buyflow/internal/jsonnum"
)

// boundAnswer refuses an agent's answer that holds a number over jsonnum's bounds, before
// anything decodes it: a protocol error, terminal, like any other answer buyflow cannot read.
func boundAnswer(body []byte) error {
	var ne *jsonnum.Error
	if err := jsonnum.Check(body); errors.As(err, &ne) {
		return &Error{Kind: KindProtocol, Recovery: RecoveryTerminal, Err: fmt.Errorf("decode payload: %w", ne)}
	}
	return nil
}
