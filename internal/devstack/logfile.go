package devstack

import (
	"fmt"
	"os"
)

// NewLogFile creates the functions' log of one run: path when it is not empty, else a new file
// of its own in the temp folder, named prefix-<random>.log. Every local stack and test suite on
// a machine may run at once, so none writes a fixed name another run could truncate or
// interleave with. The caller prints the file's name (f.Name()) and closes it.
func NewLogFile(path, prefix string) (*os.File, error) {
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("devstack: the functions' log: %w", err)
		}
		return f, nil
	}
	f, err := os.CreateTemp("", prefix+"-*.log")
	if err != nil {
		return nil, fmt.Errorf("devstack: the functions' log: %w", err)
	}
	return f, nil
}
