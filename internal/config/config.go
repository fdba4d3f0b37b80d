// Package config reads a function's environment once per cold start and reports every
// problem together, so a misconfigured deployment fails its first invocation with one clear
// message instead of one variable at a time.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Env collects values and problems from getenv.
type Env struct {
	getenv   func(string) string
	problems []string
}

// New returns an Env reading through getenv (os.Getenv in main, a map in tests).
func New(getenv func(string) string) *Env { return &Env{getenv: getenv} }

// Required returns the variable name, recording a problem when it is empty.
func (e *Env) Required(name string) string {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		e.problems = append(e.problems, name+" is not set")
	}
	return v
}

// Optional returns the variable name or def when it is empty.
func (e *Env) Optional(name, def string) string {
	if v := strings.TrimSpace(e.getenv(name)); v != "" {
		return v
	}
	return def
}

// JSON decodes the variable name into v when it is set (strictly: unknown fields are a
// problem), recording a problem when it is required and empty or does not decode.
func (e *Env) JSON(name string, required bool, v any) {
	raw := strings.TrimSpace(e.getenv(name))
	if raw == "" {
		if required {
			e.problems = append(e.problems, name+" is not set")
		}
		return
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		e.problems = append(e.problems, fmt.Sprintf("%s is not valid: %v", name, err))
	}
}

// Check records err as a problem with the variable name when err is not nil.
func (e *Env) Check(name string, err error) {
	if err != nil {
		e.problems = append(e.problems, fmt.Sprintf("%s: %v", name, err))
	}
}

// Err returns every recorded problem as one error, or nil.
func (e *Env) Err() error {
	if len(e.problems) == 0 {
		return nil
	}
	return errors.New("configuration: " + strings.Join(e.problems, "; "))
}
