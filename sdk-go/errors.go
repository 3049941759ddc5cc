package serviceprovider

import (
	"errors"
	"fmt"
)

// InvalidInputError says the tenant must change the service object (or the
// platform operator the ProviderConfig): the host shows Message in the
// status and looks again after RequeueAfterSeconds (0: only on change).
type InvalidInputError struct {
	Message             string `json:"message"`
	RequeueAfterSeconds uint32 `json:"requeueAfterSeconds"`
}

func (e *InvalidInputError) Error() string { return e.Message }

// InvalidInput is an [InvalidInputError].
func InvalidInput(requeueAfterSeconds uint32, format string, args ...any) error {
	return &InvalidInputError{Message: fmt.Sprintf(format, args...), RequeueAfterSeconds: requeueAfterSeconds}
}

// Transient is a failure the host retries with backoff. Any error that is
// not an *InvalidInputError counts as transient; Transient only formats.
func Transient(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

// invalidInput is err as an *InvalidInputError, if it is one.
func invalidInput(err error) (*InvalidInputError, bool) {
	var invalid *InvalidInputError
	ok := errors.As(err, &invalid)
	return invalid, ok
}
