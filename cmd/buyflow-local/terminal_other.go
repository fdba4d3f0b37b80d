//go:build !linux

package main

// ownTerminal changes nothing outside Linux: there Ctrl-C reaches make too, which then reports
// the interruption although the stack stopped cleanly.
func ownTerminal() (restore func()) { return func() {} }
