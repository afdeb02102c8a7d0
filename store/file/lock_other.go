//go:build !unix

package file

import "os"

// lockFile does nothing where flock is not available: there, keeping a
// second broker off a store file is up to the operator.
func lockFile(*os.File) error { return nil }
