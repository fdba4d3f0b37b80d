// Package logtest holds what tests use to read what a component logged. Only tests (and the
// test-support packages) import it.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer collects output written by concurrent writers (handlers logging at once, a child
// process's stderr); String reads it while they still write.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
