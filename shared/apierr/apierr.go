// Package apierr defines the application error codes of freqcap's HTTP APIs
// (design.md) and the error type that carries them.
package apierr

import (
	"context"
	"errors"
	"fmt"
)

// Codes sent in the "code" field of every JSON answer.
const (
	OK              = 0
	Timeout         = 10001
	KeyNotFound     = 10002
	InvalidArgument = 10003
	Unavailable     = 10004
	Internal        = 10005
)

// Error is an application error: a code and a message safe to show callers.
type Error struct {
	Code int
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Invalid returns an InvalidArgument error with a formatted message.
func Invalid(format string, args ...any) error {
	return &Error{Code: InvalidArgument, Msg: fmt.Sprintf(format, args...)}
}

// Unavailablef returns an Unavailable error with a formatted message.
func Unavailablef(format string, args ...any) error {
	return &Error{Code: Unavailable, Msg: fmt.Sprintf(format, args...)}
}

// CodeOf returns the application code of err: the code of an *Error in its
// chain, Timeout for context deadlines, Internal otherwise.
func CodeOf(err error) int {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Timeout
	}
	return Internal
}
